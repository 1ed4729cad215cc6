/**
 * A claim whose reply was lost is a claim (issue 28, item 6): the server applied the collector's
 * CAS `active` → `reaping`, the client never heard, and the SDK's retry of the same CAS met 412. The
 * claim re-reads the lease, finds it `reaping` (only collectors write that) and reclaims the prefix.
 * The real gcWorkflow on the Temporal dev server, the worker's store on MinIO through the S3 fault proxy.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Client } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jobPrefix, leaseKey, namespaceId, newJobId, newSegmentId, stagedSegmentKey } from '../../src/keys';
import { createLeaseState, encodeLease } from '../../src/lease';
import { updateRoot } from '../../src/protocol';
import { jsonRootCodec } from '../../src/root';
import type { ObjectStore } from '../../src/store';
import type { GcReport } from '../../src/workflows/gc';
import { s3Requests } from '../support/s3-fault-proxy';
import {
  connectClient,
  quickExpirySettings,
  startWorkerBehindProxy,
  uniqueId,
  type WorkerBehindProxy,
} from '../support/temporal';

const settings = quickExpirySettings;

describe('a claim whose reply was lost', () => {
  let behind: WorkerBehindProxy;
  let store: ObjectStore;
  let client: Client;
  let closeClient: () => Promise<void>;
  const ns = namespaceId(uniqueId('lost-claim').toLowerCase());
  const job = newJobId();
  let report: GcReport;

  beforeAll(async () => {
    behind = await startWorkerBehindProxy(settings);
    store = behind.direct.store;
    ({ client, close: closeClient } = await connectClient());

    await updateRoot(store, ns, (root) => root, { codec: jsonRootCodec });
    await store.put(
      leaseKey(ns, job),
      encodeLease(createLeaseState({ jobId: job, namespaceId: ns, ownerId: 'dead', nowMs: 1 })),
    );
    for (let i = 0; i < 2; i++)
      await store.put(stagedSegmentKey(ns, job, newSegmentId(), 'mseg'), new TextEncoder().encode('staged'));
    await sleep(settings.timing.stagingGraceMs + 500);
    behind.proxy.script('lostResponse', (r) => s3Requests.compareAndSwap(r) && r.key === leaseKey(ns, job));

    report = await client.workflow.execute('gcWorkflow', {
      taskQueue: behind.worker.taskQueue,
      workflowId: uniqueId('gc-lost-claim'),
      args: [{ namespaces: [ns] }],
    });
  }, 300_000);
  afterAll(async () => {
    await closeClient?.();
    await behind?.stop();
  });

  it('the claim landed and its reply was lost: the server applied it, and the retried CAS was refused', () => {
    const claims = behind.exchanges.filter(
      (e) => s3Requests.compareAndSwap(e.request) && e.request.key === leaseKey(ns, job),
    );
    expect(claims.map((e) => [e.status, e.lost])).toEqual([
      [200, true],
      [412, false],
    ]);
  });

  it('the pass reports the prefix claimed, not live, and reclaims it with its lease', async () => {
    expect(report.totals).toMatchObject({
      prefixesSeen: 1,
      claimed: 1,
      live: 0,
      objectsDeleted: 2,
      leasesDeleted: 1,
      failedPrefixes: 0,
    });
    expect((await store.list({ prefix: jobPrefix(ns, job) })).objects).toEqual([]);
  });
});
