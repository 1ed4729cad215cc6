/** Whether any worker serves a task queue: a workflow started on a queue no worker polls waits there silently, forever. */
import type { Client } from '@temporalio/client';
import { temporal } from '@temporalio/proto';

/** No worker polled the task queue within the wait; the message names the queue and how to start one. */
export class NoWorkerPollingError extends Error {
  override readonly name = 'NoWorkerPollingError';
  constructor(
    readonly taskQueue: string,
    readonly namespace: string,
    readonly waitedMs: number,
  ) {
    super(
      `no worker polls task queue ${taskQueue} in Temporal namespace ${namespace} (waited ${waitedMs / 1000}s): ` +
        `start one on it (\`compaction-lease worker\` with COMPACTION_TASK_QUEUE=${taskQueue}), or point COMPACTION_TASK_QUEUE at the queue your workers poll`,
    );
  }
}

/** Identities of the workers that polled the queue's workflow tasks recently (the server keeps pollers for a few minutes). */
export async function taskQueuePollers(client: Client, taskQueue: string): Promise<string[]> {
  const { pollers } = await client.workflowService.describeTaskQueue({
    namespace: client.options.namespace,
    taskQueue: { name: taskQueue, kind: temporal.api.enums.v1.TaskQueueKind.TASK_QUEUE_KIND_NORMAL },
    taskQueueType: temporal.api.enums.v1.TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
  });
  return (pollers ?? []).map((p) => p.identity ?? 'unknown');
}

/** Resolves once a worker polls `taskQueue`; throws {@link NoWorkerPollingError} after `timeoutMs` without one. */
export async function waitForWorker(client: Client, taskQueue: string, { timeoutMs = 10_000, intervalMs = 500 } = {}): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if ((await taskQueuePollers(client, taskQueue)).length) return;
    if (Date.now() >= deadline) throw new NoWorkerPollingError(taskQueue, client.options.namespace, timeoutMs);
    await new Promise((resolve) => setTimeout(resolve, Math.min(intervalMs, Math.max(0, deadline - Date.now()))));
  }
}
