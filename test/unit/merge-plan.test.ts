import { describe, expect, it } from 'vitest';
import { FanInError, planMerge, type MergePlan, type MergeSource } from '../../src/compactor';
import { SettingsError, settingsFromEnv } from '../../src/config';

/** The inputs a source covers, in order, expanding runs through the plan. */
function covered(plan: MergePlan, source: MergeSource): number[] {
  return 'input' in source ? [source.input] : plan.runs[source.run]!.flatMap((s) => covered(plan, s));
}

describe('planMerge', () => {
  const cases = [0, 1, 2, 3, 15, 16, 17, 31, 100, 127, 128, 129, 255, 256, 1000, 4000, 20_000].flatMap((n) =>
    [2, 3, 16, 128].map((fanIn) => [n, fanIn] as const),
  );

  it.each(cases)(
    '%i inputs at fan-in %i: no merge reads more than the fan-in, and the final merge covers every input once, in order',
    (n, fanIn) => {
      const plan = planMerge(n, fanIn);
      for (const sources of [...plan.runs, plan.final]) expect(sources.length).toBeLessThanOrEqual(fanIn);
      expect(plan.final.flatMap((s) => covered(plan, s))).toEqual(Array.from({ length: n }, (_, i) => i));
    },
  );

  it.each(cases)('%i inputs at fan-in %i: every run is read exactly once, by a later merge', (n, fanIn) => {
    const plan = planMerge(n, fanIn);
    const readers = [...plan.runs, plan.final].flatMap((sources, reader) =>
      sources.flatMap((s) => ('run' in s ? [{ run: s.run, reader }] : [])),
    );
    expect(readers.map((r) => r.run).sort((a, b) => a - b)).toEqual(plan.runs.map((_, r) => r));
    for (const { run, reader } of readers) expect(reader).toBeGreaterThan(run);
  });

  it('a group no wider than the fan-in is one merge of its inputs', () => {
    expect(planMerge(128, 128)).toEqual({ runs: [], final: Array.from({ length: 128 }, (_, input) => ({ input })) });
  });

  it('a group just above the fan-in merges only as many inputs first as it must', () => {
    // 129 inputs at 128: two inputs become one run, the final merge reads it and the other 127.
    const plan = planMerge(129, 128);
    expect(plan.runs).toEqual([[{ input: 0 }, { input: 1 }]]);
    expect(plan.final).toHaveLength(128);
    // 1,000 inputs at 128: 7 runs of 125 or 126 inputs, then one merge of 128 sources; 879 of the 1,000 inputs are
    // rewritten once.
    const wide = planMerge(1000, 128);
    expect(wide.runs).toHaveLength(7);
    for (const run of wide.runs) expect([125, 126]).toContain(run.length);
    expect(wide.runs.flat()).toHaveLength(879);
    expect(wide.final).toHaveLength(128);
  });

  it('refuses a fan-in below two, which would never shrink the group', () => {
    expect(() => planMerge(10, 1)).toThrow(FanInError);
    expect(() => planMerge(10, 2.5)).toThrow(FanInError);
  });

  it('the worker reads the fan-in from COMPACTION_MAX_FAN_IN, 128 unless set, and refuses one below two', () => {
    expect(settingsFromEnv({}).maxFanIn).toBe(128);
    expect(settingsFromEnv({ COMPACTION_MAX_FAN_IN: '16' }).maxFanIn).toBe(16);
    expect(() => settingsFromEnv({ COMPACTION_MAX_FAN_IN: '1' })).toThrow(SettingsError);
    expect(() => settingsFromEnv({ COMPACTION_MAX_FAN_IN: '1' })).toThrow(
      'COMPACTION_MAX_FAN_IN must be a whole number, at least 2, not "1"',
    );
  });
});
