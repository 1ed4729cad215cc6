/** A scraped Prometheus text exposition: enough to sum counters by label and read a histogram's quantiles. */

export interface Sample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

const LINE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

export function parseExposition(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    const m = LINE.exec(line);
    if (!m || line.startsWith('#')) continue;
    const labels: Record<string, string> = {};
    for (const [, k, v] of (m[2] ?? '').matchAll(LABEL)) labels[k!] = v!;
    samples.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return samples;
}

export async function scrape(url: string, headers: Record<string, string> = {}): Promise<Sample[]> {
  const res = await fetch(url, { headers, signal: AbortSignal.timeout(30_000) });
  if (!res.ok) throw new Error(`${url}: HTTP ${res.status}`);
  return parseExposition(await res.text());
}

const matches = (s: Sample, name: string, labels: Record<string, string>) =>
  s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v);

/** Sum of every sample of `name` whose labels include `labels`. */
export const total = (samples: readonly Sample[], name: string, labels: Record<string, string> = {}): number =>
  samples.filter((s) => matches(s, name, labels)).reduce((a, s) => a + s.value, 0);

/**
 * Cumulative bucket counts by upper bound, summed over label sets; `before` is subtracted so a window's own
 * distribution is read.
 */
export function histogramBuckets(
  after: readonly Sample[],
  before: readonly Sample[],
  name: string,
): [number, number][] {
  const byBound = new Map<number, number>();
  for (const [samples, sign] of [
    [after, 1],
    [before, -1],
  ] as const) {
    for (const s of samples) {
      if (s.name !== `${name}_bucket`) continue;
      const le = s.labels.le === '+Inf' ? Infinity : Number(s.labels.le);
      byBound.set(le, (byBound.get(le) ?? 0) + sign * s.value);
    }
  }
  return [...byBound.entries()].sort((a, b) => a[0] - b[0]);
}

/**
 * The q-quantile of a cumulative histogram, interpolated linearly within its bucket (as PromQL's histogram_quantile).
 */
export function quantile(buckets: readonly [number, number][], q: number): number {
  const count = buckets.at(-1)?.[1] ?? 0;
  if (count === 0) return NaN;
  const rank = q * count;
  let lower = 0;
  let below = 0;
  for (const [bound, cumulative] of buckets) {
    if (cumulative >= rank) {
      if (bound === Infinity) return lower;
      return lower + ((bound - lower) * (rank - below)) / Math.max(cumulative - below, 1);
    }
    lower = bound;
    below = cumulative;
  }
  return lower;
}
