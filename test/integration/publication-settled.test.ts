/**
 * A run never ends failed beside a root that names its outputs (spec 6c, a publication settled): the
 * real compactionWorkflow on the Temporal dev server and MinIO. The first publication attempt's root
 * CAS is held (a request stuck in a proxy, a paused process); every later attempt fails its lease
 * refresh (the store refuses the job's lease writes), so the publication's attempts are spent. The
 * held CAS lands only after the last attempt read the root.
 *
 * On the code before (commit 4afcdf1, 2026-12-06) the run ended failed (its publish attempts spent)
 * and the CAS, released after it, landed: the root named the outputs of a failed run. Now the run
 * settles the publication, finds the root naming its outputs, and ends `published`.
 */
import { describe, expect, it } from 'vitest';
import { startCompaction } from '../../src/client';
import { isInputSegmentKeyOf, namespaceId, parseCompactionKey, rootKey } from '../../src/keys';
import { readRoot } from '../../src/protocol';
import { groupSegments, jsonRootCodec } from '../../src/root';
import { gate, wrapStore } from '../support/faults';
import { makeInputs, writeInputs } from '../support/records';
import { quickExpirySettings, startTestWorker, storeAndClient, uniqueId } from '../support/temporal';

describe('a publication whose attempts are spent is settled', () => {
  const servers = storeAndClient('minio');

  it('its root CAS landing after the last attempt read the root: the run ends published, not failed', async () => {
    const ns = namespaceId(uniqueId('settled').toLowerCase());
    await writeInputs(servers.fixture.store, ns, 'inodes', makeInputs(2, 50));
    const casHeld = gate();
    const casSent = gate();
    const lastRead = gate();
    let casLanded: Promise<unknown> | undefined;
    let rootReadsAfterHold = 0;
    const isLease = (key: unknown) => typeof key === 'string' && parseCompactionKey(key).kind === 'lease';
    const store = wrapStore(servers.fixture.store, async (operation, args, call) => {
      const subject = args[0];
      if (operation === 'putIfMatch' && subject === rootKey(ns) && !casLanded) {
        // The first root CAS is sent only once the test releases it: it lands late, on the root it was read against.
        casSent.open();
        casLanded = casHeld.wait.then(call);
        return casLanded;
      }
      if (casLanded && operation === 'putIfMatch' && isLease(subject))
        throw new Error('the store refuses the lease write (injected)');
      // Each later publication attempt reads the root once before its refresh; the read after them is the settling one.
      if (casLanded && operation === 'get' && subject === rootKey(ns) && ++rootReadsAfterHold > 3) {
        lastRead.open();
        await casLanded.catch(() => undefined);
      }
      return call();
    });
    const worker = await startTestWorker(store, quickExpirySettings);
    try {
      const handle = await startCompaction(servers.client, {
        namespaceId: ns,
        group: 'inodes',
        taskQueue: worker.taskQueue,
      });
      await casSent.wait;
      const ended = handle.result().then(
        (result) => ({ result }),
        (error: unknown) => ({ error }),
      );
      // Whichever comes first: the settling read (the CAS lands just before it), or the run's end.
      const first = await Promise.race([
        lastRead.wait.then(() => 'settling' as const),
        ended.then(() => 'ended' as const),
      ]);
      casHeld.open();
      await casLanded;
      const outcome = await ended;
      const { root } = await readRoot(servers.fixture.store, ns, jsonRootCodec);
      const named = groupSegments(root, 'inodes' as never);
      // The setup: the held CAS landed, so the root names the job's outputs, and only them.
      expect(named.length).toBeGreaterThan(0);
      expect(named.every((k) => !isInputSegmentKeyOf(ns, k))).toBe(true);
      expect(first).toBe('settling');
      expect(outcome).toMatchObject({ result: { outcome: 'published', outputs: named } });
      // It was the settling activity that found it, after the publication's attempts were spent.
      const history = await handle.fetchHistory();
      const scheduled = (history.events ?? []).flatMap((e) =>
        e.activityTaskScheduledEventAttributes?.activityType?.name
          ? [e.activityTaskScheduledEventAttributes.activityType.name]
          : [],
      );
      expect(scheduled.slice(-2)).toEqual(['publish', 'settlePublication']);
    } finally {
      await worker.stop();
    }
  });
});
