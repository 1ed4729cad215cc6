/**
 * Waiting for a run without waiting in silence. A run whose workflow task fails (an unregistered
 * search attribute, a workflow bug) stays Running and the server retries the task for ever, so its
 * result never comes; a run whose task queue no worker polls waits just as quietly. Beside the
 * result, a wait describes the run (and its open children) every few seconds: a workflow task on its
 * second attempt ends the wait with the failure from the run's history, and a task waiting for a
 * worker gives a line naming the queue and what polls it, at once and then every 30 s.
 */
import type { WorkflowClient } from '@temporalio/client';
import { optionalTsToMs } from '@temporalio/common/lib/time';
import { temporal } from '@temporalio/proto';
import { CLIENT_SETTINGS } from '../config/declaration';
import { TypedError } from '../errors';
import { describeWorkers, taskQueueWorkers, type PolledFor } from './workers';

/** How often a wait that sees a run waiting for a worker says so again. */
export const WAIT_REPORT_INTERVAL_MS = 30_000;
/**
 * How long a task may wait to be taken before the run counts as waiting for a worker: a polling worker takes one within
 * milliseconds.
 */
const TAKEN_WITHIN_MS = 2_000;
/** The first look comes sooner than the next ones: a run that cannot start says so at once. */
const FIRST_LOOK_MS = 2_500;
/** Open children described per look: a pass runs `namespaceConcurrency` of them at once (4 by default). */
const CHILDREN_WATCHED = 8;

/** How a wait for a run reports while the run waits for a worker, and how often it looks. */
export interface WaitOptions {
  /**
   * Where a line goes while the run waits for a worker: when first seen, then every 30 s.
   * @default console.warn
   */
  readonly onWait?: (line: string) => void;
  /**
   * How often the run is described (one `DescribeWorkflowExecution`, and one per open child): a
   * failing workflow task is reported within this plus the server's retry of the task (about 1 s).
   * Default `CLIENT_SETTINGS.watchIntervalMs`.
   */
  readonly watchIntervalMs?: number;
}

const { WorkflowTaskFailedCause, PendingWorkflowTaskState, PendingActivityState } = temporal.api.enums.v1;

const FIXES: Readonly<Record<string, string>> = {
  BAD_SEARCH_ATTRIBUTES:
    'register the search attributes (`compaction-lease temporal setup`, or `registerSearchAttributes`): the server retries the task and the run goes on',
  NON_DETERMINISTIC_ERROR:
    'the workers run other workflow code than the run was recorded with: deploy the version it started on, or terminate the run (docs/operations.md, "Upgrading workers")',
  WORKFLOW_WORKER_UNHANDLED_FAILURE:
    "the workflow code failed on the worker: its log says why; fix and redeploy, and the server's next retry goes on",
};

/**
 * A run's workflow task fails again and again: the run stays Running, its result never comes. The message names the
 * run, the cause and the fix.
 */
export class WorkflowTaskFailingError extends TypedError implements WorkflowTaskFailure {
  readonly failureType = 'WorkflowTaskFailing';
  readonly workflowId: string;
  readonly runId: string;
  readonly failureCause: string;
  readonly failure: string;
  readonly attempt: number;
  constructor({ workflowId, runId, failureCause, failure, attempt }: WorkflowTaskFailure) {
    super(
      `workflow ${workflowId} (run ${runId}) stays Running: its workflow task failed ${attempt} times in a row, ${failureCause}: ${failure}; ` +
        (FIXES[failureCause] ??
          "see the worker's log; the server retries the task until it succeeds or the run is terminated"),
    );
    this.workflowId = workflowId;
    this.runId = runId;
    this.failureCause = failureCause;
    this.failure = failure;
    this.attempt = attempt;
  }
}

/** The run whose workflow task keeps failing, and the server's account of its last failure. */
export interface WorkflowTaskFailure {
  /** The run's workflow id. */
  readonly workflowId: string;
  /** The run id. */
  readonly runId: string;
  /** The server's cause without its prefix, e.g. `BAD_SEARCH_ATTRIBUTES`. */
  readonly failureCause: string;
  /** The failure's message as the server recorded it. */
  readonly failure: string;
  /** How many times in a row the task has failed. */
  readonly attempt: number;
}

