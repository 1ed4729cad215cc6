/** Whether any worker serves a task queue: a workflow started on a queue no worker polls waits there silently, forever. */
import type { Client } from '@temporalio/client';
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

/** No worker polled the task queue within the wait; the message names the queue and how to start one. */
export class NoWorkerPollingError extends Error {
  override readonly name = 'NoWorkerPollingError';
  constructor(
    readonly taskQueue: string,
    readonly namespace: string,
    readonly waitedMs: number,
    readonly polledFor: PolledFor = 'workflows',
  ) {
    const { what, worker, setting } = POLLED_FOR[polledFor];
    super(
      `no worker polls task queue ${taskQueue}${what} in Temporal namespace ${namespace} (waited ${waitedMs / 1000}s): ` +
        `start one on it (\`${worker}\` with ${setting}=${taskQueue}), or point ${setting} at the queue your workers poll`,
    );
  }
}

/** Identities of the workers that polled the queue recently for these tasks (the server keeps pollers for a few minutes). */
export async function taskQueuePollers(client: Client, taskQueue: string, polledFor: PolledFor = 'workflows'): Promise<string[]> {
  const { pollers } = await client.workflowService.describeTaskQueue({
    namespace: client.options.namespace,
    taskQueue: { name: taskQueue, kind: temporal.api.enums.v1.TaskQueueKind.TASK_QUEUE_KIND_NORMAL },
    taskQueueType: POLLED_FOR[polledFor].taskQueueType,
  });
  return (pollers ?? []).map((p) => p.identity ?? 'unknown');
}

/** Resolves once a worker polls `taskQueue` for `polledFor`; throws {@link NoWorkerPollingError} after `timeoutMs` without one. */
export async function waitForWorker(
  client: Client,
  taskQueue: string,
  { timeoutMs = 10_000, intervalMs = 500, polledFor = 'workflows' as PolledFor } = {},
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if ((await taskQueuePollers(client, taskQueue, polledFor)).length) return;
    if (Date.now() >= deadline) throw new NoWorkerPollingError(taskQueue, client.options.namespace, timeoutMs, polledFor);
    await new Promise((resolve) => setTimeout(resolve, Math.min(intervalMs, Math.max(0, deadline - Date.now()))));
  }
}
