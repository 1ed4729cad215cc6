/**
 * Every record comes out as it went in, model-based: random groups written with the package's writer
 * (v1, v2 and mixed inputs; unicode keys whose UTF-8 and UTF-16 orders differ, prefixes of each
 * other, long keys up to the key bound; equal seqs across segments, seq 0 and near 2^53; tombstones
 * before and after values; empty values and values at the record bound), compacted again and again
 * at fan-in 2–4 into tiny outputs (intermediate runs, many cuts), with attempts killed mid-compaction
 * and resumed from their progress, segments registered while a job runs and written between jobs.
 * The model: per key the record of the highest seq, on equal seqs the one registered later; a
 * winning tombstone deletes the key. After every step `readGroupRecords` and `lookupRecord` agree
 * with the model (and so with each other), and a publication leaves the view as it was. Records the
 * door must refuse (a lone surrogate, a record over the bound) are offered too, and must change nothing.
 *
 * Seeded: RECORDS_FUZZ_SEED replays a run (a failure prints its seed and path), RECORDS_FUZZ_RUNS
 * resizes it. About a minute on two busy cores at the default runs.
 */
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { checkProgress, type CompactionOutputs } from '../../src/compactor';
import { familyGroup, namespaceId, newJobId } from '../../src/keys';
import { readRoot } from '../../src/protocol/root-io';
import { lookupRecord, readGroupRecords, readGroupSnapshot, type LiveRecord } from '../../src/reader';
import { groupSegments, jsonRootCodec } from '../../src/root';
import {
  MAX_KEY_BYTES,
  MAX_SEGMENT_LINE_BYTES,
  type SegmentFormatVersion,
  type SegmentRecord,
} from '../../src/segments';
import { createEmbeddedObjectStore, type ObjectStore } from '../../src/store';
import { InvalidSegmentInputError, writeInputSegment } from '../../src/writer';
import { compactWithKills, publishJob } from '../support/compact';

const ns = namespaceId('model');
const group = familyGroup('inodes');

/**
 * Characters of keys and values: ASCII, JSON's escapes (a quote, a backslash, a control), Latin-1,
 * U+E000–U+FFFF and astral characters (surrogate pairs), whose UTF-16 order is not their UTF-8 order.
 */
const ALPHABET = [
  'a',
  'b',
  '/',
  '"',
  '\\',
  '\u0001',
  'é',
  '\uE000',
  '\uFFFD',
  '\uFFFF',
  '\u{10000}',
  '\u{1F600}',
  '\u{10FFFF}',
];
const shortKey = fc.array(fc.constantFrom(...ALPHABET), { minLength: 1, maxLength: 4 }).map((chars) => chars.join(''));
/** A long key sharing a long prefix with the others, up to the key bound (its JSON string at most MAX_KEY_BYTES). */
const longKey = fc
  .record({ length: fc.integer({ min: 100, max: MAX_KEY_BYTES - 2 }), tail: shortKey })
  .map(({ length, tail }) => {
    const room = MAX_KEY_BYTES - Buffer.byteLength(JSON.stringify(tail));
    return `${'L'.repeat(Math.min(length, room))}${tail}`;
  });
/** A case's keys, each with its prefix one character shorter, so prefixes of keys meet their keys. */
const keyPool = fc
  .uniqueArray(fc.oneof({ weight: 12, arbitrary: shortKey }, { weight: 1, arbitrary: longKey }), {
    minLength: 1,
    maxLength: 16,
  })
  .map((keys) =>
    [...new Set(keys.flatMap((key) => [key, Array.from(key).slice(0, -1).join('')]))].filter((key) => key !== ''),
  );

/**
 * Seqs that tie across segments (0 included), spread, and near 2^53 (only in a third of the cases: no later write goes
 * above those).
 */
const seq = fc.oneof(
  { weight: 18, arbitrary: fc.integer({ min: 0, max: 6 }) },
  { weight: 6, arbitrary: fc.integer({ min: 0, max: 10_000 }) },
  { weight: 1, arbitrary: fc.integer({ min: Number.MAX_SAFE_INTEGER - 4, max: Number.MAX_SAFE_INTEGER }) },
);

/**
 * A value: empty, short text, or filled with one character up to `slack` bytes below the record bound (its format-1
 * line).
 */
