/**
 * The scale benchmark's worker process: src/worker/main.ts's worker (configured by the environment
 * alone) with the test compactor, so every job stays in the compacting phase and only its lease
 * keeper works. `SCALE_HOLD_MS` is how long a job's work lasts (default: until cancelled);
 * `SCALE_PUBLISH` makes the job write one output when its work ends, so a group of several inputs
 * publishes; `SCALE_WORKER_OPTIONS` (JSON) overrides worker options, to measure alternatives to the defaults.
 */
import type { WorkerOptions } from '@temporalio/worker';
import { outputSegmentKey, type Compactor } from '../../src/compactor';
import { waitingCompactor } from '../../src/testing';
import { settingsFromEnv } from '../../src/config';
import { encodeSegment } from '../../src/segments';
import { serveWorkerFromEnv } from '../../src/worker/main';

/** `compactor`, then one output of one record: a job whose group has several inputs publishes it. */
function writingOneOutput(compactor: Compactor): Compactor {
  return {
    async compact(attempt) {
      await compactor.compact(attempt);
      const key = outputSegmentKey(attempt.job, 0);
      const bytes = encodeSegment([{ key: 'k', seq: 1, value: 'v' }]);
      await attempt.store.put(key, bytes);
      return { outputs: [key], recordsOut: 1, bytesOut: bytes.byteLength };
    },
  };
}

/** The line a parent waits for before it starts work. */
export const READY_LINE = 'scale worker ready';

if (require.main === module) {
  const holdMs = process.env.SCALE_HOLD_MS ? Number(process.env.SCALE_HOLD_MS) : Infinity;
  const workerOptions = JSON.parse(process.env.SCALE_WORKER_OPTIONS || '{}') as Partial<WorkerOptions>;
  const { heartbeatTimeoutMs } = settingsFromEnv();
  const waiting = waitingCompactor({ holdMs, beatEveryMs: heartbeatTimeoutMs / 3 });
  serveWorkerFromEnv({
    compactor: process.env.SCALE_PUBLISH ? writingOneOutput(waiting) : waiting,
    workerOptions,
    log: (line) => console.log(`${READY_LINE}: ${line}`),
  }).catch((err: unknown) => {
    console.error(err instanceof Error ? `${err.name}: ${err.message}` : err);
    process.exit(1);
  });
}
