/**
 * A watched wait over a fake server: which workflow task failures end it, and what it says while a run waits for a
 * worker.
 */
import type { WorkflowClient } from '@temporalio/client';
import { msToTs } from '@temporalio/common/lib/time';
import { temporal } from '@temporalio/proto';
import { describe, expect, it } from 'vitest';
import { watchedResult, WorkflowTaskFailingError } from '../../src/client/waiting';

const { WorkflowTaskFailedCause, PendingWorkflowTaskState } = temporal.api.enums.v1;

/**
 * A run that never ends, whose workflow task is on `attempt` and whose history ends with `lastTaskEvent`; nothing polls
 * its queue.
 */
function stuckRun(
  attempt: number,
  lastTaskEvent: temporal.api.history.v1.IHistoryEvent,
  state = PendingWorkflowTaskState.PENDING_WORKFLOW_TASK_STATE_STARTED,
) {
  const described = {
    workflowId: 'w',
    runId: 'r',
    taskQueue: 'q',
    status: { name: 'RUNNING' },
    raw: {
      pendingWorkflowTask: { attempt, state, scheduledTime: msToTs(Date.now() - 60_000) },
      pendingActivities: [],
      pendingChildren: [],
    },
  };
  const client = {
    options: { namespace: 'default' },
    getHandle: () => ({
      describe: async () => described,
      fetchHistory: async () => ({ events: [{ workflowTaskCompletedEventAttributes: {} }, lastTaskEvent] }),
    }),
    workflowService: {
      describeTaskQueue: async () => ({ pollers: [] }),
      listWorkers: async () => ({ workersInfo: [] }),
    },
  } as unknown as WorkflowClient;
  return { workflowId: 'w', client, result: () => new Promise<never>(() => {}) };
}

/** What a wait of `ms` ends with: its error, or 'still waiting'. */
const after = (wait: Promise<unknown>, ms: number) =>
  Promise.race([
    wait.then(
      () => 'resolved',
      (e: unknown) => e,
    ),
    new Promise((resolve) => setTimeout(() => resolve('still waiting'), ms)),
  ]);

describe('a watched wait', () => {
  it('ends on a workflow task that failed and is retried, naming the cause and the fix', async () => {
    const failed = {
      workflowTaskFailedEventAttributes: {
        cause: WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_BAD_SEARCH_ATTRIBUTES,
        failure: { message: 'no mapping for GcIncomplete' },
      },
    };
    const err = await after(watchedResult(stuckRun(2, failed), { watchIntervalMs: 20, onWait: () => {} }), 2_000);
    expect(err).toBeInstanceOf(WorkflowTaskFailingError);
    expect((err as Error).message).toBe(
      'workflow w (run r) stays Running: its workflow task failed 2 times in a row, BAD_SEARCH_ATTRIBUTES: no mapping for GcIncomplete; ' +
        'register the search attributes (`compaction-lease temporal setup`, or `registerSearchAttributes`): the server retries the task and the run goes on',
    );
  });

  it('goes on through a task that timed out (its worker died) or one the server failed on its own account (new events arrived)', async () => {
    const timedOut = { workflowTaskTimedOutEventAttributes: {} };
    const unhandled = {
      workflowTaskFailedEventAttributes: {
        cause: WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_UNHANDLED_COMMAND,
      },
    };
    for (const event of [timedOut, unhandled])
      expect(await after(watchedResult(stuckRun(3, event), { watchIntervalMs: 20, onWait: () => {} }), 300)).toBe(
        'still waiting',
      );
  });

  it('says a run waits for a worker once when it sees it, naming the queue and what polls it, and not again within 30 s', async () => {
    const lines: string[] = [];
    const run = stuckRun(
      1,
      { workflowTaskCompletedEventAttributes: {} },
      PendingWorkflowTaskState.PENDING_WORKFLOW_TASK_STATE_SCHEDULED,
    );
    expect(await after(watchedResult(run, { watchIntervalMs: 20, onWait: (line) => lines.push(line) }), 300)).toBe(
      'still waiting',
    );
    expect(lines).toEqual([
      expect.stringMatching(
        /^w waits for a worker on task queue q \(a workflow task, for 60 s\): no worker polls it, nor did one in the last five minutes$/,
      ),
    ]);
  });
});
