/** A worker that runs every workflow and activity of the package on one task queue. */
import { join } from 'node:path';
import { NativeConnection, Worker, type WorkerOptions } from '@temporalio/worker';
import { createActivities } from '../activities';
import type { Compactor } from '../compactor';
import { SettingsError, type CompactionSettings } from '../config';
import type { ObjectStore } from '../store';
import { DEFAULT_TASK_QUEUE } from './task-queue';

export { DEFAULT_TASK_QUEUE };


export interface CreateWorkerOptions {
  readonly store: ObjectStore;
  readonly settings: CompactionSettings;
  readonly connection: NativeConnection;
  readonly namespace?: string;
  readonly taskQueue?: string;
  /** Test-only: what the compaction activity runs instead of the reference compactor (e.g. `waitingCompactor` in bench/scale.ts). */
  readonly compactor?: Compactor;
  /** Passed through to `Worker.create` (slots, identity, bundle, …). */
  readonly workerOptions?: Partial<WorkerOptions>;
}

/**
 * A running job holds two activity slots for its whole life (its lease keeper and its work), so the
 * SDK's default of 100 would cap a worker at 50 jobs, and keepers filling every slot would starve the
 * collector's activities. 10,000 jobs (the scale target, docs/performance.md) take 20,000; the rest is
 * headroom for collector passes. A waiting keeper costs a timer, not a thread.
 */
export const DEFAULT_ACTIVITY_SLOTS = 21_000;

/** The workflows' folder, for `bundleWorkflowCode` and replay. */
export const WORKFLOWS_PATH = join(__dirname, '..', 'workflows');

export async function createWorker(options: CreateWorkerOptions): Promise<Worker> {
  await options.store.verifyAccess();
  return Worker.create({
    connection: options.connection,
    namespace: options.namespace ?? 'default',
    taskQueue: options.taskQueue ?? DEFAULT_TASK_QUEUE,
    // A folder, so the bundler finds index.ts in the sources and index.js in the build.
    ...(options.workerOptions?.workflowBundle ? {} : { workflowsPath: WORKFLOWS_PATH }),
    activities: createActivities({ store: options.store, settings: options.settings, compactor: options.compactor }),
    // Cancellation reaches an activity only with a heartbeat that is actually sent: without this cap a
    // lease keeper on another worker than its work would stop up to 0.8 × heartbeat timeout after the
    // workflow asked it to (one on the same worker is stopped by the work itself).
    maxHeartbeatThrottleInterval: '5 seconds',
    maxConcurrentActivityTaskExecutions: DEFAULT_ACTIVITY_SLOTS,
    ...options.workerOptions,
  });
}

export const ACTIVITY_SLOTS_ENV = 'COMPACTION_WORKER_ACTIVITY_SLOTS';

/** The worker options an operator sets in the environment; a value that is not a positive integer is a {@link SettingsError}. */
export function workerOptionsFromEnv(env: NodeJS.ProcessEnv = process.env): Partial<WorkerOptions> {
  const raw = env[ACTIVITY_SLOTS_ENV];
  if (!raw) return {};
  const slots = Number(raw);
  if (!Number.isSafeInteger(slots) || slots < 1) throw new SettingsError(`${ACTIVITY_SLOTS_ENV} must be a positive integer, not ${JSON.stringify(raw)}`);
  return { maxConcurrentActivityTaskExecutions: slots };
}

/** Creates a worker and runs it until the Runtime's shutdown signals (SIGINT, SIGTERM): the entry points of worker processes share this. */
export async function serveWorker(options: CreateWorkerOptions & { serverLabel: string; log: (line: string) => void }): Promise<void> {
  const taskQueue = options.taskQueue ?? DEFAULT_TASK_QUEUE;
  const workerOptions = { ...workerOptionsFromEnv(), ...options.workerOptions };
  const worker = await createWorker({ ...options, taskQueue, workerOptions });
  options.log(`worker ${options.settings.ownerId} on ${options.serverLabel}, task queue ${taskQueue}, store ${options.store.description}`);
  await worker.run();
}