type Description = Awaited<ReturnType<ReturnType<WorkflowClient['getHandle']>['describe']>>;

/** A task of the run that has waited for a worker longer than a worker takes one. */
interface Waiting {
  readonly workflowId: string;
  readonly taskQueue: string;
  readonly polledFor: PolledFor;
  readonly what: string;
  readonly sinceMs: number;
}

/**
 * Causes the server fails a workflow task for on its own account and retries at once (new events
 * arrived, a sticky worker left, a reset): none says the workflow or the namespace is at fault.
 */
const TRANSIENT_CAUSES = new Set([
  'UNHANDLED_COMMAND',
  'RESET_STICKY_TASK_QUEUE',
  'RESET_WORKFLOW',
  'FORCE_CLOSE_COMMAND',
  'FAILOVER_CLOSE_COMMAND',
]);

/**
 * How the run's last workflow task ended, from its history, when it failed: the server writes the
 * first failure of a series (later attempts only count). Undefined when the last one completed or
 * timed out (a worker that died holding it: the task waits for another worker, which the wait reports).
 */
async function lastTaskFailure(
  client: WorkflowClient,
  workflowId: string,
  runId: string,
): Promise<{ cause: string; message: string } | undefined> {
  const { events } = await client.getHandle(workflowId, runId).fetchHistory();
  const last = [...(events ?? [])]
    .reverse()
    .find(
      (e) =>
        e.workflowTaskFailedEventAttributes ||
        e.workflowTaskTimedOutEventAttributes ||
        e.workflowTaskCompletedEventAttributes,
    );
  const failed = last?.workflowTaskFailedEventAttributes;
  if (!failed) return undefined;
  const cause = WorkflowTaskFailedCause[failed.cause ?? 0]?.replace('WORKFLOW_TASK_FAILED_CAUSE_', '') ?? 'UNSPECIFIED';
  return TRANSIENT_CAUSES.has(cause) ? undefined : { cause, message: failed.failure?.message ?? 'no message recorded' };
}

/**
 * Throws {@link WorkflowTaskFailingError} when the run's workflow task failed and is on its second attempt or later;
 * else what of it waits for a worker.
 */
async function lookAt(
  client: WorkflowClient,
  run: Description,
  activityQueue: string | undefined,
  nowMs: number,
): Promise<Waiting[]> {
  const task = run.raw.pendingWorkflowTask;
  const failing = (task?.attempt ?? 0) >= 2 ? await lastTaskFailure(client, run.workflowId, run.runId) : undefined;
  if (failing)
    throw new WorkflowTaskFailingError({
      workflowId: run.workflowId,
      runId: run.runId,
      failureCause: failing.cause,
      failure: failing.message,
      attempt: task?.attempt ?? 2,
    });
  const waiting: Waiting[] = [];
  const scheduledMs = optionalTsToMs(task?.scheduledTime);
  if (
    task?.state === PendingWorkflowTaskState.PENDING_WORKFLOW_TASK_STATE_SCHEDULED &&
    scheduledMs !== undefined &&
    nowMs - scheduledMs > TAKEN_WITHIN_MS
  ) {
    waiting.push({
      workflowId: run.workflowId,
      taskQueue: run.taskQueue,
      polledFor: 'workflows',
      what: 'a workflow task',
      sinceMs: scheduledMs,
    });
  }
  for (const activity of run.raw.pendingActivities ?? []) {
    if (activity.state !== PendingActivityState.PENDING_ACTIVITY_STATE_SCHEDULED) continue;
    // An activity between attempts is scheduled again at its next attempt's time.
    const sinceMs = Math.max(
      optionalTsToMs(activity.scheduledTime) ?? nowMs,
      optionalTsToMs(activity.nextAttemptScheduleTime) ?? 0,
    );
    if (nowMs - sinceMs <= TAKEN_WITHIN_MS) continue;
    const taskQueue = activityQueue ?? run.taskQueue;
    waiting.push({
      workflowId: run.workflowId,
      taskQueue,
      polledFor: taskQueue === run.taskQueue ? 'workflows' : 'collector',
      what: `activity ${activity.activityType?.name ?? activity.activityId}`,
      sinceMs,
    });
  }
  return waiting;
}

