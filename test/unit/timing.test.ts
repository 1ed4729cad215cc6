import { once } from 'node:events';
import { describe, expect, it } from 'vitest';
import {
  heartbeatEveryMs,
  KEEPER_RETRY_DELAY_MS,
  minimumLeaseExpiryMs,
  resolveSettings,
  resolveTiming,
  SettingsError,
  settingsFromEnv,
  shrunkTiming,
  TimingConfigError,
  timingFromEnv,
} from '../../src/config';
import { spawnWorkerProcess } from '../support/worker-env';

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
      readerGraceMs: 2_730_000,
      writerBudgetMs: 900_000,
      lostWriteGraceMs: 86_400_000,
    });
  });

  it('rejects a lost-write grace shorter than writer budget + operation deadline + clock margin, naming the settings', () => {
    expect(() => resolveTiming({ lostWriteGraceMs: 1_229_999 })).toThrow(
      /COMPACTION_LOST_WRITE_GRACE_MS \(1229999\) must be at least COMPACTION_WRITER_BUDGET_MS \+ COMPACTION_OPERATION_DEADLINE_MS \+ COMPACTION_CLOCK_SAFETY_MARGIN_MS \(1230000\)/,
    );
    expect(resolveTiming({ lostWriteGraceMs: 1_230_000 }).lostWriteGraceMs).toBe(1_230_000);
    expect(() =>
      timingFromEnv({ COMPACTION_WRITER_BUDGET_MS: '86400000', COMPACTION_LOST_WRITE_GRACE_MS: '86400000' }),
    ).toThrow(/COMPACTION_LOST_WRITE_GRACE_MS/);
  });

  it('derives a lost-write grace that covers a writer budget set longer than the default allows', () => {
    const t = timingFromEnv({ COMPACTION_WRITER_BUDGET_MS: '86400000' });
    expect(t.lostWriteGraceMs).toBe(86_400_000 + 150_000 + 180_000);
  });

  it('shrunk timings keep the lost-write grace at writer budget + deadline + margin, so lost writes go within seconds', () => {
    const t = shrunkTiming(1000, 2000);
    expect(t.writerBudgetMs).toBe(1000);
    expect(t.lostWriteGraceMs).toBe(1000 + 500 + 1000);
  });

  it('rejects a reader grace shorter than T or than the lease expiry plus the clock margin, naming the settings', () => {
    expect(() => resolveTiming({ readerGraceMs: 1_000_000 })).toThrow(
      /COMPACTION_READER_GRACE_MS \(1000000\) must be at least COMPACTION_GC_MIN_GRACE_MS/,
    );
    expect(() => resolveTiming({ readerGraceMs: 1_600_000 })).toThrow(
      /COMPACTION_READER_GRACE_MS \(1600000\) must be at least COMPACTION_LEASE_EXPIRY_MS \+ COMPACTION_CLOCK_SAFETY_MARGIN_MS/,
    );
    expect(resolveTiming({ readerGraceMs: 1_680_000 }).readerGraceMs).toBe(1_680_000);
  });

  it('rejects an expiry shorter than the collector grace, naming both settings', () => {
    expect(() => resolveTiming({ leaseExpiryMs: 1_000_000 })).toThrow(TimingConfigError);
    expect(() => resolveTiming({ leaseExpiryMs: 1_000_000 })).toThrow(
      /COMPACTION_LEASE_EXPIRY_MS.*COMPACTION_GC_MIN_GRACE_MS/,
    );
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
    expect(() => timingFromEnv({ COMPACTION_LEASE_EXPIRY_MS: '25m' })).toThrow(
      'COMPACTION_LEASE_EXPIRY_MS must be a whole number of milliseconds, at least 1, not "25m"',
    );
  });

  it('reads settings from the environment and derives the rest', () => {
    const t = timingFromEnv({ COMPACTION_LEASE_REFRESH_INTERVAL_MS: '600000' });
    expect(t.leaseExpiryMs).toBe(3_000_000);
    expect(t.stagingGraceMs).toBe(3_000_000 + 1_230_000);
  });

  it('rejects an expiry shorter than one refresh interval plus one operation deadline, naming the settings', () => {
    const unsafe = { leaseRefreshIntervalMs: 2_000_000, leaseExpiryMs: 1_230_000 };
    expect(() => resolveTiming(unsafe)).toThrow(TimingConfigError);
    expect(() => resolveTiming(unsafe)).toThrow(
      /COMPACTION_LEASE_EXPIRY_MS \(1230000\) must be at least COMPACTION_LEASE_REFRESH_INTERVAL_MS \+ COMPACTION_OPERATION_DEADLINE_MS \(2150000\)/,
    );
    expect(() => resolveTiming({ ...unsafe, leaseExpiryMs: 2_149_999, stagingGraceMs: 5_000_000 })).toThrow(
      TimingConfigError,
    );
    expect(() => resolveTiming({ ...unsafe, leaseExpiryMs: 2_150_000 })).not.toThrow();
  });

  it('rejects an expiry that does not cover refresh interval + heartbeat timeout + keeper retry delay + operation deadline, naming the settings', () => {
    const timing = { leaseRefreshIntervalMs: 300_000, operationDeadlineMs: 150_000 };
    const least = minimumLeaseExpiryMs(timing, 1_000_000);
    expect(least).toBe(300_000 + 1_000_000 + 1_000 + 150_000);
    // The expiry alone is valid (≥ T, ≥ refresh + deadline); the heartbeat timeout makes it unsafe.
    const settings = (leaseExpiryMs: number) => ({
      timing: { ...timing, leaseExpiryMs },
      heartbeatTimeoutMs: 1_000_000,
    });
    expect(() => resolveSettings(settings(least - 1))).toThrow(SettingsError);
    expect(() => resolveSettings(settings(least - 1))).toThrow(
      /COMPACTION_LEASE_EXPIRY_MS \(1450999\) must be at least COMPACTION_LEASE_REFRESH_INTERVAL_MS \+ COMPACTION_HEARTBEAT_TIMEOUT_MS \+ 1000 ms keeper retry delay \+ COMPACTION_OPERATION_DEADLINE_MS \(1451000\)/,
    );
    expect(resolveSettings(settings(least)).timing.leaseExpiryMs).toBe(least);
  });

  it("the defaults keep the heartbeat rule, and a dead worker's retried keeper refreshes within half the lease expiry of the death", () => {
    const { timing, heartbeatTimeoutMs } = resolveSettings();
    expect(timing.leaseExpiryMs).toBeGreaterThanOrEqual(minimumLeaseExpiryMs(timing, heartbeatTimeoutMs));
    // Retried one heartbeat timeout + retry delay after its last beat (no later than the death), it refreshes once that
    // refresh is due (at once, if it already is), landing within one deadline (docs/protocol.md, Timings).
    const landsAfterDeathMs =
      Math.max(heartbeatTimeoutMs + KEEPER_RETRY_DELAY_MS, timing.leaseRefreshIntervalMs) + timing.operationDeadlineMs;
    expect(landsAfterDeathMs).toBeLessThanOrEqual(timing.leaseExpiryMs / 2);
  });

  it('the default heartbeat timeout is refresh interval + operation deadline, so a long activity beats once per refresh interval', () => {
    const settings = resolveSettings();
    expect(settings.heartbeatTimeoutMs).toBe(300_000 + 150_000);
    expect(heartbeatEveryMs(settings)).toBe(settings.timing.leaseRefreshIntervalMs);
    // Derived from the timings that are set, not from the spec's numbers.
    expect(
      resolveSettings({ timing: { leaseRefreshIntervalMs: 600_000, leaseExpiryMs: 3_000_000 } }).heartbeatTimeoutMs,
    ).toBe(750_000);
    // A set timeout that leaves less than a third of itself beyond the deadline: three beats per timeout.
    expect(
      heartbeatEveryMs(resolveSettings({ timing: shrunkTiming(3000, 2000), heartbeatTimeoutMs: 2000 })),
    ).toBeCloseTo(2000 / 3);
  });

  it('settings from the environment with unsafe timings are refused, naming the variables', () => {
    expect(() =>
      settingsFromEnv({ COMPACTION_LEASE_REFRESH_INTERVAL_MS: '2000000', COMPACTION_LEASE_EXPIRY_MS: '1230000' }),
    ).toThrow(/COMPACTION_LEASE_EXPIRY_MS.*COMPACTION_LEASE_REFRESH_INTERVAL_MS/);
    expect(() => settingsFromEnv({ COMPACTION_HEARTBEAT_TIMEOUT_MS: '1500000' })).toThrow(
      /COMPACTION_HEARTBEAT_TIMEOUT_MS/,
    );
  });

  /** Runs the worker process (src/worker/main.ts) with these variables; it must exit before connecting to anything. */
  async function startWorkerWith(variables: Record<string, string>): Promise<{ code: number | null; stderr: string }> {
    const worker = spawnWorkerProcess({ ...process.env, COMPACTION_EMBEDDED_STORE: ':memory:', ...variables }, [
      'ignore',
      'ignore',
      'pipe',
    ]);
    let stderr = '';
    worker.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const [code] = (await once(worker, 'exit')) as [number | null];
    return { code, stderr };
  }

  it('a worker started from the environment with an expiry shorter than refresh + deadline refuses to start, naming the variables', async () => {
    const { code, stderr } = await startWorkerWith({
      COMPACTION_LEASE_REFRESH_INTERVAL_MS: '2000000',
      COMPACTION_LEASE_EXPIRY_MS: '1230000',
    });
    expect(code).toBe(1);
    expect(stderr).toMatch(
      /TimingConfigError: unsafe timing: COMPACTION_LEASE_EXPIRY_MS \(1230000\) must be at least COMPACTION_LEASE_REFRESH_INTERVAL_MS/,
    );
  }, 60_000);

  it('a worker started from the environment with a heartbeat timeout the expiry does not cover refuses to start, naming the variables', async () => {
    const { code, stderr } = await startWorkerWith({ COMPACTION_HEARTBEAT_TIMEOUT_MS: '1500000' });
    expect(code).toBe(1);
    expect(stderr).toMatch(
      /SettingsError: unsafe timing: COMPACTION_LEASE_EXPIRY_MS \(1500000\) must be at least .*COMPACTION_HEARTBEAT_TIMEOUT_MS/,
    );
  }, 60_000);

  it('shrunk timings for tests keep every invariant, with the heartbeat timeout they are run with', () => {
    for (const unit of [200, 1000, 5000]) {
      for (const heartbeatTimeoutMs of [1000, 5000, 30_000]) {
        expect(() =>
          resolveSettings({ timing: shrunkTiming(unit, heartbeatTimeoutMs), heartbeatTimeoutMs }),
        ).not.toThrow();
      }
    }
  });
});
