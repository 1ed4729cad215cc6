/**
 * A pass's rules are fixed when it starts (issue 16): one pass run by two workers whose settings
 * disagree on the lease expiry applies one expiry to every prefix, whichever worker runs each
 * activity. The real gcWorkflow on the Temporal dev server, both workers on one task queue, MinIO:
 * one worker runs the workflows (and so fixes the rules), the other every activity.
 */
import type { Client } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveSettings } from '../../src/config';
import { leaseKey, namespaceId, newJobId } from '../../src/keys';
import { createLeaseState, encodeLease } from '../../src/lease';
import { updateRoot } from '../../src/protocol';
import { jsonRootCodec } from '../../src/root';
import type { ObjectStore } from '../../src/store';
import type { GcReport } from '../../src/workflows/gc';
import { openTestStore, type TestStore } from '../support/stores';
import { connectClient, quickExpirySettings, startTestWorker, uniqueId, type RunningWorker } from '../support/temporal';

/** Expiry 6.6 s on one worker, 10 minutes on the other: a lease 60 s old is expired for one and live for the other. */
const shortExpiry = quickExpirySettings;
const longExpiry = resolveSettings({
  ...quickExpirySettings,
  timing: {
    ...quickExpirySettings.timing,
    leaseExpiryMs: 600_000,
    stagingGraceMs: undefined,
    readerGraceMs: undefined,
  },
});

/** Counts the lease reads and writes a worker's store serves. */
function counting(inner: ObjectStore, seen: { calls: number }): ObjectStore {
  return Object.assign(Object.create(inner) as ObjectStore, {
    get(key: string, options?: Parameters<ObjectStore['get']>[1]) {
      seen.calls++;
      return inner.get(key, options);
    },
    putIfMatch(key: string, body: Uint8Array, etag: string) {
      seen.calls++;
      return inner.putIfMatch(key, body, etag);
    },
  });
}

describe('the rules of a pass', () => {
  let fixture: TestStore;
  let workers: RunningWorker[] = [];
  let client: Client;
  let closeClient: () => Promise<void>;
  const seen = [{ calls: 0 }, { calls: 0 }];

  beforeAll(async () => {
    fixture = await openTestStore('minio');
    const taskQueue = uniqueId('tq-rules');
    workers = [
      await startTestWorker(counting(fixture.store, seen[0]!), shortExpiry, taskQueue, undefined, {
        workerOptions: { enableNonLocalActivities: false },
      }),
      // No workflow code: this worker polls activity tasks only.
      await startTestWorker(counting(fixture.store, seen[1]!), longExpiry, taskQueue, undefined, {
        workerOptions: { workflowBundle: undefined, workflowsPath: undefined },
      }),
    ];
    ({ client, close: closeClient } = await connectClient());
  });
  afterAll(async () => {
    for (const worker of workers) await worker.stop();
    await closeClient?.();
    await fixture?.store.close();
  });

  it('one pass across two workers with different lease expiries applies one expiry to every prefix', async () => {
    const ns = namespaceId(uniqueId('rules').toLowerCase());
    await updateRoot(fixture.store, ns, (root) => root, { codec: jsonRootCodec });
    const jobs = Array.from({ length: 16 }, () => newJobId());
    const heartbeatAtMs = Date.now() - 60_000;
    for (const job of jobs) {
      await fixture.store.put(
        leaseKey(ns, job),
        encodeLease(createLeaseState({ jobId: job, namespaceId: ns, ownerId: 'job', nowMs: heartbeatAtMs })),
      );
    }

    // Pages of 4, 2 prefixes at a time: some 60 activities.
    const report: GcReport = await client.workflow.execute('gcWorkflow', {
      taskQueue: workers[0]!.taskQueue,
      workflowId: uniqueId('gc-rules'),
      args: [{ namespaces: [ns], prefixesPerPage: 4, prefixConcurrency: 2 }],
    });

    // Every lease was read and claimed by the worker whose own expiry calls it live, under the pass's expiry.
    expect(seen[0]!.calls, 'the workflow worker touched no lease').toBe(0);
    expect(seen[1]!.calls, 'the activity worker read and claimed every lease').toBeGreaterThanOrEqual(2 * jobs.length);
    expect(report.totals).toMatchObject({
      prefixesSeen: jobs.length,
      live: 0,
      claimed: jobs.length,
      leasesDeleted: jobs.length,
    });
    expect(
      (await fixture.store.list({ prefix: `namespaces/${ns}/` })).objects.filter((o) => o.key.endsWith('/lease.json')),
    ).toEqual([]);
  }, 120_000);
});
