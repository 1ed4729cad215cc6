/**
 * Found by the chaos soak: a 409 ConditionalRequestConflict on the put-if-absent that creates a lease
 * was reported as a job-id collision (non-retryable), so the compaction workflow failed. A 409 with no
 * lease behind it means the create did not land: the failure must be retryable, and a retry creates it.
 */
import { S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { leaseKey, namespaceId, newJobId } from '../../src/keys';
import { createJobLease, JobIdCollisionError } from '../../src/protocol';
import { ConflictError, createS3ObjectStore, NotFoundError, type ObjectStore } from '../../src/store';
import { s3Requests, startS3FaultProxy, type S3FaultProxy } from '../support/s3-fault-proxy';
import { openTestStore, s3ClientConfig, type TestStore } from '../support/stores';

describe('lease creation answered 409', () => {
  let direct: TestStore;
  let proxy: S3FaultProxy;
  let faulty: ObjectStore;
  beforeAll(async () => {
    direct = await openTestStore('minio');
    proxy = await startS3FaultProxy(direct.endpoint!.endpoint);
    faulty = createS3ObjectStore({ bucket: direct.bucket!, client: new S3Client({ ...s3ClientConfig(direct.endpoint!), endpoint: proxy.endpoint }) });
  });
  afterAll(async () => {
    await faulty?.close();
    await direct?.store.close();
    await proxy?.stop();
  });

  it('a 409 on the create with no lease behind it is a retryable conflict, not a job-id collision, and the retried create succeeds', async () => {
    const job = { namespaceId: namespaceId('conflict'), jobId: newJobId(), ownerId: 'job', startedAtMs: Date.now() };
    proxy.script('conflict409', s3Requests.createIfAbsent);
    const first = createJobLease(faulty, job);
    await expect(first).rejects.toBeInstanceOf(ConflictError);
    await expect(first).rejects.not.toBeInstanceOf(JobIdCollisionError);
    await expect(direct.store.get(leaseKey(job.namespaceId, job.jobId))).rejects.toBeInstanceOf(NotFoundError);
    const held = await createJobLease(faulty, job);
    expect(held.lease).toMatchObject({ status: 'active', owner_id: 'job', started_at_ms: job.startedAtMs });
    expect((await direct.store.get(leaseKey(job.namespaceId, job.jobId))).etag).toBe(held.etag);
  });
});
