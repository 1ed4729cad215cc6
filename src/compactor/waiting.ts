/**
 * A test compactor: it reads and writes nothing, and returns the progress it was given once
 * `holdMs` has passed (Infinity: until cancelled). Benchmarks use it to keep thousands of jobs in
 * the compacting phase, where only the lease keeper works. Never the default of any entry point.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Compactor } from './plugin';

/** How long a {@link waitingCompactor} job lasts, and how often it heartbeats meanwhile. */
export interface WaitingCompactorOptions {
  /** How long a job's work lasts; Infinity waits until the activity is cancelled. */
  readonly holdMs: number;
  /** How often it calls `heartbeat`, which ends it on cancellation: below the heartbeat timeout. */
  readonly beatEveryMs: number;
}

/** A compactor whose every job waits `holdMs` (heartbeating), then returns the progress it was given and no outputs. */
export function waitingCompactor({ holdMs, beatEveryMs }: WaitingCompactorOptions): Compactor {
  return {
    async compact({ heartbeat }) {
      const until = performance.now() + holdMs;
      for (let left = holdMs; left > 0; left = until - performance.now()) {
        await sleep(Math.min(beatEveryMs, left));
        heartbeat();
      }
      return { outputs: [], recordsOut: 0, bytesOut: 0 };
    },
  };
}
