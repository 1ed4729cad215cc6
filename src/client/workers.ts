/**
 * Whether any worker serves a task queue: a workflow started on a queue no worker polls waits there
 * silently, forever. Two sources, each with its gap: the pollers `DescribeTaskQueue` lists (every
 * server; a stopped worker stays listed until its last poll ages out, unless the server cancels
 * polls on `ShutdownWorker`), and the worker heartbeats `ListWorkers` lists (Temporal Server 1.29+:
 * a worker that stops cleanly says `SHUTTING_DOWN` at once, a crashed one stops heartbeating).
 */
import type { Client } from '@temporalio/client';
import { WorkflowNotFoundError } from '@temporalio/common';
import { optionalTsToMs } from '@temporalio/common/lib/time';
import { temporal } from '@temporalio/proto';
import { CLIENT_SETTINGS } from '../config/declaration';
import { TypedError } from '../errors';
import { COLLECTOR_TASK_QUEUE_ENV, TASK_QUEUE_ENV } from '../worker/task-queue';

/** What the liveness checks need of a client: a `Client`, or a workflow handle's `client`. */
export type WorkflowServiceClient = Pick<Client, 'workflowService'> & {
  readonly options: { readonly namespace: string };
};

/**
 * What a queue must be polled for: `workflows` (where a workflow starts), or `collector` (the
 * activities of a pass sent to the collector's queue, which a `collector`-role worker polls).
 */
export type PolledFor = 'workflows' | 'collector';

