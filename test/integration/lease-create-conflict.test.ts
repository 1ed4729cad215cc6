/**
 * Creating a lease when the create's outcome is unclear. Found by the chaos soak: a 409
 * ConditionalRequestConflict on the put-if-absent was reported as a job-id collision (non-retryable),
 * so the compaction workflow failed. A 409 with no lease behind it means the create did not land: the
 * failure must be retryable, and a retry creates it. And a retried create that finds its own lease
 * already claimed has lost it: it must not adopt a `reaping` lease.
 */
import { S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { leaseKey, namespaceId, newJobId } from '../../src/keys';
import { claimLeaseState, encodeLease } from '../../src/lease';
import { createJobLease, JobIdCollisionError, LeaseLostError } from '../../src/protocol';
import { ConflictError, createS3ObjectStore, NotFoundError, type ObjectStore } from '../../src/store';
import { s3Requests, startS3FaultProxy, type S3FaultProxy } from '../support/s3-fault-proxy';
import { interceptStore } from '../support/faults';
import { openTestStore, s3ClientConfig, type TestStore } from '../support/stores';
import { TEST_PASS_ID } from '../support/pass';

describe('lease creation with an unclear outcome', () => {
  let direct: TestStore;
  let proxy: S3FaultProxy;
  let faulty: ObjectStore;
  beforeAll(async () => {
    direct = await openTestStore('minio');
    proxy = await startS3FaultProxy(direct.endpoint!.endpoint);
    faulty = createS3ObjectStore({
      bucket: direct.bucket!,
      client: new S3Client({ ...s3ClientConfig(direct.endpoint!), endpoint: proxy.endpoint }),
    });
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

  it('a retried create that finds its own lease claimed by a collector has lost it, and adopts nothing', async () => {
    const job = { namespaceId: namespaceId('conflict'), jobId: newJobId(), ownerId: 'job', startedAtMs: Date.now() };
    // The first attempt landed but its answer was lost; a collector claimed the lease before the retry.
    const landed = await createJobLease(direct.store, job);
    const key = leaseKey(job.namespaceId, job.jobId);
    await direct.store.putIfMatch(
      key,
      encodeLease(claimLeaseState(landed.lease, TEST_PASS_ID, Date.now())),
      landed.etag,
    );
    const retried = createJobLease(faulty, job);
    await expect(retried).rejects.toBeInstanceOf(LeaseLostError);
    await expect(retried).rejects.toThrow(/claimed/);
  });

  it('a retried create answered 412 whose lease is gone by the re-read has lost it (claimed and deleted), not collided', async () => {
    const job = { namespaceId: namespaceId('conflict'), jobId: newJobId(), ownerId: 'job', startedAtMs: Date.now() };
    const key = leaseKey(job.namespaceId, job.jobId);
    // The first attempt landed but its answer was lost; between the retry's 412 and its re-read a collector claims and
    // deletes the lease.
    await createJobLease(direct.store, job);
    let reclaimed = false;
    const store = interceptStore(direct.store, async (operation) => {
      if (operation !== 'get' || reclaimed) return;
      reclaimed = true;
      await direct.store.deleteMany([key]);
    });
    const retried = createJobLease(store, job);
    await expect(retried).rejects.toBeInstanceOf(LeaseLostError);
    await expect(retried).rejects.not.toBeInstanceOf(JobIdCollisionError);
  });
});
