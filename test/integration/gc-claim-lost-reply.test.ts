/**
 * A claim whose reply was lost is a claim (issue 28, item 6): the server applied the collector's
 * CAS `active` → `reaping`, the client never heard, and the SDK's retry of the same CAS met 412. The
 * claim re-reads the lease, finds it `reaping` (only collectors write that) and reclaims the prefix.
 * The real gcWorkflow on the Temporal dev server, the worker's store on MinIO through the S3 fault proxy.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { S3Client } from '@aws-sdk/client-s3';
import type { Client } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jobPrefix, leaseKey, namespaceId, newJobId, newSegmentId, stagedSegmentKey } from '../../src/keys';
import { createLeaseState, encodeLease } from '../../src/lease';
import { updateRoot } from '../../src/protocol';
import { jsonRootCodec } from '../../src/root';
import { createS3ObjectStore, type ObjectStore } from '../../src/store';
import type { GcReport } from '../../src/workflows/gc';
import { s3Requests, startS3FaultProxy, type S3Exchange, type S3FaultProxy } from '../support/s3-fault-proxy';
import { openTestStore, s3ClientConfig, type TestStore } from '../support/stores';
import { connectClient, quickExpirySettings, startTestWorker, uniqueId, type RunningWorker } from '../support/temporal';

const settings = quickExpirySettings;

describe('a claim whose reply was lost', () => {
  let direct: TestStore;
  let store: ObjectStore;
  let proxy: S3FaultProxy;
  let worker: RunningWorker;
  let client: Client;
  let closeClient: () => Promise<void>;
  const exchanges: S3Exchange[] = [];
  const ns = namespaceId(uniqueId('lost-claim').toLowerCase());
  const job = newJobId();
  let report: GcReport;

  beforeAll(async () => {
    direct = await openTestStore('minio');
    store = direct.store;
    proxy = await startS3FaultProxy(direct.endpoint!.endpoint);
    proxy.observe((exchange) => exchanges.push(exchange));
    const viaProxy = createS3ObjectStore({ bucket: direct.bucket!, client: new S3Client({ ...s3ClientConfig(direct.endpoint!), endpoint: proxy.endpoint }), operationDeadlineMs: 10_000 });
    worker = await startTestWorker(viaProxy, settings);
    ({ client, close: closeClient } = await connectClient());

    await updateRoot(store, ns, (root) => root, jsonRootCodec);
    await store.put(leaseKey(ns, job), encodeLease(createLeaseState({ jobId: job, namespaceId: ns, ownerId: 'dead', nowMs: 1 })));
    for (let i = 0; i < 2; i++) await store.put(stagedSegmentKey(ns, job, newSegmentId(), 'mseg'), new TextEncoder().encode('staged'));
    await sleep(settings.timing.stagingGraceMs + 500);
    proxy.script('lostResponse', (r) => s3Requests.compareAndSwap(r) && r.key === leaseKey(ns, job));

    report = await client.workflow.execute('gcWorkflow', { taskQueue: worker.taskQueue, workflowId: uniqueId('gc-lost-claim'), args: [{ namespaces: [ns] }] });
  }, 300_000);
  afterAll(async () => {
    await worker?.stop();
    await closeClient?.();
    await proxy?.stop();
    await store?.close();
  });

  it('the claim landed and its reply was lost: the server applied it, and the retried CAS was refused', () => {
    const claims = exchanges.filter((e) => s3Requests.compareAndSwap(e.request) && e.request.key === leaseKey(ns, job));
    expect(claims.map((e) => [e.status, e.lost])).toEqual([
      [200, true],
      [412, false],
    ]);
  });

  it('the pass reports the prefix claimed, not live, and reclaims it with its lease', async () => {
    expect(report.totals).toMatchObject({ prefixesSeen: 1, claimed: 1, live: 0, objectsDeleted: 2, leasesDeleted: 1, failedPrefixes: 0 });
    expect((await store.list({ prefix: jobPrefix(ns, job) })).objects).toEqual([]);
  });
});
