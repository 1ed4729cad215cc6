/** Starting compactions from the metadata service. */
import type { Client, WorkflowHandleWithFirstExecutionRunId } from '@temporalio/client';
import { familyGroup, namespaceId } from '../keys';
import { storeIdentityFromEnv } from '../store';
import { taskQueueFromEnv } from '../worker/task-queue';
import type { compactionWorkflow } from '../workflows';
import type { CompactionResult } from '../workflows/compaction';
import { CompactionGroup, CompactionNamespace } from '../workflows/search-attributes';
import { requireSearchAttributes } from './search-attributes';
import { watchedResult, type WaitOptions } from './waiting';
import { DEFAULT_WORKER_TIMEOUT_MS, openRunTaskQueue, waitForWorker, type WorkerCheckOptions } from './workers';

/** At most one compaction per group runs at a time: its workflow id names the group. */
export const compactionWorkflowId = (ns: string, group: string): string =>
  `compaction:${namespaceId(ns)}:${familyGroup(group)}`;

/** Which group {@link startCompaction} compacts, where its run waits for a worker, and the store it works on. */
export interface StartCompactionOptions extends WorkerCheckOptions {
  /** The namespace whose root lists the group. */
  readonly namespaceId: string;
  /** The family group to compact: one run per group at a time (workflow id `compaction:{ns}:{group}`). */
  readonly group: string;
  /** Default: `COMPACTION_TASK_QUEUE`, else `compaction-lease`, the queue {@link createWorker} polls by default. */
  readonly taskQueue?: string;
  /**
   * The store the run works on, recorded in its input (`storeIdentity(store)`); a worker bound to another
   * refuses its activities (`StoreMismatchError`). Default: the store the environment names
   * (`COMPACTION_S3_BUCKET` and endpoint, or `COMPACTION_EMBEDDED_STORE`), else the first worker's.
   */
  readonly store?: string;
}

/**
 * Starts the group's compaction, or returns the one already running (`USE_EXISTING`): repeated
 * starts are idempotent. Once a run has closed, however it ended (published, fenced, or failed on
 * bad input), the next start begins a new run under the same id (`ALLOW_DUPLICATE`).
 *
 * First it checks that the Temporal namespace has the search attributes the workflow sets
 * (`SearchAttributesMissingError` names the missing ones), then looks for a live worker on the queue
 * the run would wait on (the open run's queue when the group already runs) and throws
 * `NoWorkerPollingError` naming that queue when none polls it within `workerTimeoutMs`, starting
 * nothing: a run on a queue no worker polls would hold the group, silently.
 */
export async function startCompaction(client: Client, options: StartCompactionOptions): Promise<CompactionHandle> {
  const ns = namespaceId(options.namespaceId);
  const group = familyGroup(options.group);
  const workflowId = compactionWorkflowId(ns, group);
  const taskQueue = options.taskQueue ?? taskQueueFromEnv();
  const { workerTimeoutMs = DEFAULT_WORKER_TIMEOUT_MS, store = storeIdentityFromEnv() } = options;
  await requireSearchAttributes(client.connection, client.options.namespace);
  if (workerTimeoutMs !== false) {
    const openRunQueue = await openRunTaskQueue(client, workflowId);
    await waitForWorker(client, openRunQueue ?? taskQueue, {
      timeoutMs: workerTimeoutMs,
      ...(openRunQueue !== undefined && { waitingWorkflowId: workflowId }),
    });
  }
  return client.workflow.start<typeof compactionWorkflow>('compactionWorkflow', {
    workflowId,
    workflowIdConflictPolicy: 'USE_EXISTING',
    workflowIdReusePolicy: 'ALLOW_DUPLICATE',
    taskQueue,
    args: [{ namespaceId: ns, group, ...(store !== undefined && { store }) }],
    staticSummary: `Compact group ${group} of namespace ${ns} under a lease`,
    staticDetails:
      "Merges the group's segments into new ones while refreshing its lease, then swaps them into the namespace root. " +
      'Current details: phase, job, lease, progress. Outcome in search attribute `CompactionOutcome`; a fenced job runs again as a new job.',
    typedSearchAttributes: [
      { key: CompactionNamespace, value: ns },
      { key: CompactionGroup, value: group },
    ],
  });
}
/**
 * A started compaction: its workflow id, its first run, and `result()` (prefer {@link compactionResult}, which does not
 * wait in silence).
 */
export type CompactionHandle = WorkflowHandleWithFirstExecutionRunId<typeof compactionWorkflow>;

/**
 * The compaction's result, as `handle.result()` gives it, without waiting in silence: a workflow task
 * that keeps failing ends the wait with `WorkflowTaskFailingError` (the run stays Running), and while
 * the run waits for a worker, `onWait` hears of it every 30 s, naming the queue and what polls it.
 */
export const compactionResult = (handle: CompactionHandle, options: WaitOptions = {}): Promise<CompactionResult> =>
  watchedResult(handle, options);

export * from './schedule';
export * from './gc-pass';
export * from './search-attributes';
export * from './waiting';
export * from './workers';
export { connectClientFromEnv } from './connect';
