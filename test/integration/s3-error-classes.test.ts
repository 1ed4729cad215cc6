/**
 * S3 failures classified by what they are (issue 28, item 4): an answer that says "not now" is
 * retryable, whatever its status class; one that says the settings are wrong is configuration,
 * which no retry mends. Each answer is given by the fault proxy in front of a real MinIO, and
 * reaches the S3 adapter through the AWS SDK and its own retries.
 */
import { S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  AmbiguousError,
  createS3ObjectStore,
  StoreConfigError,
  StoreUnavailableError,
  type ObjectStore,
} from '../../src/store';
import { startS3FaultProxy, type ErrorAnswer, type S3FaultProxy, type S3Request } from '../support/s3-fault-proxy';
import { openTestStore, s3ClientConfig, type TestStore } from '../support/stores';

const bytes = (s: string) => new TextEncoder().encode(s);
const text = (b: Uint8Array) => new TextDecoder().decode(b);
let keyCounter = 0;
const freshKey = (name: string) => `namespaces/classes/${name}-${keyCounter++}`;
const forKey = (key: string) => (r: S3Request) => r.key === key;

/**
 * Answers S3 or a store in front of it gives when it is busy, slow or briefly broken; 429, 502 and 504 as a gateway
 * sends them, without an S3 body.
 */
const TRANSIENT: readonly [string, ErrorAnswer | 'reset'][] = [
  [
    '400 RequestTimeout',
    {
      status: 400,
      code: 'RequestTimeout',
      message: 'Your socket connection to the server was not read from or written to within the timeout period.',
    },
  ],
  ['429 from an S3-compatible store', { status: 429 }],
  [
    '500 InternalError',
    { status: 500, code: 'InternalError', message: 'We encountered an internal error. Please try again.' },
  ],
  ['502 from a gateway', { status: 502 }],
  ['503 SlowDown', { status: 503, code: 'SlowDown', message: 'Please reduce your request rate.' }],
  [
    '503 ServiceUnavailable',
    { status: 503, code: 'ServiceUnavailable', message: 'Service is unable to handle request.' },
  ],
  ['504 from a gateway', { status: 504 }],
  ['a connection reset', 'reset'],
];

/** Answers that name a setting to fix, and the setting each error names. */
const CONFIGURATION: readonly [string, ErrorAnswer, string][] = [
  [
    '403 InvalidAccessKeyId (credentials)',
    {
      status: 403,
      code: 'InvalidAccessKeyId',
      message: 'The AWS Access Key Id you provided does not exist in our records.',
    },
    'AWS credentials',
  ],
  ['403 AccessDenied (permissions)', { status: 403, code: 'AccessDenied', message: 'Access Denied.' }, 'IAM policy'],
  [
    '404 NoSuchBucket (a missing bucket)',
    { status: 404, code: 'NoSuchBucket', message: 'The specified bucket does not exist.' },
    'COMPACTION_S3_BUCKET',
  ],
  [
    '400 InvalidArgument (a malformed request)',
    { status: 400, code: 'InvalidArgument', message: 'Invalid argument.' },
    'request',
  ],
];

describe('S3 failures classified by what they are, through the fault proxy on MinIO', () => {
  let direct: TestStore;
  let proxy: S3FaultProxy;
  let retrying: ObjectStore;
  let single: ObjectStore;
  const throughProxy = (maxAttempts?: number): ObjectStore =>
    createS3ObjectStore({
      bucket: direct.bucket!,
      client: new S3Client({ ...s3ClientConfig(direct.endpoint!), endpoint: proxy.endpoint, maxAttempts }),
      operationDeadlineMs: 30_000,
    });

  beforeAll(async () => {
    direct = await openTestStore('minio');
    proxy = await startS3FaultProxy(direct.endpoint!.endpoint);
    retrying = throughProxy();
    // One attempt: the adapter sees the answer itself, not what the SDK's retries made of it.
    single = throughProxy(1);
  });
  afterAll(async () => {
    await retrying?.close();
    await single?.close();
    await direct?.store.close();
    await proxy?.stop();
  });

  it.each(TRANSIENT)(
    '%s is transient: the SDK retries it, and once retries are spent a read is StoreUnavailable and a compare-and-swap Ambiguous, both retryable',
    async (_, fault) => {
      const key = freshKey('transient');
      const { etag } = await direct.store.putIfAbsent(key, bytes('v1'));

      proxy.script(fault, forKey(key));
      expect(text((await retrying.get(key)).body)).toBe('v1');

      proxy.script(fault, forKey(key), 2);
      const read = await single.get(key).catch((e: unknown) => e);
      expect(read).toBeInstanceOf(StoreUnavailableError);
      expect(read).toMatchObject({ retryable: true });
      const write = await single.putIfMatch(key, bytes('v2'), etag).catch((e: unknown) => e);
      expect(write).toBeInstanceOf(AmbiguousError);
      expect(write).toMatchObject({ retryable: true });
      expect(text((await direct.store.get(key)).body)).toBe('v1');
    },
  );

  it.each(CONFIGURATION)(
    '%s is configuration: not retried, a StoreConfigError naming the setting to fix',
    async (_, answer, setting) => {
      const key = freshKey('config');
      await direct.store.putIfAbsent(key, bytes('v1'));
      proxy.script(answer, forKey(key), 3);
      const requests = proxy.requests;
      const read = await retrying.get(key).catch((e: unknown) => e);
      expect(proxy.requests - requests, 'requests sent').toBe(1);
      expect(read).toBeInstanceOf(StoreConfigError);
      expect(read).toMatchObject({ setting, retryable: false });
    },
  );
});
