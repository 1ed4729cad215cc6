/**
 * Errors that recur end the job: the same untyped error on consecutive attempts with no progress
 * between them (here a record that cannot be re-encoded) ends the job after MAX_RECURRING_ATTEMPTS
 * attempts with a non-retryable RecurringFailure naming the record, and the group is free for the
 * next job; an error that recurs while every attempt makes progress does not. Through a real
 * `compactionWorkflow` on the dev server and MinIO, the reference compactor behind a test wrapper
 * that injects the errors.
 */
import { describe, expect, it } from 'vitest';
import { startCompaction } from '../../src/client';
import { MAX_RECURRING_ATTEMPTS, referenceCompactor, type Compactor } from '../../src/compactor';
import { makeInputs, readRecords, referenceMerge, writeInputs } from '../support/records';
import { expectReplays, failureOf, startTestWorker, storeAndClient, testSettings, uniqueId } from '../support/temporal';

const settings = testSettings(1000);
const POISON = 'RangeError: record "k00000007" is 9000001 bytes as a line, more than a segment allows (8388608)';

describe('a compaction whose attempts keep failing', () => {
  const servers = storeAndClient('minio');

  it(`ends after ${MAX_RECURRING_ATTEMPTS} attempts failing alike without progress, with RecurringFailure naming the record; the next job publishes once it is fixed`, async () => {
    const ns = uniqueId('poison').toLowerCase();
    const records = makeInputs(3, 200);
    await writeInputs(servers.fixture.store, ns, 'inodes', records);
    let poisoned = true;
    let attempts = 0;
    const compactor: Compactor = {
      async compact(attempt) {
        attempts++;
        if (poisoned) throw new RangeError(POISON.slice('RangeError: '.length));
        return referenceCompactor.compact(attempt);
      },
    };
    const running = await startTestWorker(servers.fixture.store, settings, undefined, undefined, { compactor });
    try {
      const handle = await startCompaction(servers.client, {
        namespaceId: ns,
        group: 'inodes',
        taskQueue: running.taskQueue,
      });
      const cause = await failureOf(handle.result());
      expect(cause.type).toBe('RecurringFailure');
      expect(cause.message).toContain(`failed ${MAX_RECURRING_ATTEMPTS} attempts in a row`);
      expect(cause.message).toContain(POISON);
      expect(attempts).toBe(MAX_RECURRING_ATTEMPTS);
      await expectReplays(servers.client, handle.workflowId);

      poisoned = false;
      const next = await startCompaction(servers.client, {
        namespaceId: ns,
        group: 'inodes',
        taskQueue: running.taskQueue,
      });
      const result = await next.result();
      expect(result.outcome).toBe('published');
      expect(await readRecords(servers.fixture.store, result.outputs)).toEqual(referenceMerge(records));
    } finally {
      await running.stop();
    }
  });

  it(`goes on while each attempt makes progress, however often the same error ends one (${MAX_RECURRING_ATTEMPTS + 1} in a row here)`, async () => {
    const ns = uniqueId('progressing').toLowerCase();
    const records = makeInputs(3, 300);
    await writeInputs(servers.fixture.store, ns, 'inodes', records);
    let attempts = 0;
    // Each of the first attempts finishes one more cut (an output, and a tombstone segment when the cut
    // held tombstones), heartbeats it as progress, then fails on its next write.
    const compactor: Compactor = {
      async compact(attempt) {
        const failing = ++attempts <= MAX_RECURRING_ATTEMPTS + 1;
        let progressed = false;
        return referenceCompactor.compact({
          ...attempt,
          heartbeat: (progress) => {
            if (progress !== undefined) progressed = true;
            attempt.heartbeat(progress);
          },
          store: {
            ...attempt.store,
            put: async (key, body) => {
              if (failing && progressed) throw new Error('socket hang up');
              return attempt.store.put(key, body);
            },
          },
        });
      },
    };
    const running = await startTestWorker(servers.fixture.store, settings, undefined, undefined, { compactor });
    try {
      const handle = await startCompaction(servers.client, {
        namespaceId: ns,
        group: 'inodes',
        taskQueue: running.taskQueue,
      });
      const result = await handle.result();
      expect(result.outcome).toBe('published');
      expect(attempts).toBe(MAX_RECURRING_ATTEMPTS + 2);
      expect(await readRecords(servers.fixture.store, result.outputs)).toEqual(referenceMerge(records));
    } finally {
      await running.stop();
    }
  });
});
