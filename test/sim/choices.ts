/**
 * Every decision of a scenario comes from one list of choices: its configuration, each request's
 * fault and delay, each party's pauses. A seed expands into the list (drawn lazily and recorded);
 * a shrunk list replays as it is, every choice past its end being 0. Choice 0 is always the benign
 * option (no fault, the shortest delay, the smallest scenario), so shrinking a list towards shorter
 * and smaller values shrinks the scenario towards a quiet one.
 */

/** A source of choices: `next(n)` is an integer in [0, n). */
export interface Choices {
  next(n: number): number;
  /** Every raw value drawn so far, in order: the list that replays this scenario. */
  readonly drawn: readonly number[];
}

/** Largest raw choice + 1: fast-check's `nat()` shrinks within it. */
export const CHOICE_RANGE = 2 ** 31;

/** sfc32, seeded by splitmix32 of the seed: a fast PRNG whose stream depends on the seed alone. */
export function prng(seed: number): () => number {
  let s = seed >>> 0;
  const split = (): number => {
    s = (s + 0x9e3779b9) >>> 0;
    let z = s;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
    return (z ^ (z >>> 16)) >>> 0;
  };
  let [a, b, c, d] = [split(), split(), split(), split()];
  return () => {
    const t = (((a + b) >>> 0) + d) >>> 0;
    d = (d + 1) >>> 0;
    a = b ^ (b >>> 9);
    b = (c + (c << 3)) >>> 0;
    c = ((c << 21) | (c >>> 11)) >>> 0;
    c = (c + t) >>> 0;
    return t;
  };
}

/** Choices drawn from a seed, recorded as they are drawn. */
export function seededChoices(seed: number): Choices {
  const random = prng(seed);
  const drawn: number[] = [];
  return {
    drawn,
    next(n) {
      const value = random() % CHOICE_RANGE;
      drawn.push(value);
      return value % n;
    },
  };
}

/** Choices replayed from a list; past its end every choice is 0. */
export function listedChoices(list: readonly number[]): Choices {
  const drawn: number[] = [];
  return {
    drawn,
    next(n) {
      const value = list[drawn.length] ?? 0;
      drawn.push(value);
      return value % n;
    },
  };
}

/** One of `options` by weight; choice 0 is the first option with a weight. */
export function pick<T>(choices: Choices, options: readonly (readonly [number, T])[]): T {
  const live = options.filter(([weight]) => weight > 0);
  const total = live.reduce((sum, [weight]) => sum + weight, 0);
  let at = choices.next(total);
  for (const [weight, value] of live) {
    if (at < weight) return value;
    at -= weight;
  }
  throw new Error('pick: no option has a weight');
}

/** An integer in [min, max] (bounds rounded inwards); choice 0 is the lowest. */
export function between(choices: Choices, min: number, max: number): number {
  const low = Math.ceil(min);
  return low + choices.next(Math.max(1, Math.floor(max) - low + 1));
}

/** True `percent` times in a hundred; choice 0 is false. */
export const chance = (choices: Choices, percent: number): boolean =>
  percent > 0 &&
  pick(choices, [
    [100 - percent, false],
    [percent, true],
  ]);

/**
 * A list as a short text: runs of zeros collapsed (`0*12`), so a shrunk schedule prints on a line
 * or two; {@link parseChoiceList} reads it back.
 */
export function formatChoiceList(list: readonly number[]): string {
  let end = list.length;
  while (end > 0 && list[end - 1] === 0) end--;
  const parts: string[] = [];
  for (let i = 0; i < end;) {
    let run = i;
    while (run < end && list[run] === 0) run++;
    if (run - i > 2) {
      parts.push(`0*${run - i}`);
      i = run;
    } else parts.push(String(list[i++]));
  }
  return parts.join(',');
}

export function parseChoiceList(text: string): number[] {
  if (text.trim() === '') return [];
  return text.split(',').flatMap((part) => {
    const zeros = /^0\*(\d+)$/.exec(part.trim());
    if (zeros) return new Array<number>(Number(zeros[1])).fill(0);
    const value = Number(part);
    if (!Number.isSafeInteger(value) || value < 0) throw new Error(`not a choice: ${JSON.stringify(part)}`);
    return [value];
  });
}
