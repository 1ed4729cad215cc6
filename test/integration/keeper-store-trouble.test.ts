/**
 * The keeper beats whatever the store does: while lease refreshes fail and back off it heartbeats
 * every third of the heartbeat timeout, so a healthy attempt is not timed out (and left running as
 * a zombie beside its retry); a refresh that can no longer be sent before the lease would expire
 * ends the attempt as a lost lease, and the workflow runs again as a new job. Through a real
 * `compactionWorkflow` on the dev server, over the embedded store with the lease's writes failing.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Client } from '@temporalio/client';
import type { temporal } from '@temporalio/proto';
import { describe, expect, it } from 'vitest';
import { startCompaction } from '../../src/client';
import { parseCompactionKey } from '../../src/keys';
import { StoreUnavailableError, type ObjectStore } from '../../src/store';
import { gate, wrapStore } from '../support/faults';
import { makeInputs, writeInputs } from '../support/records';
import { expectReplays, startTestWorker, storeAndClient, testSettings, uniqueId } from '../support/temporal';

// A 1.5 s heartbeat timeout against backoffs of 1, 2 and 4 s: a keeper silent while it backs off times out.
const settings = testSettings(2000, { heartbeatTimeoutMs: 1500 });
const { leaseExpiryMs } = settings.timing;
const FAILING_MS = 5000;

const isLeaseWrite = (operation: string, key: unknown) =>
  operation === 'putIfMatch' && typeof key === 'string' && parseCompactionKey(key).kind === 'lease';

/** What became of each attempt of `compactUnderLease` in one run's history. */
async function compactionAttempts(client: Client, workflowId: string, runId: string) {
  const events = (await client.workflow.getHandle(workflowId, runId).fetchHistory()).events ?? [];
  const ended = (e: temporal.api.history.v1.IHistoryEvent) =>
    e.activityTaskTimedOutEventAttributes ?? e.activityTaskFailedEventAttributes;
  return {
    startedAttempts: events.flatMap((e) =>
      e.activityTaskStartedEventAttributes ? [e.activityTaskStartedEventAttributes.attempt] : [],
    ),
    timedOut: events.filter((e) => e.activityTaskTimedOutEventAttributes).length,
    failureTypes: events
      .filter(ended)
      .map(
        (e) =>
          e.activityTaskFailedEventAttributes?.failure?.cause?.applicationFailureInfo?.type ??
          e.activityTaskFailedEventAttributes?.failure?.applicationFailureInfo?.type,
      ),
  };
}

describe('a lease keeper while its refreshes fail', () => {
  const servers = storeAndClient('embedded');

  /** Compacts group `inodes` of `ns` on a worker over `store`, following continue-as-new, and expects it published. */
  async function publishThrough(store: ObjectStore, ns: string) {
    const running = await startTestWorker(store, settings);
    try {
      const handle = await startCompaction(servers.client, {
        namespaceId: ns,
        group: 'inodes',
        taskQueue: running.taskQueue,
      });
      const result = await handle.result();
      expect(result.outcome).toBe('published');
      return { handle, result };
    } finally {
      await running.stop();
    }
  }

  it('keeps its attempt alive through refreshes failing for over three heartbeat timeouts, and the job publishes on its first attempt', async () => {
    const ns = uniqueId('trouble').toLowerCase();
    await writeInputs(servers.fixture.store, ns, 'inodes', makeInputs(2, 100));
    let failingSince: number | undefined;
    let failed = 0;
    const work = gate();
    const store = wrapStore(servers.fixture.store, async (operation, args, call) => {
      if (operation === 'getStream') await work.wait;
      if (isLeaseWrite(operation, args[0])) {
        failingSince ??= Date.now();
        if (Date.now() - failingSince < FAILING_MS) {
          failed++;
          throw new StoreUnavailableError(args[0] as string, 'injected: the store fails writes');
        }
        const result = await call();
        // The work goes on once a refresh has landed after the failures.
        work.open();
        return result;
      }
      return call();
    });
    const { handle } = await publishThrough(store, ns);
    expect(failed).toBeGreaterThanOrEqual(3);
    const attempts = await compactionAttempts(servers.client, handle.workflowId, handle.firstExecutionRunId);
    expect(attempts.timedOut).toBe(0);
    expect(attempts.startedAttempts.every((attempt) => attempt === 1)).toBe(true);
    await expectReplays(servers.client, handle.workflowId);
  });

  it('whose refreshes fail until the lease would expire ends its attempt as a lost lease, not a timeout, and the workflow publishes as a new job', async () => {
    const ns = uniqueId('expiring').toLowerCase();
    await writeInputs(servers.fixture.store, ns, 'inodes', makeInputs(2, 100));
    let firstLease: string | undefined;
    let failingSince: number | undefined;
    const store = wrapStore(servers.fixture.store, async (operation, args, call) => {
      const key = args[0];
      if (operation === 'putIfAbsent' && typeof key === 'string' && parseCompactionKey(key).kind === 'lease')
        firstLease ??= key;
      // The first job's work waits until its lease has gone unrefreshed past its expiry; the next job's does not.
      while (
        operation === 'getStream' &&
        (failingSince === undefined || Date.now() < failingSince + leaseExpiryMs + 1000)
      )
        await sleep(100);
      if (isLeaseWrite(operation, key) && firstLease !== undefined && key === firstLease) {
        failingSince ??= Date.now();
        throw new StoreUnavailableError(firstLease, 'injected: the store fails writes');
      }
      return call();
    });
    const { handle, result } = await publishThrough(store, ns);
    expect(result.fencedJobIds).toHaveLength(1);
    expect(firstLease).toContain(result.fencedJobIds[0]);
    const first = await compactionAttempts(servers.client, handle.workflowId, handle.firstExecutionRunId);
    expect(first.timedOut).toBe(0);
    expect(first.failureTypes).toEqual(['LeaseLost']);
    await expectReplays(servers.client, handle.workflowId, handle.firstExecutionRunId);
  });
});
