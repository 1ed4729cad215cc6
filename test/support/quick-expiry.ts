/**
 * The shrunk timings of the collector tests, in a module of their own (no vitest import) so that
 * `scripts/write-golden.ts` records the golden histories under the same ones.
 */
import { resolveSettings, type CompactionSettings } from '../../src/config';

/**
 * Expiry 6.6 s, T 1 s, staging grace 7.6 s: short enough for collector tests to wait out, every
 * invariant of spec section 4 kept. The expiry is the least that covers the 5 s heartbeat timeout
 * (refresh + heartbeat timeout + 1 s keeper retry delay + deadline); a shorter heartbeat timeout
 * times out the collector's activities on a loaded machine.
 */
export const quickExpirySettings: CompactionSettings = resolveSettings({
  // The lost-write grace at its least (writer budget + deadline + margin), so lost writes go within a second too.
  timing: {
    leaseRefreshIntervalMs: 400,
    operationDeadlineMs: 200,
    publicationBudgetMs: 400,
    clockSafetyMarginMs: 400,
    leaseExpiryMs: 6600,
    writerBudgetMs: 400,
    lostWriteGraceMs: 1000,
  },
  targetSegmentBytes: 4096,
  heartbeatTimeoutMs: 5000,
});
