/**
 * What a run records as its store, from a worker's store or a client's environment, and when two records name the same
 * store.
 */
import { describe, expect, it } from 'vitest';
import {
  createEmbeddedObjectStore,
  createS3ObjectStore,
  sameStore,
  storeIdentity,
  storeIdentityFromEnv,
} from '../../src/store';
import { s3Identity } from '../../src/store/s3';

describe('store identity', () => {
  it('S3: the bucket and the endpoint, given to the client or read from the environment as the AWS SDK reads it, normalised', async () => {
    const given = createS3ObjectStore({
      bucket: 'metadata',
      clientConfig: { region: 'us-east-1', endpoint: 'http://127.0.0.1:9000/' },
    });
    expect(await storeIdentity(given)).toBe('s3://metadata at http://127.0.0.1:9000');
    expect(
      storeIdentityFromEnv({ COMPACTION_S3_BUCKET: 'metadata', AWS_ENDPOINT_URL_S3: 'http://127.0.0.1:9000' }),
    ).toBe('s3://metadata at http://127.0.0.1:9000');
    expect(storeIdentityFromEnv({ COMPACTION_S3_BUCKET: 'metadata', AWS_ENDPOINT_URL: 'https://minio.internal' })).toBe(
      's3://metadata at https://minio.internal',
    );
    expect(s3Identity('metadata', undefined, {})).toBe('s3://metadata');
    await given.close();
  });

  it('embedded: the absolute file; an in-memory store is its own; a client naming no store records none', async () => {
    expect(storeIdentityFromEnv({ COMPACTION_EMBEDDED_STORE: 'data/store.sqlite' })).toBe(
      `embedded:${process.cwd()}/data/store.sqlite`,
    );
    const [a, b] = [createEmbeddedObjectStore({ path: ':memory:' }), createEmbeddedObjectStore({ path: ':memory:' })];
    expect(await storeIdentity(a)).not.toBe(await storeIdentity(b));
    expect(storeIdentityFromEnv({})).toBeUndefined();
    await Promise.all([a.close(), b.close()]);
  });

  it('the same bucket reached at two endpoints (a proxy, a VPC endpoint) is one store; another bucket, or a file, is not', () => {
    expect(sameStore('s3://metadata at http://proxy:9001', 's3://metadata at http://minio:9000')).toBe(true);
    expect(sameStore('s3://metadata', 's3://metadata at https://bucket.vpce-1.s3.us-east-1.vpce.amazonaws.com')).toBe(
      true,
    );
    expect(sameStore('s3://metadata at http://minio:9000', 's3://other at http://minio:9000')).toBe(false);
    expect(sameStore('s3://metadata', 'embedded:/srv/data/store.sqlite')).toBe(false);
    expect(sameStore('embedded:/a at b/store.sqlite', 'embedded:/a at c/store.sqlite')).toBe(false);
  });
});
