import { describe, expect, it } from 'vitest';
import { resolveTiming } from '../../src/config';
import { ACTIVITY_BACKOFF, attemptsSpanning, backoffDelayMs } from '../../src/config/retry';

/** The waits before attempts 2…n of the backoff. */
const waitsOf = (attempts: number): number[] =>
  Array.from({ length: attempts - 1 }, (_, i) =>
    Math.min(
      ACTIVITY_BACKOFF.initialIntervalMs * ACTIVITY_BACKOFF.backoffCoefficient ** i,
      ACTIVITY_BACKOFF.maximumIntervalMs,
    ),
  );
const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);

describe('attempt limits of the short compaction activities', () => {
  it.each([1, 999, 1000, 1001, 5000, 63_000, 64_000, resolveTiming().leaseExpiryMs])(
    'the attempts for %i ms wait at least that long, and one attempt fewer would not',
    (span) => {
      const attempts = attemptsSpanning(span);
      expect(sum(waitsOf(attempts))).toBeGreaterThanOrEqual(span);
      expect(sum(waitsOf(attempts - 1))).toBeLessThan(span);
    },
  );

  it('at the default lease expiry (25 min) a short activity gets 31 attempts', () => {
    expect(attemptsSpanning(resolveTiming().leaseExpiryMs)).toBe(31);
  });

  it('a zero span is one attempt', () => {
    expect(attemptsSpanning(0)).toBe(1);
  });
});

describe("the lease keeper's retries of a failed refresh within its attempt", () => {
  it("wait as Temporal spaces the activities' attempts: 1 s doubling, at most 1 min", () => {
    expect(Array.from({ length: 8 }, (_, failures) => backoffDelayMs(ACTIVITY_BACKOFF, failures))).toEqual([
      1000, 2000, 4000, 8000, 16_000, 32_000, 60_000, 60_000,
    ]);
  });
});
