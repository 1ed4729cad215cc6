/** Starting compactions from the metadata service. */
import type { Client, WorkflowHandleWithFirstExecutionRunId } from '@temporalio/client';
import { familyGroup, namespaceId } from '../keys';
import { taskQueueFromEnv } from '../worker/task-queue';
import type { compactionWorkflow } from '../workflows';
import { CompactionGroup, CompactionNamespace } from '../workflows/search-attributes';
import { DEFAULT_WORKER_TIMEOUT_MS, openRunTaskQueue, waitForWorker, type WorkerCheckOptions } from './workers';

/** At most one compaction per group runs at a time: its workflow id names the group. */
export const compactionWorkflowId = (ns: string, group: string): string => `compaction:${namespaceId(ns)}:${familyGroup(group)}`;

export interface StartCompactionOptions extends WorkerCheckOptions {
  readonly namespaceId: string;
  readonly group: string;
  /** Default: `COMPACTION_TASK_QUEUE`, else `compaction-lease`, the queue {@link createWorker} polls by default. */
  readonly taskQueue?: string;
}

/**
 * Starts the group's compaction, or returns the one already running (`USE_EXISTING`): repeated
 * starts are idempotent. Once a run has closed, however it ended (published, fenced, or failed on
 * bad input), the next start begins a new run under the same id (`ALLOW_DUPLICATE`).
 *
 * First it looks for a live worker on the queue the run would wait on (the open run's queue when the
 * group already runs) and throws `NoWorkerPollingError` naming that queue when none polls it within
 * `workerTimeoutMs`, starting nothing: a run on a queue no worker polls would hold the group, silently.
 */
export async function startCompaction(client: Client, options: StartCompactionOptions): Promise<WorkflowHandleWithFirstExecutionRunId<typeof compactionWorkflow>> {
  const ns = namespaceId(options.namespaceId);
  const group = familyGroup(options.group);
  const workflowId = compactionWorkflowId(ns, group);
  const taskQueue = options.taskQueue ?? taskQueueFromEnv();
  const { workerTimeoutMs = DEFAULT_WORKER_TIMEOUT_MS } = options;
  if (workerTimeoutMs !== false) {
    const openRunQueue = await openRunTaskQueue(client, workflowId);
    await waitForWorker(client, openRunQueue ?? taskQueue, { timeoutMs: workerTimeoutMs, ...(openRunQueue !== undefined && { waitingWorkflowId: workflowId }) });
  }
  return client.workflow.start<typeof compactionWorkflow>('compactionWorkflow', {
    workflowId,
    workflowIdConflictPolicy: 'USE_EXISTING',
    workflowIdReusePolicy: 'ALLOW_DUPLICATE',
    taskQueue,
    args: [{ namespaceId: ns, group }],
    staticSummary: `Compact group ${group} of namespace ${ns} under a lease`,
    staticDetails:
      'Merges the group\'s segments into new ones while refreshing its lease, then swaps them into the namespace root. ' +
      'Current details: phase, job, lease, progress. Outcome in search attribute `CompactionOutcome`; a fenced job runs again as a new job.',
    typedSearchAttributes: [
      { key: CompactionNamespace, value: ns },
      { key: CompactionGroup, value: group },
    ],
  });
}
export * from './schedule';
export * from './gc-pass';
export * from './search-attributes';
export * from './workers';
export { connectClientFromEnv } from './connect';
