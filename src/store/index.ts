import { createEmbeddedObjectStore, EMBEDDED_ENV } from './embedded';
import type { ObjectStore } from './port';
import { createS3ObjectStore, S3_ENV, s3OptionsFromEnv } from './s3';

export * from './port';
export { createS3ObjectStore, s3OptionsFromEnv, S3_ENV, type S3StoreOptions } from './s3';
export { createEmbeddedObjectStore, EMBEDDED_ENV, type EmbeddedStoreOptions } from './embedded';

/** The default embedded store file, relative to the working directory. */
export const DEFAULT_EMBEDDED_PATH = 'data/store.sqlite';

/** S3 when `COMPACTION_S3_BUCKET` is set, else the embedded store at `COMPACTION_EMBEDDED_STORE` (default `./data/store.sqlite`). */
export function objectStoreFromEnv(env: NodeJS.ProcessEnv = process.env, operationDeadlineMs?: number): ObjectStore {
  if (env[S3_ENV.bucket]) return createS3ObjectStore({ ...s3OptionsFromEnv(env), operationDeadlineMs });
  return createEmbeddedObjectStore({ path: env[EMBEDDED_ENV] || DEFAULT_EMBEDDED_PATH });
}