const POLLED_FOR = {
  workflows: {
    taskQueueType: temporal.api.enums.v1.TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
    what: '',
    worker: 'compaction-lease worker',
    setting: TASK_QUEUE_ENV,
  },
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

/**
 * How long a start (and `waitForWorker`) looks for a live worker before it fails, unless told otherwise; why this long:
 * `CLIENT_SETTINGS`.
 */
export const DEFAULT_WORKER_TIMEOUT_MS = CLIENT_SETTINGS.workerTimeoutMs.default;

/** Clock difference allowed between a worker's heartbeat time (its host's clock) and the server's poll times. */
const HEARTBEAT_SKEW_MS = 2_000;
/** A running worker whose heartbeats stopped for this many of its intervals (plus the skew) has died. */
const MISSED_HEARTBEATS = 3;
/**
 * How long a worker that stopped is named beside a queue nothing polls: as long as the server lists a stopped worker's
 * pollers.
 */
const STOPPED_NAMED_FOR_MS = 5 * 60_000;

/**
 * A worker the server lists as polling within the window that has since stopped: its own last heartbeat said so, or its
 * heartbeats ceased.
 */
export interface StoppedWorker {
  /** The identity it polled under (Temporal's default: pid@host). */
  readonly identity: string;
  /**
   * `stopped`: it shut down (its heartbeat said `SHUTTING_DOWN`); `silent`: it still says running but missed its
   * heartbeats (a crash).
   */
  readonly how: 'stopped' | 'silent';
  /** Its last heartbeat, on its host's clock. */
  readonly atMs: number;
}

/** What the server says of a queue's workers, at one look. */
export interface TaskQueueWorkers {
  /** Identities of live workers polling it. */
  readonly live: readonly string[];
  /** Pollers within the window that are not live after all. */
  readonly stopped: readonly StoppedWorker[];
  /** The most recent poller the server lists (live or not, within its five minutes), if any. */
  readonly lastPoller?: { readonly identity: string; readonly seenAtMs: number };
  /**
   * Whether the server lists worker heartbeats (`ListWorkers`). Without them, a worker that stopped
   * less than {@link LIVE_POLLER_WINDOW_MS} ago counts as live unless the server cancelled its polls.
   */
  readonly heartbeats: boolean;
}

/** A poller as `DescribeTaskQueue` lists it. */
export interface PollerSeen {
  readonly identity: string;
  readonly lastAccessMs: number;
}

/** A worker's last heartbeat as `ListWorkers` lists it. */
export interface HeartbeatSeen {
  readonly identity: string;
  readonly running: boolean;
  readonly heartbeatMs: number;
  /** The time between its last two heartbeats, when it has sent two. */
  readonly intervalMs?: number;
}

/**
 * Which pollers are live at `nowMs`: seen within the window, and not outlived by their worker. A
 * poller whose identity's newest heartbeat says it stopped is not live, unless it polled after that
 * heartbeat (a new worker under the same identity); nor is one whose worker, still "running", missed
 * {@link MISSED_HEARTBEATS} heartbeats, unless it polled since. Workers whose heartbeat says they
 * stopped in the last five minutes are named among the stopped, listed as pollers or not.
 */
export function judgePollers(
  pollers: readonly PollerSeen[],
  heartbeats: readonly HeartbeatSeen[],
  nowMs: number,
): Pick<TaskQueueWorkers, 'live' | 'stopped'> {
  const newest = new Map<string, HeartbeatSeen>();
  for (const h of heartbeats)
    if ((newest.get(h.identity)?.heartbeatMs ?? -Infinity) < h.heartbeatMs) newest.set(h.identity, h);
  const live: string[] = [];
  const stopped: StoppedWorker[] = [];
  // A worker that stopped may already be gone from the pollers (a server that cancels polls on ShutdownWorker): its
  // heartbeat still tells.
  const polling = new Set(
    pollers.filter((p) => p.lastAccessMs >= nowMs - LIVE_POLLER_WINDOW_MS).map((p) => p.identity),
  );
  for (const beat of newest.values()) {
    if (!beat.running && !polling.has(beat.identity) && beat.heartbeatMs >= nowMs - STOPPED_NAMED_FOR_MS)
      stopped.push({ identity: beat.identity, how: 'stopped', atMs: beat.heartbeatMs });
  }
  for (const p of pollers) {
    if (p.lastAccessMs < nowMs - LIVE_POLLER_WINDOW_MS) continue;
    const beat = newest.get(p.identity);
    const silentAfterMs =
      beat?.intervalMs === undefined
        ? undefined
        : beat.heartbeatMs + MISSED_HEARTBEATS * beat.intervalMs + HEARTBEAT_SKEW_MS;
    if (beat && !beat.running && p.lastAccessMs <= beat.heartbeatMs + HEARTBEAT_SKEW_MS)
      stopped.push({ identity: p.identity, how: 'stopped', atMs: beat.heartbeatMs });
    else if (beat?.running && silentAfterMs !== undefined && nowMs > silentAfterMs && p.lastAccessMs <= silentAfterMs)
      stopped.push({ identity: p.identity, how: 'silent', atMs: beat.heartbeatMs });
    else live.push(p.identity);
  }
  return { live, stopped };
}

/** gRPC codes of a server that does not serve `ListWorkers` (older than 1.28, or switched off) or does not grant it. */
const NO_WORKER_LIST = new Set([7, 9, 12]);

/** The newest heartbeat of each worker on `taskQueue`, or undefined when the server lists none at all. */
async function heartbeatsOf(client: WorkflowServiceClient, taskQueue: string): Promise<HeartbeatSeen[] | undefined> {
  let response: temporal.api.workflowservice.v1.IListWorkersResponse;
  try {
    response = await client.workflowService.listWorkers({
      namespace: client.options.namespace,
      query: `TaskQueue = ${JSON.stringify(taskQueue)}`,
      pageSize: 100,
    });
  } catch (err) {
    if (NO_WORKER_LIST.has((err as { code?: number }).code ?? -1)) return undefined;
    throw err;
  }
  return (response.workersInfo ?? []).flatMap(({ workerHeartbeat: h }) => {
    const heartbeatMs = optionalTsToMs(h?.heartbeatTime);
    if (!h?.workerIdentity || heartbeatMs === undefined) return [];
    const intervalMs = optionalTsToMs(h.elapsedSinceLastHeartbeat);
    return [
      {
        identity: h.workerIdentity,
        running: h.status === temporal.api.enums.v1.WorkerStatus.WORKER_STATUS_RUNNING,
        heartbeatMs,
        ...(intervalMs ? { intervalMs } : {}),
      },
    ];
  });
}

/** What the server says of the workers polling `taskQueue` for `polledFor`, now. */
export async function taskQueueWorkers(
  client: WorkflowServiceClient,
  taskQueue: string,
  polledFor: PolledFor = 'workflows',
): Promise<TaskQueueWorkers> {
  const [{ pollers }, heartbeats] = await Promise.all([
    client.workflowService.describeTaskQueue({
      namespace: client.options.namespace,
      taskQueue: { name: taskQueue, kind: temporal.api.enums.v1.TaskQueueKind.TASK_QUEUE_KIND_NORMAL },
      taskQueueType: POLLED_FOR[polledFor].taskQueueType,
    }),
    heartbeatsOf(client, taskQueue),
  ]);
  const seen = (pollers ?? []).map((p) => ({
    identity: p.identity ?? 'unknown',
    lastAccessMs: optionalTsToMs(p.lastAccessTime) ?? 0,
  }));
  const last = seen.reduce<PollerSeen | undefined>(
    (a, p) => (a && a.lastAccessMs >= p.lastAccessMs ? a : p),
    undefined,
  );
  return {
    ...judgePollers(seen, heartbeats ?? [], Date.now()),
    ...(last && { lastPoller: { identity: last.identity, seenAtMs: last.lastAccessMs } }),
    heartbeats: heartbeats !== undefined,
  };
}

/** Identities of the live workers polling the queue for these tasks (see {@link taskQueueWorkers}). */
export async function taskQueuePollers(
  client: WorkflowServiceClient,
  taskQueue: string,
  polledFor: PolledFor = 'workflows',
): Promise<string[]> {
  return [...(await taskQueueWorkers(client, taskQueue, polledFor)).live];
}

const secondsAgo = (ms: number, nowMs = Date.now()): string => `${Math.max(0, Math.round((nowMs - ms) / 1000))} s ago`;

/** What a look at a queue found, for a person: who polls it, or who stopped, and what the server could not tell. */
export function describeWorkers(workers: TaskQueueWorkers, nowMs = Date.now()): string {
  if (workers.live.length) {
    const caveat = workers.heartbeats
      ? ''
      : ` (this server lists no worker heartbeats: a worker stopped less than ${LIVE_POLLER_WINDOW_MS / 1000} s ago still counts)`;
    return `polled by ${workers.live.join(', ')}${caveat}`;
  }
  const stopped = workers.stopped.map((s) =>
    s.how === 'stopped'
      ? `${s.identity} stopped ${secondsAgo(s.atMs, nowMs)}`
      : `${s.identity} sent its last heartbeat ${secondsAgo(s.atMs, nowMs)}`,
  );
  if (stopped.length) return `no worker polls it: ${stopped.join(', ')}`;
  if (workers.lastPoller)
    return `no worker polls it: the last one, ${workers.lastPoller.identity}, polled ${secondsAgo(workers.lastPoller.seenAtMs, nowMs)}`;
  return 'no worker polls it, nor did one in the last five minutes';
}

/**
 * No live worker polled the task queue within the wait; the message names the queue, what was seen and how to start
 * one.
 */
export class NoWorkerPollingError extends TypedError implements NoWorkerPolling {
  readonly failureType = 'NoWorkerPolling';
  readonly taskQueue: string;
  readonly namespace: string;
  readonly waitedMs: number;
  readonly polledFor: PolledFor;
  readonly waitingWorkflowId?: string;
  readonly stopped: readonly StoppedWorker[];
  constructor({
    taskQueue,
    namespace,
    waitedMs,
    polledFor = 'workflows',
    waitingWorkflowId,
    stopped = [],
  }: NoWorkerPolling) {
    const { what, worker, setting } = POLLED_FOR[polledFor];
    const seen = stopped.length
      ? ` (${describeWorkers({ live: [], stopped, heartbeats: true }).replace('no worker polls it: ', '')})`
      : '';
    super(
      `no worker polls task queue ${taskQueue}${what} in Temporal namespace ${namespace} (waited ${waitedMs / 1000}s)${seen}: ` +
        (waitingWorkflowId
          ? `${waitingWorkflowId} already runs there and waits for one; start a worker on it (\`${worker}\` with ${setting}=${taskQueue}), or terminate that run to start on another queue`
          : `start one on it (\`${worker}\` with ${setting}=${taskQueue}), or point ${setting} at the queue your workers poll`),
    );
    this.taskQueue = taskQueue;
    this.namespace = namespace;
    this.waitedMs = waitedMs;
    this.polledFor = polledFor;
    this.waitingWorkflowId = waitingWorkflowId;
    this.stopped = stopped;
  }
}

/** The task queue no live worker polled within the wait, and what the server showed of it. */
export interface NoWorkerPolling {
  /** The queue the run would have waited on. */
  readonly taskQueue: string;
  /** The Temporal namespace of the queue. */
  readonly namespace: string;
  /** How long the check looked for a live poller. */
  readonly waitedMs: number;
  /** @default 'workflows' */
  readonly polledFor?: PolledFor;
  /** The open workflow that already waits on this queue (a start would return it), if any. */
  readonly waitingWorkflowId?: string;
  /** Workers the server listed as polling that had stopped. */
  readonly stopped?: readonly StoppedWorker[];
}

export interface WaitForWorkerOptions {
  /** Default {@link DEFAULT_WORKER_TIMEOUT_MS}. */
  readonly timeoutMs?: number;
  /** How often the server is asked; default `CLIENT_SETTINGS.workerPollIntervalMs`. */
  readonly intervalMs?: number;
  /** @default 'workflows' */
  readonly polledFor?: PolledFor;
  /** Named in the error: the open workflow that waits on this queue. */
  readonly waitingWorkflowId?: string;
}

/**
 * Resolves once a live worker polls `taskQueue` for `polledFor`; throws {@link NoWorkerPollingError} after `timeoutMs`
 * without one.
 */
export async function waitForWorker(
  client: WorkflowServiceClient,
  taskQueue: string,
  options: WaitForWorkerOptions = {},
): Promise<void> {
  const {
    timeoutMs = DEFAULT_WORKER_TIMEOUT_MS,
    intervalMs = CLIENT_SETTINGS.workerPollIntervalMs.default,
    polledFor = 'workflows',
    waitingWorkflowId,
  } = options;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const workers = await taskQueueWorkers(client, taskQueue, polledFor);
    if (workers.live.length) return;
    if (Date.now() >= deadline)
      throw new NoWorkerPollingError({
        taskQueue,
        namespace: client.options.namespace,
        waitedMs: timeoutMs,
        polledFor,
        waitingWorkflowId,
        stopped: workers.stopped,
      });
    await new Promise((resolve) => setTimeout(resolve, Math.min(intervalMs, Math.max(0, deadline - Date.now()))));
  }
}

/** The worker check of a start (`startCompaction`, `startGcPass`). */
export interface WorkerCheckOptions {
  /**
   * How long the start looks for a live worker on its task queue before it fails with
   * {@link NoWorkerPollingError}, starting nothing; `false` starts without looking (for deployments
   * that start work before their workers). Default {@link DEFAULT_WORKER_TIMEOUT_MS}.
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
