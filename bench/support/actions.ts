/**
 * Billable Temporal actions read off the server's histories: what Temporal Cloud bills per workflow
 * (its "actions" page) besides heartbeats, which histories do not hold and the worker's heartbeat RPC
 * counter gives. Workflow tasks are not billed by Cloud but cost a self-hosted cluster; they are counted too.
 */
import type { Client } from '@temporalio/client';
import type { temporal } from '@temporalio/proto';
import { compactionWorkflowId } from '../../src/client';
import { inBatches } from '../../src/store/batches';
import type { JobSpec } from './fleet';

type HistoryEvent = temporal.api.history.v1.IHistoryEvent;

/** Actions by kind; `activity retries` are attempts past the first of a started activity (each one billed). */
export type ActionCounts = Record<
  | 'workflow started'
  | 'activities scheduled'
  | 'activity retries'
  | 'timers'
  | 'local activity markers'
  | 'search attribute upserts'
  | 'workflow tasks',
  number
>;

const eventMs = (event: HistoryEvent): number =>
  Number(event.eventTime!.seconds) * 1000 + (event.eventTime!.nanos ?? 0) / 1e6;

const none = (): ActionCounts => ({
  'workflow started': 0,
  'activities scheduled': 0,
  'activity retries': 0,
  timers: 0,
  'local activity markers': 0,
  'search attribute upserts': 0,
  'workflow tasks': 0,
});

/** The actions of these events recorded within [fromMs, toMs] (epoch ms), by kind. */
export function countActions(events: readonly HistoryEvent[], fromMs = -Infinity, toMs = Infinity): ActionCounts {
  const counts = none();
  for (const e of events) {
    const at = eventMs(e);
    if (at < fromMs || at > toMs) continue;
    if (e.workflowExecutionStartedEventAttributes) counts['workflow started']++;
    if (e.activityTaskScheduledEventAttributes) counts['activities scheduled']++;
    if (e.activityTaskStartedEventAttributes)
      counts['activity retries'] += Math.max(0, (e.activityTaskStartedEventAttributes.attempt ?? 1) - 1);
    if (e.timerStartedEventAttributes) counts.timers++;
    if (e.markerRecordedEventAttributes) counts['local activity markers']++;
    if (e.upsertWorkflowSearchAttributesEventAttributes) counts['search attribute upserts']++;
    if (e.workflowTaskScheduledEventAttributes) counts['workflow tasks']++;
  }
  return counts;
}

/** The actions in the histories of these jobs' workflows (every run, continued-as-new included), within the window. */
export async function jobActions(
  client: Client,
  jobs: readonly JobSpec[],
  fromMs?: number,
  toMs?: number,
): Promise<ActionCounts> {
  const sum = none();
  await inBatches(jobs, 1, 16, async ([job]) => {
    const workflowId = compactionWorkflowId(job!.namespaceId, job!.group);
    for await (const run of client.workflow.list({ query: `WorkflowId="${workflowId}"` })) {
      const history = await client.workflow.getHandle(workflowId, run.runId).fetchHistory();
      const counts = countActions(history.events ?? [], fromMs, toMs);
      for (const kind of Object.keys(sum) as (keyof ActionCounts)[]) sum[kind] += counts[kind];
    }
  });
  return sum;
}

export const actionTotal = (counts: ActionCounts): number => Object.values(counts).reduce((a, b) => a + b, 0);

/** The actions Temporal Cloud bills: all of them but workflow tasks, which cost only a self-hosted cluster. */
export const billableTotal = (counts: ActionCounts): number => actionTotal(counts) - counts['workflow tasks'];

/** "kind n, …" scaled by `per` (e.g. 1 / job-hours), zero kinds left out. */
export const describeActions = (counts: ActionCounts, per = 1): string =>
  Object.entries(counts)
    .filter(([, n]) => n > 0)
    .map(([kind, n]) => `${kind} ${(n * per).toFixed(2)}`)
    .join(', ') || 'none';