type ValueSpec = { readonly text: string } | { readonly fill: string; readonly slack: number };
const value: fc.Arbitrary<ValueSpec> = fc.oneof(
  { weight: 10, arbitrary: fc.constant({ text: '' }) },
  { weight: 40, arbitrary: fc.string({ unit: fc.constantFrom(...ALPHABET), maxLength: 24 }).map((text) => ({ text })) },
  {
    weight: 1,
    arbitrary: fc.record({ fill: fc.constantFrom('x', '\u0001', '\u{1F600}'), slack: fc.integer({ min: 0, max: 8 }) }),
  },
);

/** A third of the records are tombstones. */
const recordSpec = fc.record({
  key: fc.nat(),
  seq,
  tombstone: fc.integer({ min: 0, max: 2 }).map((n) => n === 0),
  value,
});
type RecordSpec = typeof recordSpec extends fc.Arbitrary<infer T> ? T : never;

/** What the door must refuse, offered in a segment beside good records: the writer refuses it and writes nothing. */
const poison = fc.constantFrom(
  'lone surrogate in a key',
  'lone surrogate in a value',
  'line over the bound',
  'key over the bound',
);

const segmentSpec = fc.record({
  records: fc.array(recordSpec, { minLength: 1, maxLength: 6 }),
  format: fc.constantFrom<SegmentFormatVersion>(1, 2),
  poison: fc.oneof({ weight: 11, arbitrary: fc.constant(null) }, { weight: 1, arbitrary: poison }),
});
type SegmentSpec = typeof segmentSpec extends fc.Arbitrary<infer T> ? T : never;

/** Mostly a few inputs; sometimes up to 300, many intermediate runs at fan-in 2–4. */
const segments = (min: number) =>
  fc.oneof(
    { weight: 20, arbitrary: fc.array(segmentSpec, { minLength: min, maxLength: 6 }) },
    { weight: 1, arbitrary: fc.array(segmentSpec, { minLength: 7, maxLength: 300, size: 'max' }) },
  );

const step = fc.record({
  maxFanIn: fc.integer({ min: 2, max: 4 }),
  /** Uncompressed bytes of an output or run part: tiny, so a group makes many of each. */
  targetSegmentBytes: fc.integer({ min: 16, max: 4096 }),
  segmentFormat: fc.constantFrom<SegmentFormatVersion>(1, 2),
  kills: fc.array(fc.record({ after: fc.integer({ min: 1, max: 6 }), lostBeat: fc.boolean() }), { maxLength: 3 }),
  /** Registered after the job fixed its inputs, before its publication: kept beside its outputs. */
  during: fc.array(segmentSpec, { maxLength: 2 }),
  /** Written once the job is published, before the next. */
  after: fc.array(segmentSpec, { maxLength: 3 }),
});

const scenario = fc.record({
  keys: keyPool,
  /** All inputs in one format, or each its own. */
  formats: fc.constantFrom('v1', 'v2', 'mixed'),
  /** Whether this case's seqs reach 2^53. */
  nearTop: fc.constantFrom(true, false, false),
  inputs: segments(1),
  steps: fc.array(step, { minLength: 1, maxLength: 3 }),
  /** Indices of the keys looked up after each step, beside a key no segment holds. */
  lookups: fc.array(fc.nat(), { minLength: 1, maxLength: 5 }),
});
type Scenario = typeof scenario extends fc.Arbitrary<infer T> ? T : never;

const lineOf = (record: SegmentRecord): number => Buffer.byteLength(JSON.stringify(record));

/** The record `spec` makes of the case's keys. */
function recordOf(spec: RecordSpec, keys: readonly string[]): SegmentRecord {
  const key = keys[spec.key % keys.length]!;
  if (spec.tombstone) return { key, seq: spec.seq, tombstone: true };
  if ('text' in spec.value) return { key, seq: spec.seq, value: spec.value.text };
  const { fill, slack } = spec.value;
  const empty = lineOf({ key, seq: spec.seq, value: '' });
  const unit = lineOf({ key, seq: spec.seq, value: fill }) - empty;
  return {
    key,
    seq: spec.seq,
    value: fill.repeat(Math.max(0, Math.floor((MAX_SEGMENT_LINE_BYTES - slack - empty) / unit))),
  };
}

