import { describe, expect, it } from 'vitest';
import { resolveTiming, shrunkTiming, TimingConfigError, timingFromEnv } from '../../src/config';

describe('timing configuration', () => {
  it('has the defaults of spec section 4', () => {
    expect(resolveTiming()).toEqual({
      leaseRefreshIntervalMs: 300_000,
      leaseExpiryMs: 1_500_000,
      publicationBudgetMs: 900_000,
      operationDeadlineMs: 150_000,
      clockSafetyMarginMs: 180_000,
      gcMinGraceMs: 1_230_000,
      stagingGraceMs: 2_730_000,
    });
  });

  it('rejects an expiry shorter than the collector grace, naming both settings', () => {
    expect(() => resolveTiming({ leaseExpiryMs: 1_000_000 })).toThrow(TimingConfigError);
    expect(() => resolveTiming({ leaseExpiryMs: 1_000_000 })).toThrow(/COMPACTION_LEASE_EXPIRY_MS.*COMPACTION_GC_MIN_GRACE_MS/);
  });

  it('rejects a refresh interval no longer than one operation deadline', () => {
    expect(() => resolveTiming({ leaseRefreshIntervalMs: 100_000 })).toThrow(/COMPACTION_LEASE_REFRESH_INTERVAL_MS/);
  });

  it('rejects a staging grace shorter than expiry + T and a grace shorter than budget + deadline + margin', () => {
    expect(() => resolveTiming({ stagingGraceMs: 2_000_000 })).toThrow(/COMPACTION_STAGING_GRACE_MS/);
    expect(() => resolveTiming({ gcMinGraceMs: 1_000_000 })).toThrow(/COMPACTION_GC_MIN_GRACE_MS/);
  });

  it('rejects values that are not positive whole milliseconds', () => {
    expect(() => resolveTiming({ leaseRefreshIntervalMs: -1 })).toThrow(/leaseRefreshIntervalMs/);
    expect(() => timingFromEnv({ COMPACTION_LEASE_EXPIRY_MS: '25m' })).toThrow(/COMPACTION_LEASE_EXPIRY_MS="25m"/);
  });

  it('reads settings from the environment and derives the rest', () => {
    const t = timingFromEnv({ COMPACTION_LEASE_REFRESH_INTERVAL_MS: '600000' });
    expect(t.leaseExpiryMs).toBe(3_000_000);
    expect(t.stagingGraceMs).toBe(3_000_000 + 1_230_000);
  });

  it('shrunk timings for tests keep every invariant', () => {
    for (const unit of [200, 1000, 5000]) expect(() => shrunkTiming(unit)).not.toThrow();
  });
});
