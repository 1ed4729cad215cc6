/**
 * The scale benchmark's worker process: wired like src/worker/main.ts (configured by the environment
 * alone) but with the test compactor, so every job stays in the compacting phase and only its lease
 * keeper works. `SCALE_HOLD_MS` is how long a job's work lasts (default: until cancelled);
 * `SCALE_WORKER_OPTIONS` (JSON) overrides worker options, to measure alternatives to the defaults.
 */
import { NativeConnection, type WorkerOptions } from '@temporalio/worker';
import { waitingCompactor } from '../../src/compactor';
import { settingsFromEnv } from '../../src/config';
import { objectStoreFromEnv } from '../../src/store';
import { serveWorker } from '../../src/worker';
import { temporalTarget } from '../../src/worker/connect';
import { installRuntime } from '../../src/worker/runtime';
import { taskQueueFromEnv } from '../../src/worker/task-queue';

/** The line a parent waits for before it starts work. */
export const READY_LINE = 'scale worker ready';

async function main(): Promise<void> {
  installRuntime();
  const settings = settingsFromEnv();
  const store = objectStoreFromEnv(process.env, settings.timing.operationDeadlineMs);
  const target = temporalTarget();
  const connection = await NativeConnection.connect(target.connectionOptions);
  const holdMs = process.env.SCALE_HOLD_MS ? Number(process.env.SCALE_HOLD_MS) : Infinity;
  const workerOptions = JSON.parse(process.env.SCALE_WORKER_OPTIONS || '{}') as Partial<WorkerOptions>;
  await serveWorker({
    store,
    settings,
    connection,
    namespace: target.namespace,
    taskQueue: taskQueueFromEnv(),
    compactor: waitingCompactor({ holdMs, beatEveryMs: settings.heartbeatTimeoutMs / 3 }),
    workerOptions,
    serverLabel: target.address,
    log: (line) => console.log(`${READY_LINE}: ${line}`),
  });
  await connection.close();
  await store.close();
}

if (require.main === module) {
  main().catch((err: unknown) => {
    console.error(err instanceof Error ? `${err.name}: ${err.message}` : err);
    process.exit(1);
  });
}
