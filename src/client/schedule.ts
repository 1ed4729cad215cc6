/**
 * The collector on a Temporal Schedule (not the legacy workflow `cronSchedule`): one schedule,
 * created or updated in place, that starts a {@link gcWorkflow} pass from a cron expression or an
 * interval. Passes never overlap (SKIP), missed ones are caught up only briefly, and a failed
 * pass pauses the schedule so an operator looks before the next one runs.
 */
import {
  ScheduleAlreadyRunning,
  ScheduleOverlapPolicy,
  type Client,
  type ScheduleDescription,
  type ScheduleHandle,
} from '@temporalio/client';
import type { Duration } from '@temporalio/common';
import { sameStore, storeIdentityFromEnv } from '../store';
import { collectorTaskQueueFromEnv, taskQueueFromEnv } from '../worker/task-queue';
import { TypedError } from '../errors';
import type { GcOptions, gcWorkflow } from '../workflows/gc';
import { requireSearchAttributes } from './search-attributes';

export const DEFAULT_GC_SCHEDULE_ID = 'compaction-gc';

export type GcCadence =
  /** A cron expression as operators write it, e.g. `*\/15 * * * *`. */
  { readonly cron: string } | { readonly every: Duration };

/**
 * The collector's Temporal Schedule as {@link ensureGcSchedule} creates or updates it: its cadence, queue and what
 * every pass does.
 */
export type GcScheduleOptions = GcCadence & {
  readonly scheduleId?: string;
  /** Default: `COMPACTION_TASK_QUEUE`, else `compaction-lease`. */
  readonly taskQueue?: string;
  /** How late a missed pass may still start (after a server outage); later ones are skipped. */
  readonly catchupWindow?: Duration;
  /**
   * What every pass does (dry run, namespaces, concurrency); `collectorTaskQueue` defaults to
   * `COMPACTION_COLLECTOR_TASK_QUEUE`, else the schedule's queue, and `store` to the store the
   * environment names (else each pass's first worker's), fixed here for every pass.
   */
  readonly pass?: GcOptions;
  /**
   * Re-point a schedule whose passes run on other queues, or collect another store, to these. Without
   * it such a schedule is another deployment's and {@link GcScheduleOwnedError} is thrown.
   */
  readonly replace?: boolean;
};

const scheduleId = (options: { scheduleId?: string }) => options.scheduleId ?? DEFAULT_GC_SCHEDULE_ID;

/**
 * Whose a schedule is: the queues its passes start on and send their collector work to, and the store they collect when
 * it names one.
 */
export interface GcScheduleOwner {
  readonly taskQueue: string;
  readonly collectorTaskQueue: string;
  readonly store?: string;
}

const ownerText = (o: GcScheduleOwner): string =>
  `task queue ${o.taskQueue}${o.collectorTaskQueue === o.taskQueue ? '' : ` (collector task queue ${o.collectorTaskQueue})`}${o.store ? `, store ${o.store}` : ''}`;

/**
 * Whether `requested` would move the schedule of `existing` to other workers or another store; a store
 * either side leaves unnamed is not a difference, nor one bucket named at another endpoint (the workers' own rule).
 */
const otherOwner = (existing: GcScheduleOwner, requested: GcScheduleOwner): boolean =>
  existing.taskQueue !== requested.taskQueue ||
  existing.collectorTaskQueue !== requested.collectorTaskQueue ||
  (existing.store !== undefined && requested.store !== undefined && !sameStore(existing.store, requested.store));

/**
 * The schedule exists and starts its passes on other queues, or for another store, than asked: it is
 * another deployment's. Updating it would move that deployment's collector to these workers, silently.
 */
export class GcScheduleOwnedError extends TypedError {
  readonly failureType = 'GcScheduleOwned';
  constructor(
    readonly scheduleId: string,
    readonly existing: GcScheduleOwner,
    readonly requested: GcScheduleOwner,
  ) {
    super(
      `schedule ${scheduleId} runs its passes on ${ownerText(existing)}, not on ${ownerText(requested)}: it collects for another deployment, ` +
        `so it is left as it is; give this deployment its own schedule (\`gc schedule ensure --schedule-id …\`, option scheduleId), ` +
        `or, if that deployment is gone for good, re-point it (\`--replace\`, option replace: true)`,
    );
  }
}

/**
 * Creates the collector's schedule, or updates the existing one to these options: calling it again
 * never makes a second one. An existing schedule on other queues or of another store is refused ({@link
 * GcScheduleOwnedError})
 * unless `replace`. The Temporal namespace's search attributes are checked first.
 */
export async function ensureGcSchedule(client: Client, options: GcScheduleOptions): Promise<ScheduleHandle> {
  const id = scheduleId(options);
  const spec = 'cron' in options ? { cronExpressions: [options.cron] } : { intervals: [{ every: options.every }] };
  const taskQueue = options.taskQueue ?? taskQueueFromEnv();
  const store = options.pass?.store ?? storeIdentityFromEnv();
  const pass = {
    ...options.pass,
    collectorTaskQueue: options.pass?.collectorTaskQueue ?? collectorTaskQueueFromEnv(undefined, taskQueue),
    ...(store !== undefined && { store }),
  };
  await requireSearchAttributes(client.connection, client.options.namespace);
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
  const policies = {
    overlap: ScheduleOverlapPolicy.SKIP,
    catchupWindow: options.catchupWindow ?? '5 minutes',
    pauseOnFailure: true,
  };
  try {
    return await client.schedule.create({ scheduleId: id, spec, action, policies });
  } catch (err) {
    if (!(err instanceof ScheduleAlreadyRunning)) throw err;
    const handle = client.schedule.getHandle(id);
    await handle.update((previous) => {
      if (previous.action.type === 'startWorkflow' && !options.replace) {
        const before = previous.action.args?.[0] as GcOptions | undefined;
        const existing = {
          taskQueue: previous.action.taskQueue,
          collectorTaskQueue: before?.collectorTaskQueue ?? previous.action.taskQueue,
          ...(before?.store !== undefined && { store: before.store }),
        };
        const requested = {
          taskQueue,
          collectorTaskQueue: pass.collectorTaskQueue,
          ...(store !== undefined && { store }),
        };
        if (otherOwner(existing, requested)) throw new GcScheduleOwnedError(id, existing, requested);
      }
      return { ...previous, spec, action, policies };
    });
    return handle;
  }
}

export const pauseGcSchedule = (client: Client, note: string, options: { scheduleId?: string } = {}): Promise<void> =>
  client.schedule.getHandle(scheduleId(options)).pause(note);

export const unpauseGcSchedule = (client: Client, note: string, options: { scheduleId?: string } = {}): Promise<void> =>
  client.schedule.getHandle(scheduleId(options)).unpause(note);

/**
 * Starts a pass now, outside the cadence; skipped like any other if a pass is running. The namespace's search
 * attributes are checked first.
 */
export async function triggerGcPass(client: Client, options: { scheduleId?: string } = {}): Promise<void> {
  await requireSearchAttributes(client.connection, client.options.namespace);
  await client.schedule.getHandle(scheduleId(options)).trigger(ScheduleOverlapPolicy.SKIP);
}

export const describeGcSchedule = (
  client: Client,
  options: { scheduleId?: string } = {},
): Promise<ScheduleDescription> => client.schedule.getHandle(scheduleId(options)).describe();
