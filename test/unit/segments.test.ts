import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { createGzip, gunzipSync, gzipSync } from 'node:zlib';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { GOLDEN_RECORDS } from '../support/golden-segment';
import {
  encodeSegment,
  MAX_SEGMENT_LINE_BYTES,
  mergeSegments,
  readSegment,
  SegmentBuilder,
  SegmentCorruptError,
  type SegmentRecord,
} from '../../src/segments';

const records: SegmentRecord[] = [
  { key: 'a', seq: 1, value: 'one' },
  { key: 'b', seq: 2, tombstone: true },
  { key: 'c', seq: 3, value: '' },
];
async function readAll(bytes: Uint8Array): Promise<SegmentRecord[]> {
  const out: SegmentRecord[] = [];
  for await (const r of readSegment('seg-key', Readable.from([bytes]))) out.push(r);
  return out;
}
const rewrite = (bytes: Uint8Array, change: (text: string) => string) =>
  gzipSync(change(gunzipSync(bytes).toString('utf8')));

describe('segment format', () => {
  it('round-trips records, values and tombstones', async () => {
    expect(await readAll(encodeSegment(records, 1))).toEqual(records);
    expect(await readAll(encodeSegment([], 1))).toEqual([]);
  });

  it.each([
    ['not gzip', () => new TextEncoder().encode('plain text'), /not gzip/],
    [
      'truncated: no footer',
      (b: Uint8Array) => rewrite(b, (t) => t.split('\n').slice(0, -2).join('\n') + '\n'),
      /no footer/,
    ],
    ['a changed value', (b: Uint8Array) => rewrite(b, (t) => t.replace('"one"', '"uno"')), /checksum/],
    ['keys out of order', (b: Uint8Array) => rewrite(b, (t) => t.replace('"key":"c"', '"key":"a"')), /out of order/],
    ['an unknown header', (b: Uint8Array) => rewrite(b, (t) => t.replace('metadata_segment', 'other')), /header/],
    [
      'a record with both a value and a tombstone',
      (b: Uint8Array) => rewrite(b, (t) => t.replace('"value":"one"', '"value":"one","tombstone":true')),
      /malformed/,
    ],
    [
      'data after the footer',
      (b: Uint8Array) => rewrite(b, (t) => `${t}{"key":"z","seq":9,"value":"v"}\n`),
      /after the footer/,
    ],
  ])('rejects %s as corrupt, naming the key', async (_, corrupt, reason) => {
    const read = readAll(corrupt(encodeSegment(records, 1)));
    await expect(read).rejects.toBeInstanceOf(SegmentCorruptError);
    await expect(readAll(corrupt(encodeSegment(records, 1)))).rejects.toThrow(/segment seg-key is corrupt/);
    await expect(readAll(corrupt(encodeSegment(records, 1)))).rejects.toThrow(reason);
  });
});

