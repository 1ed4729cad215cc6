/** Lanes: a bounded number of holders, and a holder that steps out while it waits is readmitted before newcomers. */
import { setImmediate } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { Lanes } from '../../src/store/lanes';

/** A promise and the function that settles it. */
const gate = () => {
  let open = () => {};
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { opened, open };
};

describe('lanes', () => {
  it('admits at most its size at once, in arrival order', async () => {
    const lanes = new Lanes(2);
    const [running, entered] = [{ now: 0, most: 0 }, [] as number[]];
    const gates = Array.from({ length: 5 }, gate);
    const all = gates.map((g, i) =>
      lanes.hold(async () => {
        entered.push(i);
        running.most = Math.max(running.most, ++running.now);
        await g.opened;
        running.now--;
      }),
    );
    await setImmediate();
    expect(entered).toEqual([0, 1]);
    for (const g of gates) g.open();
    await Promise.all(all);
    expect(entered).toEqual([0, 1, 2, 3, 4]);
    expect(running.most).toBe(2);
  });

  it('a holder stepping out frees its lane for a newcomer, and is readmitted before the next newcomer', async () => {
    const lanes = new Lanes(1);
    const log: string[] = [];
    const part = gate();
    const stepping = lanes.hold(async () => {
      log.push('a in');
      await lanes.stepOut(part.opened);
      log.push('a back');
    });
    const b = gate();
    const others = ['b', 'c'].map((name) =>
      lanes.hold(async () => {
        log.push(`${name} in`);
        if (name === 'b') await b.opened;
      }),
    );
    await setImmediate();
    // a waits outside its lane, so b works; c waits for a lane.
    expect(log).toEqual(['a in', 'b in']);
    part.open();
    await setImmediate();
    expect(log).toEqual(['a in', 'b in']);
    b.open();
    await Promise.all([stepping, ...others]);
    expect(log).toEqual(['a in', 'b in', 'a back', 'c in']);
  });

  it('holders step out only within the budget of what they hold: past it one waits in its lane, unless no one is out', async () => {
    const lanes = new Lanes(2, 10);
    const part = gate();
    const began: number[] = [];
    const weights = [6, 4, 1, 1, 20];
    const all = weights.map((weight, i) =>
      lanes.hold(async () => {
        began.push(i);
        await lanes.stepOut(part.opened, weight);
      }),
    );
    await setImmediate();
    // 6 and 4 fill the budget and step out; 1 would pass it, so the next two wait in the lanes: four begun.
    expect(began).toEqual([0, 1, 2, 3]);
    part.open();
    await Promise.all(all);
    expect(began).toEqual([0, 1, 2, 3, 4]);
    // Alone, a holder heavier than the whole budget still steps out.
    const alone = gate();
    const heavy = lanes.hold(() => lanes.stepOut(alone.opened, 20));
    const next = lanes.hold(async () => 'in');
    const another = lanes.hold(async () => 'in too');
    expect(await Promise.all([next, another])).toEqual(['in', 'in too']);
    alone.open();
    await heavy;
  });

  it('a wait that fails is rethrown once its holder is back in a lane', async () => {
    const lanes = new Lanes(1);
    await expect(lanes.hold(() => lanes.stepOut(Promise.reject(new Error('part refused'))))).rejects.toThrow(
      /part refused/,
    );
    // Its lane was given back: a newcomer still gets in.
    expect(await lanes.hold(async () => 'in')).toBe('in');
  });

  it('refuses a size that is not a whole number of at least one', () => {
    for (const size of [0, -1, 1.5, NaN]) expect(() => new Lanes(size)).toThrow(/whole number ≥ 1/);
  });
});
