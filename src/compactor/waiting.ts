/**
 * A test compactor: it reads and writes nothing, and returns the progress it was given once
 * `holdMs` has passed (Infinity: until cancelled). Benchmarks use it to keep thousands of jobs in
 * the compacting phase, where only the lease keeper works. Never the default of any entry point.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Compactor } from './index';

export interface WaitingCompactorOptions {
  /** How long a job's work lasts; Infinity waits until the activity is cancelled. */
  readonly holdMs: number;
  /** How often it calls `onRecords`, which heartbeats and ends it on cancellation: below the heartbeat timeout. */
  readonly beatEveryMs: number;
}

export function waitingCompactor({ holdMs, beatEveryMs }: WaitingCompactorOptions): Compactor {
  return async (_store, _job, _inputs, _limits, resume, hooks) => {
    const until = performance.now() + holdMs;
    for (let left = holdMs; left > 0; left = until - performance.now()) {
      await sleep(Math.min(beatEveryMs, left));
      hooks.onRecords(0);
    }
    return resume;
  };
}
