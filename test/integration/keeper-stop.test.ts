/**
 * The lease keeper stops within 1 s of the work's end at the default heartbeat cadence (a keeper
 * beat per refresh, every 5 min), on Temporal and MinIO: cancellation alone would reach a keeper
 * only with its next heartbeat, minutes later. The keeper runs beside the work in one activity, so
 * the work's end is the time it reports, and the publication's start is read off the history.
 */
import type { Client } from '@temporalio/client';
import { defaultPayloadConverter } from '@temporalio/common';
import type { temporal } from '@temporalio/proto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LeasedCompactionOutput } from '../../src/activities/compaction';
import { startCompaction } from '../../src/client';
import { resolveSettings } from '../../src/config';
import { makeInputs, writeInputs } from '../support/records';
import { openTestStore, type TestStore } from '../support/stores';
import { connectClient, expectReplays, startTestWorker, uniqueId, type RunningWorker } from '../support/temporal';

type HistoryEvent = temporal.api.history.v1.IHistoryEvent;

const eventMs = (event: HistoryEvent): number =>
  Number(event.eventTime!.seconds) * 1000 + (event.eventTime!.nanos ?? 0) / 1e6;

/**
 * The scheduled event of each activity type, and the event that closed it (completed, failed, cancelled, timed out).
 */
function activityEvents(
  events: readonly HistoryEvent[],
  type: string,
): { scheduled: HistoryEvent; closed: HistoryEvent[] } {
  const scheduled = events.find((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === type);
  if (!scheduled) throw new Error(`no ${type} was scheduled`);
  const id = Number(scheduled.eventId);
  const closed = events.filter((e) =>
    [
      e.activityTaskCompletedEventAttributes,
      e.activityTaskFailedEventAttributes,
      e.activityTaskCanceledEventAttributes,
      e.activityTaskTimedOutEventAttributes,
    ].some((a) => a && Number(a.scheduledEventId) === id),
  );
  return { scheduled, closed };
}

describe('the lease keeper at the end of the work', () => {
  let fixture: TestStore;
  let client: Client;
  let closeClient: () => Promise<void>;
  let worker: RunningWorker;
  // Default timings and heartbeat timeout: the keeper refreshes and beats every 5 min.
  const settings = resolveSettings({ targetSegmentBytes: 4096 });

  beforeAll(async () => {
    fixture = await openTestStore('minio');
    worker = await startTestWorker(fixture.store, settings);
    ({ client, close: closeClient } = await connectClient());
  });
  afterAll(async () => {
    await worker?.stop();
    await closeClient?.();
    await fixture?.store.close();
  });

  it('stops within 1 s of the work ending: publication is scheduled less than 1 s after the work returned', async () => {
    const ns = uniqueId('stop').toLowerCase();
    await writeInputs(fixture.store, ns, 'bindings', makeInputs(3, 25));
    const handle = await startCompaction(client, { namespaceId: ns, group: 'bindings', taskQueue: worker.taskQueue });
    expect((await handle.result()).outcome).toBe('published');

    const events = (await handle.fetchHistory()).events ?? [];
    const leased = activityEvents(events, 'compactUnderLease');
    const publish = activityEvents(events, 'publish');
    // The keeper stopped itself when the work returned (completed), it was not cancelled by a heartbeat response.
    expect(leased.closed.map((e) => Boolean(e.activityTaskCompletedEventAttributes))).toEqual([true]);
    const [completed] = leased.closed;
    const { workEndedAtMs } = defaultPayloadConverter.fromPayload<LeasedCompactionOutput>(
      completed!.activityTaskCompletedEventAttributes!.result!.payloads![0]!,
    );
    const gapMs = eventMs(publish.scheduled) - workEndedAtMs;
    console.log(
      `keeper stop: work ${(workEndedAtMs - eventMs(leased.scheduled)).toFixed(0)} ms, work end → publication scheduled ${gapMs.toFixed(0)} ms`,
    );
    expect(gapMs).toBeLessThan(1000);
    await expectReplays(client, handle.workflowId);
  });
});
