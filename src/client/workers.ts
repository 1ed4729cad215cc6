/** Whether any worker serves a task queue: a workflow started on a queue no worker polls waits there silently, forever. */
import type { Client } from '@temporalio/client';
import { WorkflowNotFoundError } from '@temporalio/common';
import { optionalTsToMs } from '@temporalio/common/lib/time';
import { temporal } from '@temporalio/proto';
import { COLLECTOR_TASK_QUEUE_ENV, TASK_QUEUE_ENV } from '../worker/task-queue';

/**
 * What a queue must be polled for: `workflows` (where a workflow starts), or `collector` (the
 * activities of a pass sent to the collector's queue, which a `collector`-role worker polls).
 */
export type PolledFor = 'workflows' | 'collector';

const POLLED_FOR = {
  workflows: { taskQueueType: temporal.api.enums.v1.TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW, what: '', worker: 'compaction-lease worker', setting: TASK_QUEUE_ENV },
  collector: {
    taskQueueType: temporal.api.enums.v1.TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY,
    what: " for the collector's activities",
    worker: 'compaction-lease worker --role collector',
    setting: COLLECTOR_TASK_QUEUE_ENV,
  },
} as const;

/**
 * A poller the server saw within this window is a live worker. An idle worker's long poll ends and
 * is sent again at least once a minute (the server's long-poll timeout), while the server goes on
 * listing a stopped worker's pollers for about five minutes.
 */
export const LIVE_POLLER_WINDOW_MS = 75_000;

/** How long a start looks for a live worker before it fails, unless told otherwise. */
export const DEFAULT_WORKER_TIMEOUT_MS = 5_000;

/** No live worker polled the task queue within the wait; the message names the queue and how to start one. */
export class NoWorkerPollingError extends Error {
  override readonly name = 'NoWorkerPollingError';
  constructor(
    readonly taskQueue: string,
    readonly namespace: string,
    readonly waitedMs: number,
    readonly polledFor: PolledFor = 'workflows',
    /** The open workflow that already waits on this queue (a start would return it), if any. */
    readonly waitingWorkflowId?: string,
  ) {
    const { what, worker, setting } = POLLED_FOR[polledFor];
    super(
      `no worker polls task queue ${taskQueue}${what} in Temporal namespace ${namespace} (waited ${waitedMs / 1000}s): ` +
        (waitingWorkflowId
          ? `${waitingWorkflowId} already runs there and waits for one; start a worker on it (\`${worker}\` with ${setting}=${taskQueue}), or terminate that run to start on another queue`
          : `start one on it (\`${worker}\` with ${setting}=${taskQueue}), or point ${setting} at the queue your workers poll`),
    );
  }
}

/** Identities of the live workers polling the queue for these tasks: those the server saw within {@link LIVE_POLLER_WINDOW_MS}. */
export async function taskQueuePollers(client: Client, taskQueue: string, polledFor: PolledFor = 'workflows'): Promise<string[]> {
  const { pollers } = await client.workflowService.describeTaskQueue({
    namespace: client.options.namespace,
    taskQueue: { name: taskQueue, kind: temporal.api.enums.v1.TaskQueueKind.TASK_QUEUE_KIND_NORMAL },
    taskQueueType: POLLED_FOR[polledFor].taskQueueType,
  });
  const seenSince = Date.now() - LIVE_POLLER_WINDOW_MS;
  return (pollers ?? []).filter((p) => (optionalTsToMs(p.lastAccessTime) ?? 0) >= seenSince).map((p) => p.identity ?? 'unknown');
}

export interface WaitForWorkerOptions {
  /** @default 10_000 */
  readonly timeoutMs?: number;
  /** @default 500 */
  readonly intervalMs?: number;
  /** @default 'workflows' */
  readonly polledFor?: PolledFor;
  /** Named in the error: the open workflow that waits on this queue. */
  readonly waitingWorkflowId?: string;
}

/** Resolves once a live worker polls `taskQueue` for `polledFor`; throws {@link NoWorkerPollingError} after `timeoutMs` without one. */
export async function waitForWorker(client: Client, taskQueue: string, options: WaitForWorkerOptions = {}): Promise<void> {
  const { timeoutMs = 10_000, intervalMs = 500, polledFor = 'workflows', waitingWorkflowId } = options;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if ((await taskQueuePollers(client, taskQueue, polledFor)).length) return;
    if (Date.now() >= deadline) throw new NoWorkerPollingError(taskQueue, client.options.namespace, timeoutMs, polledFor, waitingWorkflowId);
    await new Promise((resolve) => setTimeout(resolve, Math.min(intervalMs, Math.max(0, deadline - Date.now()))));
  }
}

/** The worker check of a start (`startCompaction`, `startGcPass`). */
export interface WorkerCheckOptions {
  /**
   * How long the start looks for a live worker on its task queue before it fails with
   * {@link NoWorkerPollingError}, starting nothing; `false` starts without looking (for deployments
   * that start work before their workers).
   * @default 5_000
   */
  readonly workerTimeoutMs?: number | false;
}

/** The task queue of the open run of `workflowId`, or undefined when none runs. */
export async function openRunTaskQueue(client: Client, workflowId: string): Promise<string | undefined> {
  try {
    const run = await client.workflow.getHandle(workflowId).describe();
    return run.status.name === 'RUNNING' ? run.taskQueue : undefined;
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return undefined;
    throw err;
  }
}
