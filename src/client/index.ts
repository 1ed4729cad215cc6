/** Starting compactions from the metadata service. */
import type { Client, WorkflowHandleWithFirstExecutionRunId } from '@temporalio/client';
import { familyGroup, namespaceId } from '../keys';
import { taskQueueFromEnv } from '../worker/task-queue';
import type { compactionWorkflow } from '../workflows';
import { CompactionGroup, CompactionNamespace } from '../workflows/search-attributes';

/** At most one compaction per group runs at a time: its workflow id names the group. */
export const compactionWorkflowId = (ns: string, group: string): string => `compaction:${namespaceId(ns)}:${familyGroup(group)}`;

export interface StartCompactionOptions {
  readonly namespaceId: string;
  readonly group: string;
  /** Default: `COMPACTION_TASK_QUEUE`, else `compaction-lease`, the queue {@link createWorker} polls by default. */
  readonly taskQueue?: string;
}

/**
 * Starts the group's compaction, or returns the one already running (`USE_EXISTING`): repeated
 * starts are idempotent. Once a run has closed, however it ended (published, fenced, or failed on
 * bad input), the next start begins a new run under the same id (`ALLOW_DUPLICATE`).
 */
export async function startCompaction(client: Client, options: StartCompactionOptions): Promise<WorkflowHandleWithFirstExecutionRunId<typeof compactionWorkflow>> {
  const ns = namespaceId(options.namespaceId);
  const group = familyGroup(options.group);
  return client.workflow.start<typeof compactionWorkflow>('compactionWorkflow', {
    workflowId: compactionWorkflowId(ns, group),
    workflowIdConflictPolicy: 'USE_EXISTING',
    workflowIdReusePolicy: 'ALLOW_DUPLICATE',
    taskQueue: options.taskQueue ?? taskQueueFromEnv(),
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