/** Resolves after `ms`, or at once when `signal` aborts: no timer outlives the wait. */
function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
    function done() {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
  });
}

/** One look at the run and its open children. */
async function look(client: WorkflowClient, workflowId: string, activityQueue: string | undefined): Promise<Waiting[]> {
  const run = await client.getHandle(workflowId).describe();
  if (run.status.name !== 'RUNNING') return [];
  const nowMs = Date.now();
  const waiting = await lookAt(client, run, activityQueue, nowMs);
  // A pass's namespaces run as child workflows on the collector's queue, their activities on their own queue.
  const children = (run.raw.pendingChildren ?? []).slice(0, CHILDREN_WATCHED).filter((c) => c.workflowId);
  for (const child of await Promise.all(children.map((c) => client.getHandle(c.workflowId as string).describe()))) {
    if (child.status.name === 'RUNNING') waiting.push(...(await lookAt(client, child, undefined, nowMs)));
  }
  return waiting;
}

export interface WatchedRun {
  readonly workflowId: string;
  /** Where the run's activities go when not on its own queue (a pass's collector queue). */
  readonly activityTaskQueue?: string;
}

/**
 * Rejects with {@link WorkflowTaskFailingError} when the run's (or an open child's) workflow task
 * keeps failing; reports waits for a worker through `onWait`. Never resolves: it runs until `signal`
 * aborts. A look that fails (the server busy, the run not yet visible) is skipped, not fatal: the
 * result the caller awaits beside it reports a server that stays away.
 */
async function watchRun(
  client: WorkflowClient,
  run: WatchedRun,
  options: WaitOptions,
  signal: AbortSignal,
): Promise<never> {
  const { onWait = (line: string) => console.warn(line), watchIntervalMs = CLIENT_SETTINGS.watchIntervalMs.default } =
    options;
  let reportedAtMs = -Infinity;
  for (let looks = 0; ; looks++) {
    await sleep(looks === 0 ? Math.min(FIRST_LOOK_MS, watchIntervalMs) : watchIntervalMs, signal);
    if (signal.aborted) return new Promise<never>(() => {});
    let waiting: Waiting[];
    try {
      waiting = await look(client, run.workflowId, run.activityTaskQueue);
    } catch (err) {
      if (err instanceof WorkflowTaskFailingError) throw err;
      continue;
    }
    if (signal.aborted || waiting.length === 0 || Date.now() - reportedAtMs < WAIT_REPORT_INTERVAL_MS) continue;
    reportedAtMs = Date.now();
    for (const queue of new Map(waiting.map((w) => [`${w.polledFor}:${w.taskQueue}`, w])).values()) {
      const workers = await taskQueueWorkers(client, queue.taskQueue, queue.polledFor).then(
        describeWorkers,
        () => 'the server did not say who polls it',
      );
      if (!signal.aborted) {
        onWait(
          `${queue.workflowId} waits for a worker on task queue ${queue.taskQueue} (${queue.what}, for ${Math.round((Date.now() - queue.sinceMs) / 1000)} s): ${workers}`,
        );
      }
    }
  }
}

/**
 * The run's result, as `handle.result()` gives it, watched meanwhile: a workflow task that keeps
 * failing ends the wait with {@link WorkflowTaskFailingError} (the run stays Running), and while the
 * run waits for a worker, `onWait` gets a line naming the queue and what polls it.
 */
export async function watchedResult<R>(
  handle: { readonly workflowId: string; readonly client: WorkflowClient; result(): Promise<R> },
  options: WaitOptions & Pick<WatchedRun, 'activityTaskQueue'> = {},
): Promise<R> {
  const watching = new AbortController();
  try {
    return await Promise.race([
      handle.result(),
      watchRun(handle.client, { workflowId: handle.workflowId, ...options }, options, watching.signal),
    ]);
  } finally {
    watching.abort();
  }
}
