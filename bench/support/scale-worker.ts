/**
 * The scale benchmark's worker process: src/worker/main.ts's worker (configured by the environment
 * alone) with the test compactor, so every job stays in the compacting phase and only its lease
 * keeper works. `SCALE_HOLD_MS` is how long a job's work lasts (default: until cancelled);
 * `SCALE_WORKER_OPTIONS` (JSON) overrides worker options, to measure alternatives to the defaults.
 */
import type { WorkerOptions } from '@temporalio/worker';
import { waitingCompactor } from '../../src/testing';
import { settingsFromEnv } from '../../src/config';
import { serveWorkerFromEnv } from '../../src/worker/main';

/** The line a parent waits for before it starts work. */
export const READY_LINE = 'scale worker ready';

if (require.main === module) {
  const holdMs = process.env.SCALE_HOLD_MS ? Number(process.env.SCALE_HOLD_MS) : Infinity;
  const workerOptions = JSON.parse(process.env.SCALE_WORKER_OPTIONS || '{}') as Partial<WorkerOptions>;
  const { heartbeatTimeoutMs } = settingsFromEnv();
  serveWorkerFromEnv({
    compactor: waitingCompactor({ holdMs, beatEveryMs: heartbeatTimeoutMs / 3 }),
    workerOptions,
    log: (line) => console.log(`${READY_LINE}: ${line}`),
  }).catch((err: unknown) => {
    console.error(err instanceof Error ? `${err.name}: ${err.message}` : err);
    process.exit(1);
  });
}