/** `records` with the poison added (at the returned index): a record the writer must refuse. */
function poisoned(
  records: readonly SegmentRecord[],
  kind: string,
  keys: readonly string[],
): { records: SegmentRecord[]; index: number } {
  const unused = `poison${keys.length}`;
  const bad: SegmentRecord =
    kind === 'lone surrogate in a key'
      ? { key: `${unused}\uD83D`, seq: 1, value: 'v' }
      : kind === 'lone surrogate in a value'
        ? { key: unused, seq: 1, value: 'x\uDE00' }
        : kind === 'line over the bound'
          ? { key: unused, seq: 1, value: '\u0001'.repeat(MAX_SEGMENT_LINE_BYTES / 6) }
          : { key: 'K'.repeat(MAX_KEY_BYTES - 1), seq: 1, tombstone: true };
  const index = records.length >> 1;
  return { records: [...records.slice(0, index), bad, ...records.slice(index)], index };
}

/** The group as the model has it: per key the newest registered record. */
class Model {
  private readonly newest = new Map<string, SegmentRecord>();

  /** A segment registered after every one before it: its records win their key on a higher or equal seq. */
  register(records: readonly SegmentRecord[]): void {
    for (const r of records) if ((this.newest.get(r.key)?.seq ?? -1) <= r.seq) this.newest.set(r.key, r);
  }

  /** The highest seq the group holds. */
  highestSeq(): number {
    let highest = -1;
    for (const r of this.newest.values()) highest = Math.max(highest, r.seq);
    return highest;
  }

  /** What readers must see, in UTF-16 code unit order. */
  view(): LiveRecord[] {
    return [...this.newest.values()]
      .filter((r): r is LiveRecord => 'value' in r)
      .sort((a, b) => (a.key < b.key ? -1 : 1));
  }
}

/** Statistics of the whole run, printed at its end: what the cases reached. */
const reached = {
  cases: 0,
  inputs: 0,
  maxInputs: 0,
  runs: 0,
  kills: 0,
  refused: 0,
  atBound: 0,
  steps: 0,
  laterRecords: 0,
  belowRoom: 0,
};

