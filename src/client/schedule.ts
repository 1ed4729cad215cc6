/**
 * The collector on a Temporal Schedule (not the legacy workflow `cronSchedule`): one schedule,
 * created or updated in place, that starts a {@link gcWorkflow} pass from a cron expression or an
 * interval. Passes never overlap (SKIP), missed ones are caught up only briefly, and a failed
 * pass pauses the schedule so an operator looks before the next one runs.
 */
import { ScheduleAlreadyRunning, ScheduleOverlapPolicy, type Client, type ScheduleDescription, type ScheduleHandle } from '@temporalio/client';
import type { Duration } from '@temporalio/common';
import { collectorTaskQueueFromEnv, taskQueueFromEnv } from '../worker/task-queue';
import type { GcOptions, gcWorkflow } from '../workflows/gc';

export const DEFAULT_GC_SCHEDULE_ID = 'compaction-gc';

export type GcCadence =
  /** A cron expression as operators write it, e.g. `*\/15 * * * *`. */
  | { readonly cron: string }
  | { readonly every: Duration };

export type GcScheduleOptions = GcCadence & {
  readonly scheduleId?: string;
  /** Default: `COMPACTION_TASK_QUEUE`, else `compaction-lease`. */
  readonly taskQueue?: string;
  /** How late a missed pass may still start (after a server outage); later ones are skipped. */
  readonly catchupWindow?: Duration;
  /** What every pass does (dry run, namespaces, concurrency); `collectorTaskQueue` defaults to `COMPACTION_COLLECTOR_TASK_QUEUE`, else the schedule's queue, fixed here for every pass. */
  readonly pass?: GcOptions;
};

const scheduleId = (options: { scheduleId?: string }) => options.scheduleId ?? DEFAULT_GC_SCHEDULE_ID;

/** Creates the collector's schedule, or updates the existing one to these options: calling it again never makes a second one. */
export async function ensureGcSchedule(client: Client, options: GcScheduleOptions): Promise<ScheduleHandle> {
  const id = scheduleId(options);
  const spec = 'cron' in options ? { cronExpressions: [options.cron] } : { intervals: [{ every: options.every }] };
  const taskQueue = options.taskQueue ?? taskQueueFromEnv();
  const pass = { ...options.pass, collectorTaskQueue: options.pass?.collectorTaskQueue ?? collectorTaskQueueFromEnv(process.env, taskQueue) };
  const action = {
    type: 'startWorkflow' as const,
    workflowType: 'gcWorkflow',
    workflowId: `${id}-pass`,
    taskQueue,
    args: [pass] as Parameters<typeof gcWorkflow>,
    staticSummary: `Collector pass${options.pass?.dryRun ? ' (dry run)' : ''}: claim expired compaction leases and reclaim what no one owns`,
    staticDetails:
      'One child workflow per namespace. Current details and memo `gcTotals`: prefixes seen, claimed, deleted objects and bytes, retained; ' +
      'search attributes `GcPrefixesSeen`, `GcObjectsDeleted`, `GcCorruptLeases`, `GcIncomplete`. A namespace left incomplete for its own reason ' +
      '(a corrupt lease, a root problem) is reported and the schedule keeps running; a failed pass (a walk or a namespace failed) pauses it.',
  };
  const policies = { overlap: ScheduleOverlapPolicy.SKIP, catchupWindow: options.catchupWindow ?? '5 minutes', pauseOnFailure: true };
  try {
    return await client.schedule.create({ scheduleId: id, spec, action, policies });
  } catch (err) {
    if (!(err instanceof ScheduleAlreadyRunning)) throw err;
    const handle = client.schedule.getHandle(id);
    await handle.update((previous) => ({ ...previous, spec, action, policies }));
    return handle;
  }
}

export const pauseGcSchedule = (client: Client, note: string, options: { scheduleId?: string } = {}): Promise<void> =>
  client.schedule.getHandle(scheduleId(options)).pause(note);

export const unpauseGcSchedule = (client: Client, note: string, options: { scheduleId?: string } = {}): Promise<void> =>
  client.schedule.getHandle(scheduleId(options)).unpause(note);

/** Starts a pass now, outside the cadence; skipped like any other if a pass is running. */
export const triggerGcPass = (client: Client, options: { scheduleId?: string } = {}): Promise<void> =>
  client.schedule.getHandle(scheduleId(options)).trigger(ScheduleOverlapPolicy.SKIP);

export const describeGcSchedule = (client: Client, options: { scheduleId?: string } = {}): Promise<ScheduleDescription> =>
  client.schedule.getHandle(scheduleId(options)).describe();
