/**
 * A lease keeper whose refresh fails just before it is sent: the retried refresh goes at once after
 * the retry's wait (the lease's heartbeat is already an interval old), not a full interval later.
 * The keeper retries within its attempt, beside the work; a retried attempt after a worker's death
 * refreshes at once for the same reason (compaction-kill.test.ts). Through a real
 * `compactionWorkflow` on Temporal and MinIO; the heartbeats are read off the lease writes.
 */
import { describe, expect, it } from 'vitest';
import { startCompaction } from '../../src/client';
import { parseCompactionKey } from '../../src/keys';
import { gate, wrapStore } from '../support/faults';
import { makeInputs, writeInputs } from '../support/records';
import { expectReplays, startTestWorker, storeAndClient, testSettings, uniqueId } from '../support/temporal';

// A 3 s interval against Temporal's 1 s retry delay: an immediate refresh and one a full interval late are seconds
// apart.
// The heartbeat timeout is long enough that the held compaction is not timed out meanwhile.
const settings = testSettings(3000, { heartbeatTimeoutMs: 15_000 });
const interval = settings.timing.leaseRefreshIntervalMs;

describe('a retried lease keeper', () => {
  const servers = storeAndClient('minio');

  it('whose refresh failed just before it was sent refreshes again after the first backoff: the lease goes about one interval unrefreshed, not two', async () => {
    const ns = uniqueId('keeper').toLowerCase();
    await writeInputs(servers.fixture.store, ns, 'inodes', makeInputs(2, 100));
    /** heartbeat_at_ms of every lease write that landed, in order; the failed refresh is marked by its position. */
    const heartbeats: number[] = [];
    let failedAfter: number | undefined;
    const work = gate();
    const store = wrapStore(servers.fixture.store, async (operation, args, call) => {
      const key = args[0];
      const leaseWrite =
        (operation === 'putIfMatch' || operation === 'putIfAbsent') &&
        typeof key === 'string' &&
        parseCompactionKey(key).kind === 'lease';
      if (operation === 'getStream') await work.wait;
      // The keeper's second refresh never leaves, as if the store failed it before sending.
      if (leaseWrite && operation === 'putIfMatch' && heartbeats.length === 2 && failedAfter === undefined) {
        failedAfter = heartbeats.length;
        throw new Error('worker lost just before refreshing');
      }
      const result = await call();
      if (leaseWrite) {
        heartbeats.push(
          (JSON.parse(new TextDecoder().decode(args[1] as Uint8Array)) as { payload: { heartbeat_at_ms: number } })
            .payload.heartbeat_at_ms,
        );
        // The compaction waits until the keeper has refreshed once after the failure.
        if (failedAfter !== undefined && heartbeats.length > failedAfter) work.open();
      }
      return result;
    });
    const running = await startTestWorker(store, settings);
    try {
      const handle = await startCompaction(servers.client, {
        namespaceId: ns,
        group: 'inodes',
        taskQueue: running.taskQueue,
      });
      const result = await handle.result();
      expect(result.outcome).toBe('published');
      await expectReplays(servers.client, handle.workflowId);
    } finally {
      await running.stop();
    }
    expect(failedAfter).toBe(2);
    const [, beforeFailure, retried] = heartbeats;
    // Due at beforeFailure + interval; the refresh fails then, is retried 1 s later (the first backoff), and lands.
    // Waiting a full interval from its start would put the refresh at about beforeFailure + 2 × interval + 1 s.
    expect(retried! - beforeFailure!).toBeGreaterThanOrEqual(interval);
    expect(retried! - beforeFailure!).toBeLessThan(interval + (interval + 1000) / 2);
  });
});
