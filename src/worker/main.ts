/**
 * A standalone worker process, configured only by the environment: the store (`COMPACTION_S3_*` and
 * the AWS SDK's chain, or the embedded store), Temporal (`TEMPORAL_*` / envconfig profile), timings
 * (`COMPACTION_*_MS`) and `COMPACTION_TASK_QUEUE`. Runs until SIGINT or SIGTERM.
 */
import { NativeConnection } from '@temporalio/worker';
import { settingsFromEnv } from '../config';
import { objectStoreFromEnv } from '../store';
import { temporalTarget } from './connect';
import { serveWorker } from './index';
import { installRuntime } from './runtime';
import { taskQueueFromEnv } from './task-queue';

async function main(): Promise<void> {
  installRuntime();
  const settings = settingsFromEnv();
  const store = objectStoreFromEnv(process.env, settings.timing.operationDeadlineMs);
  const target = temporalTarget();
  const connection = await NativeConnection.connect(target.connectionOptions);
  const serverLabel = `${target.address}/${target.namespace}`;
  await serveWorker({ store, settings, connection, namespace: target.namespace, taskQueue: taskQueueFromEnv(), serverLabel, log: console.log });
  await connection.close();
  await store.close();
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? `${err.name}: ${err.message}` : err);
  process.exit(1);
});
