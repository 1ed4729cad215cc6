import type { S3Endpoint } from '../src/devservers';

// Values test/global-setup.ts hands to the integration tests via `inject(...)`.
declare module 'vitest' {
  export interface ProvidedContext {
    /** host:port of the Temporal dev server's gRPC frontend (namespace `default`). */
    temporalAddress: string;
    minio: S3Endpoint;
    /** Single-threaded moto: conditional writes are atomic, as on real S3. */
    moto: S3Endpoint;
    /** Only with `COMPACTION_TEST_STORES=seaweedfs` (scripts/check-stores.sh). */
    seaweedfs: S3Endpoint | undefined;
  }
}