async function runCase(s: Scenario): Promise<void> {
  const store: ObjectStore = createEmbeddedObjectStore({ path: ':memory:' });
  const model = new Model();
  const formatOf = (spec: SegmentSpec): SegmentFormatVersion =>
    s.formats === 'v1' ? 1 : s.formats === 'v2' ? 2 : spec.format;

  /**
   * The sequence floor (spec 6c.3): once a publication may have dropped a winning tombstone, a segment
   * registered later with a record at or below its seq could bring an older version back, so the
   * root writers refuse it. The writes of this test stay above every seq the group held at a
   * publication, so above any floor: a seq at or below that is moved just above it (small seqs still
   * tie), or the record is left out when that passes 2^53.
   */
  let floor = -1;
  const aboveFloor = (seq: number): number | undefined => {
    if (seq > floor) return seq;
    const above = floor + 1 + (seq % 8);
    return Number.isSafeInteger(above) ? above : undefined;
  };

  /**
   * Writes a segment of `spec` (after offering its poison, which must be refused with nothing written), and registers
   * it in the model.
   */
  const write = async (spec: SegmentSpec): Promise<void> => {
    const byKey = new Map<string, SegmentRecord>();
    for (const r of spec.records) {
      const seq = aboveFloor(s.nearTop || r.seq < 2 ** 52 ? r.seq : r.seq % 10_000);
      if (floor >= 0) reached.laterRecords++;
      if (seq === undefined) {
        reached.belowRoom++;
        continue;
      }
      const record = recordOf({ ...r, seq }, s.keys);
      byKey.set(record.key, record);
    }
    const records = [...byKey.values()];
    if (records.length === 0) return;
    const segmentFormat = formatOf(spec);
    if (spec.poison !== null) {
      const rootBefore = (await readRoot(store, ns, jsonRootCodec).catch(() => undefined))?.etag;
      const objectsBefore = (await store.list({ prefix: '' })).objects.length;
      const { records: offered, index } = poisoned(records, spec.poison, s.keys);
      const refused = await writeInputSegment(store, { namespaceId: ns, group }, offered, { segmentFormat }).then(
        () => undefined,
        (err: unknown) => err,
      );
      expect(refused, spec.poison).toBeInstanceOf(InvalidSegmentInputError);
      expect((refused as InvalidSegmentInputError).recordIndex).toBe(index);
      expect((await readRoot(store, ns, jsonRootCodec).catch(() => undefined))?.etag).toBe(rootBefore);
      expect((await store.list({ prefix: '' })).objects.length).toBe(objectsBefore);
      reached.refused++;
    }
    reached.atBound += records.filter((r) => lineOf(r) > MAX_SEGMENT_LINE_BYTES - 64).length;
    await writeInputSegment(store, { namespaceId: ns, group }, records, { segmentFormat });
    model.register(records);
  };

  const groupView = async (): Promise<LiveRecord[]> => {
    const out: LiveRecord[] = [];
    for await (const record of readGroupRecords(
      store,
      await readGroupSnapshot(store, { namespaceId: ns, group }, jsonRootCodec),
    ))
      out.push(record);
    return out;
  };

  /** The group agrees with the model, record for record, and every lookup with both. */
  const check = async (): Promise<LiveRecord[]> => {
    const expected = model.view();
    const view = await groupView();
    // Compared by key first: a difference in a 1 MiB value is then named by its key.
    expect(view.map((r) => [r.key, r.seq])).toEqual(expected.map((r) => [r.key, r.seq]));
    expect(view).toEqual(expected);
    const snapshot = await readGroupSnapshot(store, { namespaceId: ns, group }, jsonRootCodec);
    const byKey = new Map(view.map((r) => [r.key, r]));
    for (const key of [...s.lookups.map((i) => s.keys[i % s.keys.length]!), `${s.keys[0]}\u{1F600}absent`]) {
      expect(await lookupRecord(store, snapshot, key)).toEqual(byKey.get(key));
    }
    return view;
  };

  try {
    for (const spec of s.inputs) await write(spec);
    reached.inputs += s.inputs.length;
    reached.maxInputs = Math.max(reached.maxInputs, s.inputs.length);
    await check();
    for (const st of s.steps) {
      const inputs = groupSegments((await readRoot(store, ns, jsonRootCodec)).root, group);
      const job = { namespaceId: ns, jobId: newJobId(), group };
      for (const spec of st.during) await write(spec);
      let beats = 0;
      let runs = 0;
      const result: CompactionOutputs = await compactWithKills(store, job, inputs, st, st.kills, (progress) => {
        // As the worker checks it: progress naming a key of any accepted length fits in heartbeat details.
        checkProgress(job, progress);
        beats++;
        runs = progress.runs?.parts.length ?? 0;
      });
      reached.runs += runs;
      reached.kills += st.kills.filter((k) => k.after <= beats).length;
      const before = await check();
      floor = Math.max(floor, model.highestSeq());
      await expect(publishJob(store, job, inputs, result)).resolves.toMatchObject({ outcome: 'published' });
      // A publication by itself never changes what readers see.
      expect(await check()).toEqual(before);
      for (const spec of st.after) await write(spec);
      await check();
      reached.steps++;
    }
  } finally {
    await store.close();
  }
  reached.cases++;
}

describe('records, model-based', () => {
  const seed = Number(process.env.RECORDS_FUZZ_SEED ?? Date.now() % 2 ** 31);
  const numRuns = Number(process.env.RECORDS_FUZZ_RUNS ?? 300);
  afterAll(() =>
    console.log(
      `records model: seed ${seed}, ${JSON.stringify(reached)} (RECORDS_FUZZ_SEED and RECORDS_FUZZ_RUNS replay or resize)`,
    ),
  );

  it('readGroupRecords and lookupRecord agree with the model after every write, compaction and publication; a publication never changes the view', async () => {
    console.log(`records model: seed ${seed}, ${numRuns} cases`);
    await fc.assert(fc.asyncProperty(scenario, runCase), { seed, numRuns, endOnFailure: true });
    expect(reached.cases).toBe(numRuns);
    // The cases reached what they are for.
    expect(reached.runs).toBeGreaterThan(0);
    expect(reached.kills).toBeGreaterThan(0);
    expect(reached.refused).toBeGreaterThan(0);
    expect(reached.atBound).toBeGreaterThan(0);
    expect(reached.maxInputs).toBeGreaterThan(50);
  }, 900_000);
});
