/**
 * The retry policy of the compaction's activities, and how many attempts a short activity gets.
 * Pure and import-free, so workflow code imports it directly and the timing rules read the same
 * first interval; the bound is tested apart from Temporal.
 */

export interface Backoff {
  readonly initialIntervalMs: number;
  readonly backoffCoefficient: number;
  readonly maximumIntervalMs: number;
}

/** 1 s, doubling, at most 1 min between attempts. */
export const ACTIVITY_BACKOFF: Backoff = { initialIntervalMs: 1000, backoffCoefficient: 2, maximumIntervalMs: 60_000 };

/** The wait before retry `failures` + 1 (0: the first retry), as Temporal's retry policy spaces attempts. */
export const backoffDelayMs = (backoff: Backoff, failures: number): number =>
  Math.min(backoff.initialIntervalMs * backoff.backoffCoefficient ** failures, backoff.maximumIntervalMs);

/**
 * The fewest attempts whose waits between them alone add up to `spanMs`: retries under this bound
 * last at least that long, however quickly each attempt fails.
 */
export function attemptsSpanning(spanMs: number, backoff: Backoff = ACTIVITY_BACKOFF): number {
  let attempts = 1;
  let waited = 0;
  for (
    let interval = backoff.initialIntervalMs;
    waited < spanMs;
    interval = Math.min(interval * backoff.backoffCoefficient, backoff.maximumIntervalMs)
  ) {
    waited += interval;
    attempts++;
  }
  return attempts;
}
