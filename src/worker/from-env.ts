/**
 * The one place a worker is assembled. Every entry point reads a {@link WorkerSetup} the same way
 * ({@link workerSetupFromEnv}) and starts through {@link startWorker}: the library's
 * {@link startWorkerFromEnv}, the worker process (src/worker/main.ts), `compaction-lease worker` (its
 * flags override the role and the format module) and the demo (its shrunk timings override the
 * settings). Store: `COMPACTION_S3_*` and the AWS SDK's chain, else the embedded store; Temporal:
 * `TEMPORAL_*` / envconfig profile; `COMPACTION_WORKER_ROLE` and its queue (`COMPACTION_TASK_QUEUE`, or
 * `COMPACTION_COLLECTOR_TASK_QUEUE` for a collector); timings `COMPACTION_*_MS`; the Runtime:
 * `COMPACTION_LOG_LEVEL`, `COMPACTION_METRICS_PROMETHEUS`; a format's plug-ins: `COMPACTION_FORMAT_MODULE`.
 */
import { NativeConnection, type Worker } from '@temporalio/worker';
import type { CompactionSettings, WorkerRole } from '../config';
import { objectStoreFromEnv, type ObjectStore } from '../store';
import type { TemporalTarget } from './connect';
import { createWorker, type CreateWorkerOptions } from './index';
import { installRuntime } from './runtime';
import { workerSetupFromEnv, type WorkerSetup } from './setup';

/** `compactor` and `rootCodec` given here win over the exports of the format module. */
export interface StartWorkerOptions extends Pick<
  CreateWorkerOptions,
  'compactor' | 'rootCodec' | 'workerOptions' | 'log'
> {
  /**
   * Whether to install the Runtime from `COMPACTION_LOG_LEVEL` and `COMPACTION_METRICS_PROMETHEUS`. A
   * process that has a Runtime already keeps it either way (see {@link installRuntime}); false skips
   * those settings too.
   * @default true
   */
  readonly installRuntime?: boolean;
  /** Opens the worker's connection; the CLI's names the setting to change when the server is unreachable. */
  readonly connect?: (temporal: TemporalTarget) => Promise<NativeConnection>;
}

/** What a worker started from the environment may take from code instead. */
export interface StartWorkerFromEnvOptions extends StartWorkerOptions {
  /** Default: the process's environment. */
  readonly env?: NodeJS.ProcessEnv;
  /** Settings instead of the environment's `COMPACTION_*` ones (shrunk timings for a demo or a test). */
  readonly settings?: CompactionSettings;
}

/** A running worker started from the environment: its store (for the writer and the readers) and how to stop it. */
export interface WorkerFromEnv {
  /** The Temporal worker, running. */
  readonly worker: Worker;
  /** The store it works on, also the service's writer's and readers' store; closed by {@link WorkerFromEnv.stop}. */
  readonly store: ObjectStore;
  /** Its timings and bounds, as read from the environment. */
  readonly settings: CompactionSettings;
  /** The Temporal address and namespace it connected to. */
  readonly temporal: TemporalTarget;
  /** Which activities it registered. */
  readonly role: WorkerRole;
  /** The task queue it polls. */
  readonly taskQueue: string;
  /** Settles when the worker has stopped: after {@link stop}, or SIGINT / SIGTERM. */
  readonly running: Promise<void>;
  /** Stops polling, lets running activities finish within the grace time, then closes the connection and the store. */
  stop(): Promise<void>;
}

/**
 * Starts a worker of `setup` and runs it in the background until {@link WorkerFromEnv.stop}; it owns its connection and
 * store.
 */
export async function startWorker(setup: WorkerSetup, options: StartWorkerOptions = {}): Promise<WorkerFromEnv> {
  const { env, settings, temporal, role, taskQueue, format } = setup;
  if (options.installRuntime !== false) installRuntime(env);
  const { connect = (target: TemporalTarget) => NativeConnection.connect(target.connectionOptions) } = options;
  const connection = await connect(temporal);
  let store: ObjectStore | undefined;
  let worker: Worker;
  try {
    store = objectStoreFromEnv(env, settings.timing.operationDeadlineMs);
    worker = await createWorker({
      workerOptions: options.workerOptions,
      log: options.log,
      compactor: options.compactor ?? format?.compactor,
      rootCodec: options.rootCodec ?? format?.rootCodec,
      formatLabel: format?.label,
      store,
      settings,
      connection,
      namespace: temporal.namespace,
      role,
      taskQueue,
      serverLabel: `${temporal.address}/${temporal.namespace}`,
    });
  } catch (err) {
    await Promise.allSettled([connection.close(), store?.close()]);
    throw err;
  }
  const opened = store;
  const running = worker.run();
  return {
    worker,
    store: opened,
    settings,
    temporal,
    role,
    taskQueue,
    running,
    async stop() {
      if (worker.getState() === 'RUNNING') worker.shutdown();
      await running.finally(async () => {
        await connection.close();
        await opened.close();
      });
    },
  };
}

/** Starts a worker configured by the environment and runs it in the background until {@link WorkerFromEnv.stop}. */
export async function startWorkerFromEnv(options: StartWorkerFromEnvOptions = {}): Promise<WorkerFromEnv> {
  const setup = await workerSetupFromEnv(options.env, { settings: options.settings });
  return startWorker(setup, options);
}

/**
 * Waits until the worker has stopped (SIGINT, SIGTERM), then closes its connection and store; settles as its run did.
 */
export async function serveUntilStopped(started: WorkerFromEnv): Promise<void> {
  await started.running.catch(() => undefined);
  await started.stop();
}
