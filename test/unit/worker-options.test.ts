import { describe, expect, it } from 'vitest';
import { SettingsError } from '../../src/config';
import { ACTIVITY_SLOTS_ENV, DEFAULT_ACTIVITY_SLOTS, workerOptionsFromEnv } from '../../src/worker';

describe('worker options from the environment', () => {
  it('leaves the defaults alone when nothing is set', () => {
    expect(workerOptionsFromEnv({})).toEqual({});
  });

  it('sets the activity slots', () => {
    expect(workerOptionsFromEnv({ [ACTIVITY_SLOTS_ENV]: '500' })).toEqual({ maxConcurrentActivityTaskExecutions: 500 });
  });

  it.each(['0', '-3', '2.5', 'many', '1e400'])('rejects %s with a typed error naming the variable', (raw) => {
    expect(() => workerOptionsFromEnv({ [ACTIVITY_SLOTS_ENV]: raw })).toThrow(SettingsError);
    expect(() => workerOptionsFromEnv({ [ACTIVITY_SLOTS_ENV]: raw })).toThrow(ACTIVITY_SLOTS_ENV);
  });

  it('gives 10,000 jobs their two slots each, with headroom for the collector', () => {
    expect(DEFAULT_ACTIVITY_SLOTS).toBeGreaterThan(2 * 10_000);
  });
});
