/**
 * The S3 adapter's batched delete on MinIO: one call is several DeleteObjects requests, and a request
 * that throws must not end the call while another can still land (the collector deletes a lease
 * only after every delete of its prefix).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { S3Client } from '@aws-sdk/client-s3';
import { describe, expect, inject, it } from 'vitest';
import { createS3ObjectStore, StoreConfigError } from '../../src/store';
import { createTestBucket, s3ClientConfig } from '../support/stores';

describe('S3 adapter: batched delete', () => {
  it('a DeleteObjects request that throws ends deleteMany only after its sibling has landed, and no request starts after it', async () => {
    const minio = inject('minio');
    const client = new S3Client(s3ClientConfig(minio));
    const events: string[] = [];
    let requests = 0;
    // The first request is slow, the second is refused before it is sent (outside the SDK's retries).
    client.middlewareStack.add(
      (next, context) => async (args) => {
        if (context.commandName !== 'DeleteObjectsCommand') return next(args);
        const n = ++requests;
        events.push(`start ${n}`);
        if (n === 2) {
          events.push('refused 2');
          throw Object.assign(new Error('Access Denied (injected)'), {
            name: 'AccessDenied',
            $metadata: { httpStatusCode: 403 },
          });
        }
        await sleep(1000);
        const result = await next(args);
        events.push(`landed ${n}`);
        return result;
      },
      { step: 'initialize', name: 'slowFirstRefuseSecond' },
    );
    const bucket = await createTestBucket(minio);
    const store = createS3ObjectStore({ bucket, client, deleteConcurrency: 2 });
    const keys = Array.from({ length: 2500 }, (_, i) => `del/k${String(i).padStart(5, '0')}`);
    for (let i = 0; i < keys.length; i += 64)
      await Promise.all(keys.slice(i, i + 64).map((k) => store.put(k, new Uint8Array(1))));

    let atRejection: string[] = [];
    const error = await store.deleteMany(keys).then(
      () => undefined,
      (err: unknown) => ((atRejection = [...events]), err),
    );

    expect(error).toBeInstanceOf(StoreConfigError);
    // Three batches of ≤ 1000 keys, two lanes: the third batch is never sent once the second was refused.
    expect(atRejection).toEqual(['start 1', 'start 2', 'refused 2', 'landed 1']);
    await sleep(1500);
    expect(events).toEqual(atRejection);
    let left = 0;
    for (let cursor: string | undefined, more = true; more;) {
      const page = await store.list({ prefix: 'del/', cursor });
      left += page.objects.length;
      cursor = page.nextCursor;
      more = cursor !== undefined;
    }
    expect(left).toBe(1500);
    await store.close();
  });
});
