/**
 * The worker configured by the environment alone, the same reading everywhere: the library's
 * {@link startWorkerFromEnv}, the worker process (src/worker/main.ts), `compaction-lease worker` and
 * the demo. Store: `COMPACTION_S3_*` and the AWS SDK's chain, else the embedded store; Temporal:
 * `TEMPORAL_*` / envconfig profile; `COMPACTION_WORKER_ROLE` and its queue (`COMPACTION_TASK_QUEUE`, or
 * `COMPACTION_COLLECTOR_TASK_QUEUE` for a collector); timings `COMPACTION_*_MS`; the Runtime:
 * `COMPACTION_LOG_LEVEL`, `COMPACTION_METRICS_PROMETHEUS`; a format's plug-ins: `COMPACTION_FORMAT_MODULE`.
 */
import { NativeConnection, type Worker } from '@temporalio/worker';
import { settingsFromEnv, workerRoleFromEnv, type CompactionSettings, type WorkerRole } from '../config';
import { objectStoreFromEnv, type ObjectStore } from '../store';
import { temporalTarget, type TemporalTarget } from './connect';
import { configuredFormat } from './format-module';
import { createWorker, type CreateWorkerOptions } from './index';
import { installRuntime } from './runtime';
import { roleTaskQueueFromEnv } from './task-queue';

/** `compactor` and `rootCodec` given here win over the exports of the module `COMPACTION_FORMAT_MODULE` names. */
export interface StartWorkerFromEnvOptions extends Pick<CreateWorkerOptions, 'compactor' | 'rootCodec' | 'workerOptions' | 'log'> {
  readonly env?: NodeJS.ProcessEnv;
  /**
   * Whether to install the Runtime from `COMPACTION_LOG_LEVEL` and `COMPACTION_METRICS_PROMETHEUS`. A
   * process that has a Runtime already keeps it either way (see {@link installRuntime}); false skips
   * those settings too.
   * @default true
   */
  readonly installRuntime?: boolean;
  /** Settings instead of the environment's `COMPACTION_*` ones (the demo's shrunk timings). */
  readonly settings?: CompactionSettings;
}

export interface WorkerFromEnv {
  readonly worker: Worker;
  readonly store: ObjectStore;
  readonly settings: CompactionSettings;
  readonly temporal: TemporalTarget;
  readonly role: WorkerRole;
  readonly taskQueue: string;
  /** Settles when the worker has stopped: after {@link stop}, or SIGINT / SIGTERM. */
  readonly running: Promise<void>;
  /** Stops polling, lets running activities finish within the grace time, then closes the connection and the store. */
  stop(): Promise<void>;
}

/** Starts a worker configured by the environment and runs it in the background until {@link WorkerFromEnv.stop}. */
export async function startWorkerFromEnv(options: StartWorkerFromEnvOptions = {}): Promise<WorkerFromEnv> {
  const env = options.env ?? process.env;
  if (options.installRuntime !== false) installRuntime(env);
  const settings = options.settings ?? settingsFromEnv(env);
  const temporal = temporalTarget(env);
  const role = workerRoleFromEnv(env);
  const taskQueue = roleTaskQueueFromEnv(role, env);
  const format = await configuredFormat(env);
  const connection = await NativeConnection.connect(temporal.connectionOptions);
  const serverLabel = `${temporal.address}/${temporal.namespace}`;
  let store: ObjectStore | undefined;
  let worker: Worker;
  try {
    store = objectStoreFromEnv(env, settings.timing.operationDeadlineMs);
    worker = await createWorker({
      ...options,
      compactor: options.compactor ?? format?.compactor,
      rootCodec: options.rootCodec ?? format?.rootCodec,
      formatLabel: format?.label,
      store, settings, connection, namespace: temporal.namespace, role, taskQueue, serverLabel,
    });
  } catch (err) {
    await Promise.allSettled([connection.close(), store?.close()]);
    throw err;
  }
  const opened = store;
  const running = worker.run();
  return {
    worker, store: opened, settings, temporal, role, taskQueue, running,
    async stop() {
      if (worker.getState() === 'RUNNING') worker.shutdown();
      await running.finally(async () => {
        await connection.close();
        await opened.close();
      });
    },
  };
}
