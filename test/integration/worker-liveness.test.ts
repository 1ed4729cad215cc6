/**
 * A task queue whose only worker stopped 5 s earlier. The server listed a stopped worker's pollers
 * for about a minute, so a start there counted it as live and its run waited in silence. Now the
 * worker's ShutdownWorker ends its polls (this package's dev server cancels them), and where a server
 * keeps listing them, the worker's own last heartbeat says it stopped: either way a start is refused
 * within 10 s, and a wait that was told not to look says, within 10 s, that nothing polls the queue.
 */
import type { Client } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCompaction } from '../../src/client';
import { NoWorkerPollingError } from '../../src/client/workers';
import { SEARCH_ATTRIBUTES, startTemporalDevServer, type TemporalDevServer } from '../../src/devservers';
import { spawnCli, finished } from '../support/cli-process';
import { openTestStore, type TestStore } from '../support/stores';
import { connectClient, quickExpirySettings, startTestWorker, uniqueId } from '../support/temporal';
import { environmentFor } from '../support/worker-process';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * What the server lists for the queue: its pollers (identity, seconds since last seen) and the workers' last
 * heartbeats.
 */
async function listed(client: Client, taskQueue: string) {
  const { pollers } = await client.workflowService.describeTaskQueue({
    namespace: client.options.namespace,
    taskQueue: { name: taskQueue, kind: temporal.api.enums.v1.TaskQueueKind.TASK_QUEUE_KIND_NORMAL },
    taskQueueType: temporal.api.enums.v1.TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
  });
  const { workersInfo } = await client.workflowService.listWorkers({
    namespace: client.options.namespace,
    query: `TaskQueue = "${taskQueue}"`,
  });
  return {
    pollers: (pollers ?? []).map((p) => ({
      identity: p.identity,
      seenSecondsAgo: Math.round(Date.now() / 1000 - Number(p.lastAccessTime?.seconds ?? 0)),
    })),
    statuses: (workersInfo ?? []).map((w) => temporal.api.enums.v1.WorkerStatus[w.workerHeartbeat?.status ?? 0]),
  };
}

describe('a task queue whose worker stopped 5 s earlier', () => {
  let fixture: TestStore;
  beforeAll(async () => {
    fixture = await openTestStore('minio');
  });
  afterAll(async () => {
    await fixture?.store.close();
  });

  /** A worker on a fresh queue of the server at `address`, seen polling, then stopped 5 s before this resolves. */
  const stoppedWorker = async (client: Client, address?: string): Promise<{ taskQueue: string; identity: string }> => {
    const worker = await startTestWorker(fixture.store, quickExpirySettings, uniqueId('stopped-tq'), address);
    for (let i = 0; (await listed(client, worker.taskQueue)).pollers.length === 0; i++) {
      if (i > 100) throw new Error('the worker never polled');
      await sleep(100);
    }
    await worker.stop();
    await sleep(5_000);
    return { taskQueue: worker.taskQueue, identity: worker.worker.options.identity };
  };

  it(
    "on this package's dev server the stopped worker's polls ended with it: a start is refused within 10 s and starts nothing",
    { timeout: 60_000 },
    async () => {
      const { client, close } = await connectClient();
      try {
        const { taskQueue, identity } = await stoppedWorker(client);
        // It told the server it stopped: no poller left, its heartbeat SHUTTING_DOWN.
        expect(await listed(client, taskQueue)).toEqual({ pollers: [], statuses: ['WORKER_STATUS_SHUTTING_DOWN'] });
        const started = Date.now();
        const ns = uniqueId('liveness').toLowerCase();
        const err = await startCompaction(client, { namespaceId: ns, group: 'inodes', taskQueue }).then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(err).toBeInstanceOf(NoWorkerPollingError);
        expect(Date.now() - started).toBeLessThan(10_000);
        expect(identity).toBeTruthy();
        const { count } = await client.workflowService.countWorkflowExecutions({
          namespace: 'default',
          query: `WorkflowId = "compaction:${ns}:inodes"`,
        });
        expect(Number(count)).toBe(0);
      } finally {
        await close();
      }
    },
  );

  describe("on a server that keeps listing a stopped worker's pollers (polls not cancelled on ShutdownWorker, the server's own default)", () => {
    let server: TemporalDevServer;
    let client: Client;
    let close: () => Promise<void>;
    beforeAll(async () => {
      server = await startTemporalDevServer({
        uiPort: 'none',
        searchAttributes: SEARCH_ATTRIBUTES,
        cancelPollsOnShutdown: false,
      });
      ({ client, close } = await connectClient(server.address));
    }, 90_000);
    afterAll(async () => {
      await close?.();
      await server?.stop();
    });

    it(
      "the poller is still listed as seen seconds ago, but the worker's heartbeat says it stopped: a start is refused within 10 s, naming it",
      { timeout: 60_000 },
      async () => {
        const { taskQueue, identity } = await stoppedWorker(client, server.address);
        // The hang's condition: the server still lists the stopped worker's poller, well within the 75 s a poller
        // counted
        // for.
        const seen = await listed(client, taskQueue);
        expect(seen.pollers).toEqual([{ identity, seenSecondsAgo: expect.any(Number) }]);
        expect(seen.pollers[0]!.seenSecondsAgo).toBeLessThan(60);
        expect(seen.statuses).toEqual(['WORKER_STATUS_SHUTTING_DOWN']);
        const started = Date.now();
        const err = await startCompaction(client, {
          namespaceId: uniqueId('liveness').toLowerCase(),
          group: 'inodes',
          taskQueue,
        }).then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(err).toBeInstanceOf(NoWorkerPollingError);
        expect((err as Error).message).toMatch(
          new RegExp(
            `^no worker polls task queue ${taskQueue} in Temporal namespace default \\(waited 5s\\) \\(${identity.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} stopped \\d+ s ago\\): start one on it`,
          ),
        );
        expect(Date.now() - started).toBeLessThan(10_000);
      },
    );
  });

  it(
    '`compact start --wait --no-worker-check` there says within 10 s that its run waits for a worker on that queue, naming the worker that stopped',
    { timeout: 60_000 },
    async () => {
      const { client, close } = await connectClient();
      const ns = uniqueId('liveness-wait').toLowerCase();
      try {
        const { taskQueue, identity } = await stoppedWorker(client);
        const started = Date.now();
        let sawLineAtMs: number | undefined;
        const child = spawnCli(
          ['compact', 'start', '--namespace', ns, '--group', 'inodes', '--wait', '--no-worker-check'],
          environmentFor(fixture, taskQueue, quickExpirySettings),
        );
        const exited = finished(child, (stderr) => {
          if (sawLineAtMs === undefined && stderr.includes('\n')) {
            sawLineAtMs = Date.now();
            child.kill('SIGINT');
          }
        });
        const run = await exited;
        expect(run.stderr.split('\n')[0]).toMatch(
          new RegExp(
            `^compaction:${ns}:inodes waits for a worker on task queue ${taskQueue} \\(a workflow task, for \\d+ s\\): no worker polls it: \\S+ stopped \\d+ s ago$`,
          ),
        );
        expect(run.stderr).toContain(identity);
        expect((sawLineAtMs ?? Infinity) - started).toBeLessThan(10_000);
      } finally {
        await client.workflow
          .getHandle(`compaction:${ns}:inodes`)
          .terminate('test over')
          .catch(() => undefined);
        await close();
      }
    },
  );
});