describe('segment reader', () => {
  const golden = readFileSync(join(__dirname, '..', 'golden', 'segment-v1.mseg'));
  const goldenRecords = [...GOLDEN_RECORDS];

  it('reads a segment written by the encoder before issue 14 (gzip level 6, commit f4bc94b), and writes the same lines today', async () => {
    expect(await readAll(golden)).toEqual(goldenRecords);
    expect(gunzipSync(encodeSegment(goldenRecords, 1)).toString('utf8')).toBe(gunzipSync(golden).toString('utf8'));
  });

  it('reads records whatever the chunking of the bytes, lines split anywhere', async () => {
    const record = fc.record({
      key: fc.string({ unit: 'grapheme', minLength: 1, maxLength: 8 }),
      value: fc.option(fc.string({ unit: 'binary', maxLength: 200 }), { nil: undefined }),
    });
    await fc.assert(
      fc.asyncProperty(
        fc.uniqueArray(record, { selector: (r) => r.key, maxLength: 200 }),
        fc.array(fc.integer({ min: 1, max: 64 }), { minLength: 1 }),
        async (raw, cuts) => {
          const sorted = raw
            .map((r, i): SegmentRecord =>
              r.value === undefined ? { key: r.key, seq: i, tombstone: true } : { key: r.key, seq: i, value: r.value },
            )
            .sort((x, y) => (x.key < y.key ? -1 : 1));
          // Stored with no compression, so small input chunks become small decompressed chunks that cut lines (and
          // characters) apart.
          const bytes = gzipSync(gunzipSync(encodeSegment(sorted, 1)), { level: 0 });
          const chunks: Uint8Array[] = [];
          for (let at = 0, i = 0; at < bytes.length; at += cuts[i++ % cuts.length]!)
            chunks.push(bytes.subarray(at, at + cuts[i % cuts.length]!));
          const out: SegmentRecord[] = [];
          for await (const r of readSegment('seg-key', Readable.from(chunks))) out.push(r);
          expect(out).toEqual(sorted);
        },
      ),
      { numRuns: 100 },
    );
  });

  it.each([
    ['an extra field', '{"key":"a","seq":1,"value":"one","extra":1}'],
    ['neither a value nor a tombstone', '{"key":"a","seq":1}'],
    ['a tombstone that is not true', '{"key":"a","seq":1,"tombstone":false}'],
    ['a value that is not a string', '{"key":"a","seq":1,"value":1}'],
    ['an empty key', '{"key":"","seq":1,"value":"one"}'],
    ['a negative seq', '{"key":"a","seq":-1,"value":"one"}'],
    ['a fractional seq', '{"key":"a","seq":1.5,"value":"one"}'],
    ['a seq beyond the safe integers', '{"key":"a","seq":9007199254740993,"value":"one"}'],
    ['an array', '["a",1,"one"]'],
  ])('rejects a record line with %s as malformed', async (_, line) => {
    const bytes = rewrite(encodeSegment(records, 1), (t) => t.replace('{"key":"a","seq":1,"value":"one"}', line));
    await expect(readAll(bytes)).rejects.toThrow(/segment seg-key is corrupt: record 1 is malformed/);
  });

  it(`rejects a line longer than ${MAX_SEGMENT_LINE_BYTES} bytes as corrupt, without reading the rest`, async () => {
    const long = rewrite(encodeSegment(records, 1), (t) =>
      t.replace('"one"', JSON.stringify('x'.repeat(MAX_SEGMENT_LINE_BYTES))),
    );
    await expect(readAll(long)).rejects.toThrow(/segment seg-key is corrupt: a line is longer than/);
    // A line that never ends: the reader must give up near the bound (plus what the pipes buffer), or this test never
    // finishes.
    let produced = 0;
    async function* endless(): AsyncGenerator<Buffer> {
      yield Buffer.from('{"format":"metadata_segment","version":1}\n{"key":"a","seq":1,"value":"');
      for (;;) {
        produced += 1 << 16;
        yield Buffer.alloc(1 << 16, 'x');
      }
    }
    const read = readSegment('seg-key', Readable.from(endless()).pipe(createGzip()));
    await expect(read.next()).rejects.toBeInstanceOf(SegmentCorruptError);
    expect(produced).toBeLessThan(16 * MAX_SEGMENT_LINE_BYTES);
  });

  it('refuses to write a record or a footer whose line would be longer than a reader accepts', () => {
    expect(() => new SegmentBuilder().add({ key: 'big', seq: 1, value: 'x'.repeat(MAX_SEGMENT_LINE_BYTES) })).toThrow(
      /record "big" is \d+ bytes as a line/,
    );
    const longKeys = () =>
      encodeSegment(
        ['a', 'b'].map((c, seq): SegmentRecord => ({
          key: c.repeat(MAX_SEGMENT_LINE_BYTES / 2),
          seq,
          tombstone: true,
        })),
        1,
      );
    expect(longKeys).toThrow(/the footer of a segment from "a+" is \d+ bytes/);
  });
});

