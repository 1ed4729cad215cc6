/**
 * Clocks compared where they are used (spec 6c.6): every age rule of a pass compares the pass's clock
 * (the workflow's, the Temporal server's) with the store's `LastModified`. The real gcWorkflow on the
 * Temporal dev server, over MinIO through a store whose clock, as its reads report it, runs a minute
 * ahead: far beyond half the clock safety margin.
 *
 * On the code before (commit 4afcdf1, 2026-12-06) the pass compared nothing and deleted the
 * namespace's old staged objects and its lease by ages it could not trust.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { leaseKey, namespaceId, newJobId, newSegmentId, stagedSegmentKey, STORE_PROBE_PREFIX } from '../../src/keys';
import { createLeaseState, encodeLease } from '../../src/lease';
import { updateRoot } from '../../src/protocol';
import { jsonRootCodec } from '../../src/root';
import type { GcPassReport } from '../../src/workflows/gc';
import { wrapStore } from '../support/faults';
import { quickExpirySettings, startTestWorker, storeAndClient, uniqueId } from '../support/temporal';

const settings = quickExpirySettings;
const AHEAD_MS = 60_000;

describe("a pass whose clock and the store's disagree", () => {
  const servers = storeAndClient('minio');

  it('deletes nothing, runs as a dry run and says why; the pass is incomplete, not failed', async () => {
    const ns = namespaceId(uniqueId('clock').toLowerCase());
    const { store } = servers.fixture;
    await updateRoot(store, ns, (root) => root, { codec: jsonRootCodec });
    const job = newJobId();
    await store.put(
      leaseKey(ns, job),
      encodeLease(createLeaseState({ jobId: job, namespaceId: ns, ownerId: 'dead', nowMs: 1 })),
    );
    await store.put(stagedSegmentKey(ns, job, newSegmentId(), 'mseg'), new TextEncoder().encode('old output'));
    await sleep(settings.timing.stagingGraceMs + 500);
    const before = (await store.list({ prefix: `namespaces/${ns}/` })).objects.map((o) => o.key);

    // The store's clock, as it reports it on reads, a minute ahead of the Temporal server's.
    let probed = 0;
    const skewed = wrapStore(store, async (operation, args, call) => {
      const result = await call();
      if (operation !== 'get' || !String(args[0]).startsWith(STORE_PROBE_PREFIX)) return result;
      probed++;
      const read = result as { lastModified: Date | undefined };
      return { ...read, lastModified: new Date(read.lastModified!.getTime() + AHEAD_MS) };
    });
    const worker = await startTestWorker(skewed, settings);
    try {
      const report: GcPassReport = await servers.client.workflow.execute('gcWorkflow', {
        taskQueue: worker.taskQueue,
        workflowId: uniqueId('gc-clock'),
        args: [{ namespaces: [ns] }],
      });
      expect(probed).toBe(1);
      expect(report.clockProblem).toMatch(/ms ahead of the local clock/);
      expect(report).toMatchObject({ dryRun: true, complete: false });
      // What a real pass would have deleted, reported and not done.
      expect(report.totals).toMatchObject({ claimed: 1, objectsDeleted: 1, leasesDeleted: 1 });
      expect(
        (await store.list({ prefix: `namespaces/${ns}/` })).objects
          .map((o) => o.key)
          .filter((k) => !k.includes('/metadata/gc/')),
      ).toEqual(before);
    } finally {
      await worker.stop();
    }
  });
});
