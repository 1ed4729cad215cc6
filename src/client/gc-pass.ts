/**
 * One collector pass on demand, outside the schedule, and its report as a value: a pass that ends
 * incomplete (a corrupt lease, a failed prefix or namespace) still did work, and its report says
 * what, so it is returned beside `complete: false` rather than left in a failure's details.
 */
import { WorkflowFailedError, type Client, type WorkflowHandleWithFirstExecutionRunId } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { storeIdentityFromEnv } from '../store';
import { collectorTaskQueueFromEnv, taskQueueFromEnv } from '../worker/task-queue';
import type { GcOptions, GcReport, gcWorkflow } from '../workflows/gc';
import { requireSearchAttributes } from './search-attributes';
import type { FailureType } from '../errors';
import { watchedResult, type WaitOptions } from './waiting';
import { DEFAULT_WORKER_TIMEOUT_MS, waitForWorker, type WorkerCheckOptions } from './workers';

/**
 * The failure type of a pass that ran to its end but failed somewhere (a walk, a namespace's pass); its report is the
 * failure's first detail.
 */
export const GC_PASS_INCOMPLETE = 'GcPassIncomplete' satisfies FailureType;

/** What one collector pass does ({@link GcOptions}) and where {@link startGcPass} starts it. */
export interface GcPassOptions extends GcOptions, WorkerCheckOptions {
  /** Default: `compaction-gc-run-<ISO time>`. */
  readonly workflowId?: string;
  /**
   * Default: `COMPACTION_TASK_QUEUE`, else `compaction-lease`. `collectorTaskQueue` defaults to
   * `COMPACTION_COLLECTOR_TASK_QUEUE`, else this queue.
   */
  readonly taskQueue?: string;
  /** Shown in the UI; default names the pass as run on demand. */
  readonly summary?: string;
}

/** A started collector pass: {@link gcPassResult} waits for its report. */
export type GcPassHandle = WorkflowHandleWithFirstExecutionRunId<typeof gcWorkflow>;

/** A finished pass's report, complete or not: an incomplete pass is a value here, not a thrown failure. */
export interface GcPassResult {
  /** The pass's workflow id. */
  readonly workflowId: string;
  /** The run that returned the report (the last, after any continue-as-new). */
  readonly runId: string;
  /**
   * False when the pass met corrupt leases, root problems or failures, which the report names. Only a
   * failure of the pass itself (a failed walk or namespace) fails the workflow and pauses a schedule.
   */
  readonly complete: boolean;
  /** What the pass did, complete or not. */
  readonly report: GcReport;
}

/** The queue a pass starts on and the one its collector work goes to, from the options, else the environment. */
function passQueues(options: Pick<GcPassOptions, 'taskQueue' | 'collectorTaskQueue'>): {
  taskQueue: string;
  collectorTaskQueue: string;
} {
  const taskQueue = options.taskQueue ?? taskQueueFromEnv();
  return {
    taskQueue,
    collectorTaskQueue: options.collectorTaskQueue ?? collectorTaskQueueFromEnv(undefined, taskQueue),
  };
}

/**
 * Starts one pass now (workflow `gcWorkflow`), beside any schedule. First it checks the Temporal
 * namespace's search attributes (`SearchAttributesMissingError`), then looks for live workers: on the
 * start queue, and on the collector's queue for its activities when that is another one; it throws
 * `NoWorkerPollingError` naming the queue when none polls within `workerTimeoutMs`, starting nothing.
 */
export async function startGcPass(client: Client, options: GcPassOptions = {}): Promise<GcPassHandle> {
  const { workflowId, summary, workerTimeoutMs = DEFAULT_WORKER_TIMEOUT_MS, taskQueue: asked, ...pass } = options;
  const { taskQueue, collectorTaskQueue } = passQueues({
    taskQueue: asked,
    collectorTaskQueue: pass.collectorTaskQueue,
  });
  const store = pass.store ?? storeIdentityFromEnv();
  await requireSearchAttributes(client.connection, client.options.namespace);
  if (workerTimeoutMs !== false) {
    await Promise.all([
      waitForWorker(client, taskQueue, { timeoutMs: workerTimeoutMs }),
      // A worker of role `all` on the start queue serves the collector's activities there too.
      collectorTaskQueue === taskQueue
        ? undefined
        : waitForWorker(client, collectorTaskQueue, { timeoutMs: workerTimeoutMs, polledFor: 'collector' }),
    ]);
  }
  return client.workflow.start<typeof gcWorkflow>('gcWorkflow', {
    workflowId: workflowId ?? `compaction-gc-run-${new Date().toISOString()}`,
    taskQueue,
    args: [{ ...pass, collectorTaskQueue, ...(store !== undefined && { store }) }],
    staticSummary:
      summary ??
      `Collector pass on demand${pass.dryRun ? ' (dry run)' : ''}${pass.namespaces ? ` over ${pass.namespaces.join(', ')}` : ''}`,
  });
}

/** The report an incomplete pass failed with, or undefined for any other error. */
export function gcReportOfFailure(err: unknown): GcReport | undefined {
  const cause = err instanceof WorkflowFailedError ? err.cause : undefined;
  return cause instanceof ApplicationFailure && cause.type === GC_PASS_INCOMPLETE
    ? (cause.details?.[0] as GcReport | undefined)
    : undefined;
}

/**
 * Waits for a pass and returns its report, complete or not; any other failure (bad input, termination)
 * is thrown, and so is a workflow task that keeps failing (`WorkflowTaskFailingError`). While the pass
 * waits for a worker, `onWait` hears of it every 30 s. `collectorTaskQueue`: where its activities go,
 * when not on the queue it started on.
 */
export async function gcPassResult(
  handle: GcPassHandle,
  options: WaitOptions & { readonly collectorTaskQueue?: string } = {},
): Promise<GcPassResult> {
  const runId = handle.firstExecutionRunId;
  const { collectorTaskQueue, ...waiting } = options;
  try {
    const { complete = true, ...report } = await watchedResult(handle, {
      ...waiting,
      ...(collectorTaskQueue && { activityTaskQueue: collectorTaskQueue }),
    });
    return { workflowId: handle.workflowId, runId, complete, report };
  } catch (err) {
    const report = gcReportOfFailure(err);
    if (!report) throw err;
    return { workflowId: handle.workflowId, runId, complete: false, report };
  }
}

/** Runs one pass and returns its typed report: {@link startGcPass} then {@link gcPassResult}. */
export async function runGcPass(client: Client, options: GcPassOptions & WaitOptions = {}): Promise<GcPassResult> {
  const { onWait, watchIntervalMs, ...start } = options;
  return gcPassResult(await startGcPass(client, start), {
    onWait,
    watchIntervalMs,
    collectorTaskQueue: passQueues(start).collectorTaskQueue,
  });
}
