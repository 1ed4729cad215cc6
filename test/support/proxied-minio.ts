/** MinIO, and a store that reaches it through the S3 fault proxy, for the tests of one describe block. */
import { S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll } from 'vitest';
import { createS3ObjectStore, type ObjectStore } from '../../src/store';
import { startS3FaultProxy, type S3FaultProxy } from './s3-fault-proxy';
import { openTestStore, s3ClientConfig, type TestStore } from './stores';

export interface ProxiedMinio {
  /** MinIO itself: what the tests read and arrange directly. */
  readonly fixture: TestStore;
  readonly proxy: S3FaultProxy;
  /** The same bucket through the proxy, where faults are scripted. */
  readonly viaProxy: ObjectStore;
}

/**
 * Opens MinIO and the proxy before the block's tests and closes them after. The proxied store's
 * deadline is far longer than any hold: a held write is late, not abandoned by its client.
 */
export function proxiedMinio(): ProxiedMinio {
  const opened: { -readonly [K in keyof ProxiedMinio]?: ProxiedMinio[K] } = {};
  beforeAll(async () => {
    const fixture = await openTestStore('minio');
    const proxy = await startS3FaultProxy(fixture.endpoint!.endpoint);
    Object.assign(opened, {
      fixture,
      proxy,
      viaProxy: createS3ObjectStore({
        bucket: fixture.bucket!,
        client: new S3Client({ ...s3ClientConfig(fixture.endpoint!), endpoint: proxy.endpoint }),
        operationDeadlineMs: 60_000,
      }),
    });
  });
  afterAll(async () => {
    await opened.viaProxy?.close();
    await opened.proxy?.stop();
    await opened.fixture?.store.close();
  });
  return opened as ProxiedMinio;
}
