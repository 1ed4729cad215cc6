/**
 * A standalone worker process, configured only by the environment: the store (`COMPACTION_S3_*` and
 * the AWS SDK's chain, or the embedded store), Temporal (`TEMPORAL_*` / envconfig profile), timings
 * (`COMPACTION_*_MS`) and `COMPACTION_TASK_QUEUE`. Runs until SIGINT or SIGTERM.
 */
import { NativeConnection } from '@temporalio/worker';
import { settingsFromEnv } from '../config';
import { objectStoreFromEnv } from '../store';
import { temporalTarget } from './connect';
import { serveWorker, type CreateWorkerOptions } from './index';
import { installRuntime } from './runtime';
import { taskQueueFromEnv } from './task-queue';

/**
 * Serves a worker configured by the environment alone until SIGINT or SIGTERM. `extra` is for the
 * benchmark's worker process (a test compactor, other worker options); operators pass nothing.
 */
export async function serveWorkerFromEnv(extra: Pick<CreateWorkerOptions, 'compactor' | 'workerOptions'> & { log?: (line: string) => void } = {}): Promise<void> {
  installRuntime();
  const settings = settingsFromEnv();
  const store = objectStoreFromEnv(process.env, settings.timing.operationDeadlineMs);
  const target = temporalTarget();
  const connection = await NativeConnection.connect(target.connectionOptions);
  const serverLabel = `${target.address}/${target.namespace}`;
  const { log = console.log, ...options } = extra;
  await serveWorker({ store, settings, connection, namespace: target.namespace, taskQueue: taskQueueFromEnv(), serverLabel, log, ...options });
  await connection.close();
  await store.close();
}

if (require.main === module) {
  serveWorkerFromEnv().catch((err: unknown) => {
    console.error(err instanceof Error ? `${err.name}: ${err.message}` : err);
    process.exit(1);
  });
}