/** `rs` as a source of batches of 0 to 3 records, cut differently per source, so runs and ties cross batch ends. */
async function* each(rs: SegmentRecord[], source: number): AsyncGenerator<SegmentRecord[]> {
  for (let at = 0, i = source; at < rs.length; i++) {
    const size = i % 4;
    yield rs.slice(at, at + size);
    at += size;
  }
}

describe('k-way merge', () => {
  it('keeps the highest seq of every key, drops tombstones only when asked, and resumes after a key', async () => {
    const record = fc.record({ key: fc.constantFrom('a', 'b', 'c', 'd', 'e', 'f'), tombstone: fc.boolean() });
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.uniqueArray(record, { selector: (r) => r.key, maxLength: 6 }), { maxLength: 5 }),
        async (raw) => {
          let seq = 0;
          const sources = raw.map((rs) =>
            rs
              .map((r): SegmentRecord =>
                r.tombstone
                  ? { key: r.key, seq: ++seq, tombstone: true }
                  : { key: r.key, seq: ++seq, value: `v${seq}` },
              )
              .sort((x, y) => (x.key < y.key ? -1 : 1)),
          );
          const newest = new Map<string, SegmentRecord>();
          for (const r of sources.flat()) if ((newest.get(r.key)?.seq ?? -1) < r.seq) newest.set(r.key, r);
          const expected = [...newest.values()].sort((x, y) => (x.key < y.key ? -1 : 1));
          const merged: SegmentRecord[] = [];
          for await (const batch of mergeSegments(sources.map(each), { dropTombstones: false })) merged.push(...batch);
          expect(merged).toEqual(expected);
          const live: SegmentRecord[] = [];
          for await (const batch of mergeSegments(sources.map(each), { dropTombstones: true, after: 'b' }))
            live.push(...batch);
          expect(live).toEqual(expected.filter((r) => !('tombstone' in r) && r.key > 'b'));
        },
      ),
    );
  });
});

describe('k-way merge against a sort-based reference', () => {
  /**
   * Per key the record with the highest seq, a tie going to the later source: the last of each key after a stable sort
   * by (key, seq).
   */
  function sortMerge(
    sources: SegmentRecord[][],
    options: { dropTombstones: boolean; after?: string },
  ): SegmentRecord[] {
    const all = sources.flat().sort((x, y) => (x.key < y.key ? -1 : x.key > y.key ? 1 : x.seq - y.seq));
    const out: SegmentRecord[] = [];
    all.forEach((r, i) => {
      if (all[i + 1]?.key === r.key) return;
      if (options.after !== undefined && r.key <= options.after) return;
      if (options.dropTombstones && 'tombstone' in r) return;
      out.push(r);
    });
    return out;
  }

  it('equals it for many sources with shared keys, tied seqs, tombstones and a resume key', async () => {
    const key = fc.stringMatching(/^[a-e]{1,3}$/);
    const entry = fc.record({ key, seq: fc.nat(4), tombstone: fc.boolean() });
    const source = fc.uniqueArray(entry, { selector: (r) => r.key, maxLength: 30 });
    await fc.assert(
      fc.asyncProperty(
        fc.array(source, { maxLength: 60 }),
        fc.boolean(),
        fc.option(key, { nil: undefined }),
        async (raw, dropTombstones, after) => {
          // The value names the source, so which of two tied records won is visible.
          const sources = raw.map((rs, s) =>
            rs
              .map((r): SegmentRecord =>
                r.tombstone
                  ? { key: r.key, seq: r.seq, tombstone: true }
                  : { key: r.key, seq: r.seq, value: `from ${s}` },
              )
              .sort((x, y) => (x.key < y.key ? -1 : 1)),
          );
          const merged: SegmentRecord[] = [];
          for await (const batch of mergeSegments(sources.map(each), { dropTombstones, after })) merged.push(...batch);
          expect(merged).toEqual(sortMerge(sources, { dropTombstones, after }));
        },
      ),
      { numRuns: 300 },
    );
  });
});
