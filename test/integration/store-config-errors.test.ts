/** Bad settings give a typed error that names the setting, before anything is written. */
import { S3Client } from '@aws-sdk/client-s3';
import { CredentialsProviderError } from '@smithy/core/config';
import { describe, expect, inject, it, vi } from 'vitest';
import { createServer } from 'node:http';
import { namespaceId } from '../../src/keys';
import { readRoot } from '../../src/protocol';
import { readGroupSnapshot } from '../../src/reader';
import { jsonRootCodec } from '../../src/root';
import {
  AmbiguousError,
  createEmbeddedObjectStore,
  createS3ObjectStore,
  NotFoundError,
  objectStoreFromEnv,
  s3OptionsFromEnv,
  StoreConfigError,
  StoreUnavailableError,
} from '../../src/store';
import { writeInputSegment } from '../../src/writer';
import { freePort } from '../../src/devservers';
import { createTestBucket, s3ClientConfig } from '../support/stores';

describe('store configuration errors', () => {
  it('a missing bucket names COMPACTION_S3_BUCKET', async () => {
    const store = createS3ObjectStore({
      bucket: 'no-such-bucket-here',
      client: new S3Client(s3ClientConfig(inject('minio'))),
    });
    await expect(store.verifyAccess()).rejects.toThrow(StoreConfigError);
    await expect(store.verifyAccess()).rejects.toThrow(/no-such-bucket-here does not exist \(COMPACTION_S3_BUCKET\)/);
    await expect(store.putIfAbsent('k', new Uint8Array(1))).rejects.toThrow(/COMPACTION_S3_BUCKET/);
  });

  it('rejected credentials name the credential settings', async () => {
    const minio = inject('minio');
    const bucket = await createTestBucket(minio);
    const client = new S3Client(s3ClientConfig({ ...minio, secretKey: 'wrong-secret' }));
    const store = createS3ObjectStore({ bucket, client });
    await expect(store.verifyAccess()).rejects.toThrow(StoreConfigError);
    await expect(store.get('k')).rejects.toThrow(/AWS_SECRET_ACCESS_KEY/);
  });

  it('no credentials anywhere in the chain is a configuration error naming the credential settings, not an outage', async () => {
    const minio = inject('minio');
    const bucket = await createTestBucket(minio);
    // What the SDK's default chain throws when every provider came up empty.
    const credentials = () =>
      Promise.reject(new CredentialsProviderError('Could not load credentials from any providers', false));
    const store = createS3ObjectStore({ bucket, client: new S3Client({ ...s3ClientConfig(minio), credentials }) });
    await expect(store.verifyAccess()).rejects.toThrow(StoreConfigError);
    await expect(store.get('k')).rejects.toThrow(
      /no AWS credentials found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE/,
    );
  });

  it('an unreachable endpoint names AWS_ENDPOINT_URL_S3', async () => {
    const port = await freePort();
    const client = new S3Client({
      ...s3ClientConfig(inject('minio')),
      endpoint: `http://127.0.0.1:${port}`,
      maxAttempts: 1,
    });
    const store = createS3ObjectStore({ bucket: 'any', client, operationDeadlineMs: 5000 });
    await expect(store.verifyAccess()).rejects.toThrow(/AWS_ENDPOINT_URL_S3/);
  });

  // Before the rule "an endpoint that never answered is configuration", the writer's first PUT failed as AmbiguousError
  // (ECONNREFUSED).
  it("the library's writer and readers on an endpoint that never answered throw StoreConfigError naming AWS_ENDPOINT_URL_S3, not an outage", async () => {
    const port = await freePort();
    const unreachable = () =>
      createS3ObjectStore({
        bucket: 'any',
        client: new S3Client({
          ...s3ClientConfig(inject('minio')),
          endpoint: `http://127.0.0.1:${port}`,
          maxAttempts: 1,
        }),
        operationDeadlineMs: 5000,
      });
    const write = writeInputSegment(unreachable(), { namespaceId: 'tenant-7', group: 'inodes' }, [
      { key: 'k', seq: 1, value: 'v' },
    ]);
    await expect(write).rejects.toThrow(StoreConfigError);
    await expect(write).rejects.toThrow(/cannot reach the S3 endpoint \(.*ECONNREFUSED.*\); check AWS_ENDPOINT_URL_S3/);
    await expect(
      readGroupSnapshot(unreachable(), { namespaceId: 'tenant-7', group: 'inodes' }, jsonRootCodec),
    ).rejects.toThrow(StoreConfigError);
    await expect(readRoot(unreachable(), namespaceId('tenant-7'), jsonRootCodec)).rejects.toThrow(
      /AWS_ENDPOINT_URL_S3/,
    );
  });

  it('once the endpoint has answered, the same refusal is an outage, retried: StoreUnavailableError on a read, AmbiguousError on a write', async () => {
    // An endpoint that answers every request "no such key", until it goes away.
    const server = createServer((_, res) =>
      res
        .writeHead(404, { 'content-type': 'application/xml' })
        .end('<Error><Code>NoSuchKey</Code><Message>none</Message></Error>'),
    );
    const port = await freePort();
    await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
    const store = createS3ObjectStore({
      bucket: 'any',
      client: new S3Client({
        ...s3ClientConfig(inject('minio')),
        endpoint: `http://127.0.0.1:${port}`,
        maxAttempts: 1,
      }),
      operationDeadlineMs: 5000,
    });
    await expect(store.get('k')).rejects.toThrow(NotFoundError);
    await new Promise<void>((resolve) => server.close(() => resolve()));
    server.closeAllConnections();
    await expect(store.get('k')).rejects.toThrow(StoreUnavailableError);
    await expect(store.put('k', new Uint8Array(1))).rejects.toThrow(AmbiguousError);
  });

  it('the environment selects S3 by its bucket, else the embedded store; S3 without a bucket names the setting', () => {
    expect(() => s3OptionsFromEnv({})).toThrow(/COMPACTION_S3_BUCKET is not set/);
    expect(objectStoreFromEnv({ COMPACTION_S3_BUCKET: 'b', AWS_REGION: 'us-east-1' }).description).toBe('s3://b');
    expect(objectStoreFromEnv({ COMPACTION_EMBEDDED_STORE: ':memory:' }).description).toBe('embedded::memory:');
  });

  it('the S3 bounds come from COMPACTION_S3_*; a value that is not a positive whole number names its variable', () => {
    const env = {
      COMPACTION_S3_BUCKET: 'b',
      COMPACTION_S3_MAX_SOCKETS: '64',
      COMPACTION_S3_READ_WINDOW_BYTES: '65536',
      COMPACTION_S3_MAX_CONCURRENT_READS: '8',
      COMPACTION_S3_IDLE_TIMEOUT_MS: '5000',
    };
    expect(s3OptionsFromEnv(env)).toMatchObject({
      maxSockets: 64,
      readWindowBytes: 65536,
      maxConcurrentReads: 8,
      idleTimeoutMs: 5000,
    });
    for (const bad of ['0', '-1', '1.5', 'many']) {
      expect(() => s3OptionsFromEnv({ ...env, COMPACTION_S3_MAX_SOCKETS: bad })).toThrow(StoreConfigError);
      expect(() => s3OptionsFromEnv({ ...env, COMPACTION_S3_MAX_SOCKETS: bad })).toThrow(/COMPACTION_S3_MAX_SOCKETS/);
    }
  });

  it('on a Node without node:sqlite, opening the embedded store names the Node version and both ways out', () => {
    // Node 20 has no node:sqlite: process.getBuiltinModule answers undefined for it, as here.
    const lookup = vi.spyOn(process, 'getBuiltinModule').mockImplementation(() => undefined as never);
    try {
      expect(() => createEmbeddedObjectStore({ path: ':memory:' })).toThrow(StoreConfigError);
      expect(() => createEmbeddedObjectStore({ path: ':memory:' })).toThrow(
        `the embedded store needs node:sqlite, which Node ${process.version} lacks: run Node 24`,
      );
      expect(() => createEmbeddedObjectStore({ path: ':memory:' })).toThrow(/or use S3 \(COMPACTION_S3_BUCKET\)/);
    } finally {
      lookup.mockRestore();
    }
  });
});
