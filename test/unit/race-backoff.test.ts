/** The waits between lost root races: full jitter under a doubling ceiling, and the settings that bound them. */
import { describe, expect, it } from 'vitest';
import { resolveSettings, SettingsError } from '../../src/config';
import { raceDelayMs } from '../../src/protocol';
import { quickExpirySettings } from '../support/quick-expiry';

const backoff = { firstMs: 100, maxMs: 10_000 };
const justBelowOne = 1 - 2 ** -40;

describe('the wait between root races', () => {
  it('is uniform from 0 up to first × 2^(lost − 1), never above the cap', () => {
    const ceilings = Array.from({ length: 12 }, (_, i) => raceDelayMs(backoff, i + 1, () => justBelowOne) + 1);
    expect(ceilings).toEqual([100, 200, 400, 800, 1600, 3200, 6400, 10_000, 10_000, 10_000, 10_000, 10_000]);
    expect(raceDelayMs(backoff, 3, () => 0)).toBe(0);
    expect(raceDelayMs(backoff, 3, () => 0.5)).toBe(200);
    expect(raceDelayMs(backoff, 1_100, () => justBelowOne)).toBe(9_999);
  });

  it("at the defaults a publication's waits together fit in one operation deadline, and a shrunk deadline shrinks the cap", () => {
    const defaults = resolveSettings();
    expect(defaults.maxRootRaces * defaults.rootRaceBackoffMaxMs).toBeLessThanOrEqual(
      defaults.timing.operationDeadlineMs,
    );
    const shrunk = quickExpirySettings;
    expect(shrunk.rootRaceBackoffMaxMs).toBe(Math.floor(200 / shrunk.maxRootRaces));
  });

  it('a cap whose races pass one operation deadline is refused, naming both settings', () => {
    expect(() => resolveSettings({ maxRootRaces: 20, rootRaceBackoffMaxMs: 10_000 })).toThrow(SettingsError);
    expect(() => resolveSettings({ maxRootRaces: 20, rootRaceBackoffMaxMs: 10_000 })).toThrow(
      /COMPACTION_MAX_ROOT_RACES \(20\) × COMPACTION_ROOT_RACE_BACKOFF_MAX_MS \(10000\) must be at most COMPACTION_OPERATION_DEADLINE_MS \(150000\)/,
    );
  });
});
