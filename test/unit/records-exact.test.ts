/**
 * Every record comes out as it went in, or is refused at the door: only well-formed text, one
 * record bound for every format the package writes, one key order everywhere, one rule for equal
 * seqs. On the embedded store, with the package's writer, compactor, publication and read path.
 */
import { createHash } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { checkProgress, type CompactionProgress, type MergeLimits } from '../../src/compactor';
import { familyGroup, inputSegmentKey, namespaceId, newJobId, newSegmentId } from '../../src/keys';
import { readRoot, updateRoot } from '../../src/protocol/root-io';
import { lookupRecord, readGroupRecords, readGroupSnapshot, type LiveRecord } from '../../src/reader';
import { addSegments, groupSegments, jsonRootCodec } from '../../src/root';
import {
  MAX_KEY_BYTES,
  MAX_SEGMENT_LINE_BYTES,
  SEGMENT_EXTENSION,
  SegmentCorruptError,
  type SegmentFormatVersion,
  type SegmentRecord,
} from '../../src/segments';
import { BlockSegmentBuilder, EncodedRecord } from '../../src/segments/blocks';
import { createEmbeddedObjectStore, type ObjectStore } from '../../src/store';
import { InvalidSegmentInputError, writeInputSegment } from '../../src/writer';
import { compactWithKills, publishJob } from '../support/compact';

const ns = namespaceId('exact');
const group = familyGroup('inodes');
const FORMATS: readonly SegmentFormatVersion[] = [1, 2];

let store: ObjectStore;
beforeEach(() => {
  store = createEmbeddedObjectStore({ path: ':memory:' });
});
afterEach(() => store.close());

const everyKey = async (): Promise<string[]> => (await store.list({ prefix: '' })).objects.map((o) => o.key);

/** What `write` threw, or undefined when it wrote. */
const refusal = (write: Promise<unknown>): Promise<unknown> =>
  write.then(
    () => undefined,
    (err: unknown) => err,
  );

async function groupRecords(): Promise<LiveRecord[]> {
  const out: LiveRecord[] = [];
  for await (const record of readGroupRecords(
    store,
    await readGroupSnapshot(store, { namespaceId: ns, group }, jsonRootCodec),
  ))
    out.push(record);
  return out;
}

/** Registers `bytes`, a segment some other writer made, in the group. */
async function registerForeign(bytes: Uint8Array): Promise<string> {
  const key = inputSegmentKey(ns, newSegmentId(), SEGMENT_EXTENSION);
  await store.put(key, bytes);
  await updateRoot(store, ns, (root) => addSegments(root, group, [key]), { codec: jsonRootCodec });
  return key;
}

/**
 * A v1 segment of record lines given as bytes (any bytes: another writer's), with a footer that describes them and a
 * checksum that matches.
 */
function v1Segment(lines: readonly Buffer[], firstKey: string, lastKey: string): Uint8Array {
  const records = Buffer.concat(lines.flatMap((line) => [line, Buffer.from('\n')]));
  const sha256 = createHash('sha256').update(records).digest('hex');
  const footer = JSON.stringify({ footer: { count: lines.length, first_key: firstKey, last_key: lastKey, sha256 } });
  return gzipSync(
    Buffer.concat([Buffer.from('{"format":"metadata_segment","version":1}\n'), records, Buffer.from(`${footer}\n`)]),
  );
}

/**
 * A v2 segment of one record whose key and value are the given UTF-8 bytes (any bytes: another writer's), copied into a
 * block as they are.
 */
function v2Segment(key: Buffer, seq: number, value: Buffer): Uint8Array {
  const raw = Buffer.concat([Buffer.from([key.length]), key, Buffer.from([seq, 0, value.length]), value]);
  const builder = new BlockSegmentBuilder();
  builder.add(new EncodedRecord(key.toString(), seq, false, raw, 0, raw.length - value.length, raw.length));
  return builder.encode();
}

const limits = (segmentFormat: SegmentFormatVersion, targetSegmentBytes = 1 << 20): MergeLimits => ({
  targetSegmentBytes,
  maxFanIn: 2,
  segmentFormat,
});

/** Compacts the whole group with `limits`, every progress checked as the worker checks it, and publishes. */
async function compactGroup(mergeLimits: MergeLimits): Promise<void> {
  const inputs = groupSegments((await readRoot(store, ns, jsonRootCodec)).root, group);
  const job = { namespaceId: ns, jobId: newJobId(), group };
  const result = await compactWithKills(
    store,
    job,
    inputs,
    mergeLimits,
    [],
    (progress: CompactionProgress) => void checkProgress(job, progress),
  );
  await expect(publishJob(store, job, inputs, result)).resolves.toMatchObject({ outcome: 'published' });
}

describe('only well-formed text: refused at the door, refused as corrupt when another writer stored it', () => {
  // Each failed before the writer checked text: `writeInputSegment` wrote the record, v1 kept the lone
  // surrogate (JSON escapes it) until a v2 run or output replaced it by U+FFFD, and v2 replaced it at once.
  it.each(FORMATS)(
    'format %i: a lone surrogate in a key or a value is refused with InvalidSegmentInputError naming the record and its position; nothing is written',
    async (segmentFormat) => {
      await writeInputSegment(store, { namespaceId: ns, group }, [{ key: 'ok', seq: 1, value: 'v' }], {
        segmentFormat,
      });
      const before = await everyKey();
      const cases: [SegmentRecord[], RegExp, number][] = [
        [
          [
            { key: 'a', seq: 1, value: 'v' },
            { key: 'k', seq: 1, value: 'x\uD800y' },
          ],
          /record 1 \(key "k"\).*value.*lone surrogate \\ud800 at position 1/,
          1,
        ],
        [
          [{ key: 'a\uDC00', seq: 1, value: 'v' }],
          /record 0 \(key "a\\udc00"\).*key.*lone surrogate \\udc00 at position 1/,
          0,
        ],
        [
          [
            { key: 'b', seq: 1, tombstone: true },
            { key: 'a', seq: 2, value: 'ok' },
            { key: '\uDE00\uD83D', seq: 3, tombstone: true },
          ],
          /record 2 .*key.*lone surrogate \\ude00 at position 0/,
          2,
        ],
        [[{ key: 'k', seq: 1, value: 'ab\uD83D' }], /record 0 .*value.*lone surrogate \\ud83d at position 2/, 0],
      ];
      for (const [records, reason, index] of cases) {
        const err = await refusal(writeInputSegment(store, { namespaceId: ns, group }, records, { segmentFormat }));
        expect(err).toBeInstanceOf(InvalidSegmentInputError);
        expect((err as Error).message).toMatch(reason);
        expect((err as InvalidSegmentInputError).recordIndex).toBe(index);
      }
      expect(await everyKey()).toEqual(before);
      // A surrogate pair is one character: accepted, and read back as it went in.
      await writeInputSegment(
        store,
        { namespaceId: ns, group },
        [{ key: '\uD83D\uDE00', seq: 2, value: 'x\uD83D\uDE00y' }],
        { segmentFormat },
      );
      expect(await groupRecords()).toEqual([
        { key: 'ok', seq: 1, value: 'v' },
        { key: '\uD83D\uDE00', seq: 2, value: 'x\uD83D\uDE00y' },
      ]);
    },
  );

  // Failed before: both were written, and every compaction of the group failed with "keys out of
  // order at "a\uFFFD"" once a v2 run had turned the first into the second.
  it('two keys a run would have made equal: the lone surrogate is refused, and the group compacts through runs', async () => {
    await writeInputSegment(store, { namespaceId: ns, group }, [
      { key: 'a\uFFFD', seq: 1, value: 'replacement character' },
    ]);
    await expect(
      writeInputSegment(store, { namespaceId: ns, group }, [{ key: 'a\uD800', seq: 2, value: 'lone' }]),
    ).rejects.toBeInstanceOf(InvalidSegmentInputError);
    await writeInputSegment(store, { namespaceId: ns, group }, [{ key: 'b', seq: 3, value: 'b' }]);
    await writeInputSegment(store, { namespaceId: ns, group }, [{ key: 'a', seq: 4, value: 'a' }]);
    await compactGroup(limits(1));
    expect(await groupRecords()).toEqual([
      { key: 'a', seq: 4, value: 'a' },
      { key: 'a\uFFFD', seq: 1, value: 'replacement character' },
      { key: 'b', seq: 3, value: 'b' },
    ]);
  });

  // Failed before: the lookup answered "absent" for a key no segment can hold.
  it('a lookup of a key that is not well-formed is refused, naming the position', async () => {
    await writeInputSegment(store, { namespaceId: ns, group }, [{ key: 'a', seq: 1, value: 'v' }]);
    const snapshot = await readGroupSnapshot(store, { namespaceId: ns, group }, jsonRootCodec);
    const err = await refusal(lookupRecord(store, snapshot, 'a\uD800'));
    expect(err).toBeInstanceOf(InvalidSegmentInputError);
    expect((err as Error).message).toMatch(
      /lookup in group inodes of namespace exact refused: the key "a\\ud800" .*lone surrogate \\ud800 at position 1/,
    );
  });

  // Failed before: the v1 reader handed the lone surrogate on (JSON.parse keeps an escaped one).
  it('a v1 segment of another writer holding an escaped lone surrogate is corrupt, named, for the reader, the lookup and the compactor', async () => {
    const key = await registerForeign(v1Segment([Buffer.from('{"key":"k","seq":1,"value":"x\\ud800y"}')], 'k', 'k'));
    await writeInputSegment(store, { namespaceId: ns, group }, [{ key: 'j', seq: 2, value: 'v' }]);
    const corrupt = new RegExp(
      `segment ${key} is corrupt: record 1 \\(key "k"\\) is not well-formed text: its value has a lone surrogate \\\\ud800 at position 1`,
    );
    await expect(groupRecords()).rejects.toThrow(corrupt);
    await expect(
      lookupRecord(store, await readGroupSnapshot(store, { namespaceId: ns, group }, jsonRootCodec), 'k'),
    ).rejects.toThrow(corrupt);
    await expect(compactGroup(limits(2))).rejects.toThrow(corrupt);
  });

  // Failed before: both readers decoded the bytes, turning them into U+FFFD.
  it.each([
    [
      'v1, a byte that is not UTF-8 in a value',
      () =>
        v1Segment(
          [Buffer.concat([Buffer.from('{"key":"k","seq":1,"value":"x'), Buffer.from([0xff]), Buffer.from('"}')])],
          'k',
          'k',
        ),
      'k',
      /record 1 \(key "k"\) is not UTF-8/,
    ],
    [
      'v2, an encoded surrogate in a value',
      () => v2Segment(Buffer.from('k'), 1, Buffer.from([0x78, 0xed, 0xa0, 0x80])),
      'k',
      /block 1 record 1 \(key "k"\) is not UTF-8/,
    ],
    // The index names the key as decoded: the lookup of that key is led to the block.
    [
      'v2, a byte that is not UTF-8 in a key',
      () => v2Segment(Buffer.from([0x6b, 0xc0]), 1, Buffer.from('v')),
      'k\uFFFD',
      /block 1 record 1 \(key "k\uFFFD"\) is not UTF-8/,
    ],
  ])('%s: corrupt, named, never decoded into another character', async (_, bytes, lookupKey, reason) => {
    const key = await registerForeign(bytes());
    await writeInputSegment(store, { namespaceId: ns, group }, [{ key: 'j', seq: 2, value: 'v' }]);
    await expect(groupRecords()).rejects.toThrow(SegmentCorruptError);
    await expect(groupRecords()).rejects.toThrow(reason);
    await expect(
      lookupRecord(store, await readGroupSnapshot(store, { namespaceId: ns, group }, jsonRootCodec), lookupKey),
    ).rejects.toThrow(reason);
    await expect(compactGroup(limits(1))).rejects.toThrow(new RegExp(`segment ${key} is corrupt`));
  });
});

describe('one record bound: what the writer accepts, every format holds, runs and outputs alike', () => {
  // Failed before in format 2: the writer took each of these. A v1 output cannot hold the
  // first two (their line is longer than 1 MiB once JSON-escaped) nor the third (a footer repeats the key
  // of an output's first and last record), and the fourth, cut at, makes heartbeated progress longer than
  // Temporal's details may be: every compaction of the group failed until it ended as RecurringFailure.
  it.each(FORMATS)(
    'format %i: a record some output could not hold is refused, naming it, before anything is written',
    async (segmentFormat) => {
      const before = await everyKey();
      const cases: [SegmentRecord, RegExp][] = [
        [
          { key: 'k', seq: 1, value: 'x'.repeat((1 << 20) - 1) },
          /record 1 \(key "k"\) is \d+ bytes as a format-1 line, more than a record may take \(1048576\)/,
        ],
        [
          { key: 'k', seq: 1, value: '\u0001'.repeat(200_000) },
          /record 1 \(key "k"\) is 1200\d+ bytes as a format-1 line/,
        ],
        [
          { key: 'k'.repeat(600_000), seq: 1, tombstone: true },
          /record 1 \(key "k+… \(600000 characters, digest [0-9a-f]+\)"\) has a key of 600002 bytes as JSON, more than a key may take \(16384\)/,
        ],
        [{ key: 'k'.repeat(70_000), seq: 1, value: 'v' }, /has a key of 70002 bytes as JSON/],
      ];
      for (const [record, reason] of cases) {
        const err = await refusal(
          writeInputSegment(store, { namespaceId: ns, group }, [{ key: 'a', seq: 1, value: 'v' }, record], {
            segmentFormat,
          }),
        );
        expect(err).toBeInstanceOf(InvalidSegmentInputError);
        expect((err as Error).message).toMatch(reason);
        expect((err as InvalidSegmentInputError).recordIndex).toBe(1);
      }
      expect(await everyKey()).toEqual(before);
    },
  );

  it('the largest records the writer accepts compact into either output format, through v2 runs, each alone in its output', async () => {
    const lineOf = (record: SegmentRecord) => Buffer.byteLength(JSON.stringify(record));
    /** `record` with a value of `unit` repeated as often as its line allows. */
    const filled = (record: SegmentRecord & { value: string }, unit: string): SegmentRecord & { value: string } => {
      const room = MAX_SEGMENT_LINE_BYTES - lineOf(record);
      return {
        ...record,
        value: unit.repeat(Math.floor(room / (lineOf({ ...record, value: unit }) - lineOf(record)))),
      };
    };
    const keyAtBound = 'k'.repeat(MAX_KEY_BYTES - 2);
    const largest: SegmentRecord[] = [
      filled({ key: 'line', seq: Number.MAX_SAFE_INTEGER, value: '' }, 'x'),
      filled({ key: 'escaped', seq: 7, value: '' }, '\u0001'),
      filled({ key: 'astral', seq: 8, value: '' }, '\u{1F600}'),
      { key: keyAtBound, seq: 0, tombstone: true },
      filled({ key: 'l'.repeat(MAX_KEY_BYTES - 2), seq: 9, value: '' }, 'v'),
    ];
    expect(lineOf(largest[0]!)).toBe(MAX_SEGMENT_LINE_BYTES);
    expect(lineOf(largest[4]!)).toBe(MAX_SEGMENT_LINE_BYTES);
    expect(lineOf(largest[1]!)).toBeGreaterThan(MAX_SEGMENT_LINE_BYTES - 6);
    // One byte more of any of them is refused.
    for (const record of [
      { ...largest[0]!, value: `${(largest[0] as { value: string }).value}x` },
      { key: `${keyAtBound}k`, seq: 0, tombstone: true as const },
    ]) {
      expect(
        await refusal(writeInputSegment(store, { namespaceId: ns, group }, [record], { segmentFormat: 2 })),
      ).toMatchObject({ recordIndex: 0 });
    }
    for (const [i, record] of largest.entries())
      await writeInputSegment(store, { namespaceId: ns, group }, [record, { key: `z${i}`, seq: i, value: '' }], {
        segmentFormat: FORMATS[i % 2],
      });
    const view = await groupRecords();
    expect(view.map((r) => r.key)).toEqual(
      [...largest.filter((r) => 'value' in r).map((r) => r.key), 'z0', 'z1', 'z2', 'z3', 'z4'].sort(),
    );
    // Three inputs and more at fan-in 2: intermediate runs (v2); a target of 1 KiB cuts after every record.
    for (const segmentFormat of [1, 2, 1] as const) {
      await compactGroup(limits(segmentFormat, 1024));
      expect(await groupRecords()).toEqual(view);
    }
    const snapshot = await readGroupSnapshot(store, { namespaceId: ns, group }, jsonRootCodec);
    for (const record of largest)
      expect(await lookupRecord(store, snapshot, record.key)).toEqual('value' in record ? record : undefined);
  }, 60_000);
});

describe('one key order: UTF-16 code units, for every path', () => {
  /**
   * Keys whose order differs between UTF-16 code units and UTF-8 bytes: astral characters (surrogates D800–DFFF)
   * against U+E000–U+FFFF, alone and after a common prefix.
   */
  const KEYS = [
    'b',
    'a',
    '\uFFFF',
    '\uE000',
    '\u{1F600}',
    '\u{10000}',
    'a\uFF21',
    'a\u{1F600}',
    'a\uE000',
    'a\u{10FFFF}',
    'a\uFFFD',
    '\u{1F600}a',
    '\uE000\u{1F600}',
  ];
  const utf16 = [...KEYS].sort((x, y) => (x < y ? -1 : x > y ? 1 : 0));
  const utf8 = [...KEYS].sort((x, y) => Buffer.compare(Buffer.from(x), Buffer.from(y)));
  /** Values of 60 KiB: a v2 block closes after every second record, so a lookup searches an index of many blocks. */
  const valueOf = (key: string, seq: number) => `${seq}:${key}:${'v'.repeat(60 * 1024)}`;

  it('the writer sorts by it, readers check it, the merge, runs and outputs of both formats keep it, lookups search by it, and a resumed compaction skips by it', async () => {
    expect(utf16).not.toEqual(utf8);
    const model = new Map<string, SegmentRecord>();
    // Four inputs, v1 and v2, each handed over in UTF-8 order (the writer sorts), each key in two of them.
    for (let s = 0; s < 4; s++) {
      const records = utf8
        .filter((_, i) => i % 4 !== s && (i + 1) % 4 !== s)
        .map((key, i): SegmentRecord =>
          (i + s) % 5 === 0
            ? { key, seq: 10 * s + i, tombstone: true }
            : { key, seq: 10 * s + i, value: valueOf(key, 10 * s + i) },
        );
      await writeInputSegment(store, { namespaceId: ns, group }, records, { segmentFormat: FORMATS[s % 2] });
      for (const r of records) if ((model.get(r.key)?.seq ?? -1) <= r.seq) model.set(r.key, r);
    }
    const expected = utf16.map((key) => model.get(key)!).filter((r): r is LiveRecord => 'value' in r);
    expect(expected.length).toBeGreaterThan(5);
    const check = async () => {
      expect(await groupRecords()).toEqual(expected);
      const snapshot = await readGroupSnapshot(store, { namespaceId: ns, group }, jsonRootCodec);
      for (const key of KEYS)
        expect(await lookupRecord(store, snapshot, key)).toEqual(expected.find((r) => r.key === key));
    };
    await check();
    // Fan-in 2: runs; outputs cut after about two records; the attempts killed at cuts and resumed from their last key.
    for (const segmentFormat of FORMATS) {
      const inputs = groupSegments((await readRoot(store, ns, jsonRootCodec)).root, group);
      const job = { namespaceId: ns, jobId: newJobId(), group };
      const lastKeys: (string | null)[] = [];
      const kills = [
        { after: 3, lostBeat: false },
        { after: 2, lostBeat: true },
        { after: 4, lostBeat: false },
      ];
      const result = await compactWithKills(
        store,
        job,
        inputs,
        limits(segmentFormat, 100 * 1024),
        kills,
        (progress) => void lastKeys.push(progress.lastKey),
      );
      expect(lastKeys.filter((k) => k !== null && k !== lastKeys.at(-1)).length).toBeGreaterThan(2);
      await expect(publishJob(store, job, inputs, result)).resolves.toMatchObject({ outcome: 'published' });
      await check();
    }
  }, 60_000);
});

describe('equal seqs: the later segment in the group wins', () => {
  it('for the reader, the lookup, a compaction through runs, and segments registered after it', async () => {
    const write = (records: SegmentRecord[], segmentFormat: SegmentFormatVersion = 1) =>
      writeInputSegment(store, { namespaceId: ns, group }, records, { segmentFormat });
    await write([
      { key: 'a', seq: 5, value: 'first' },
      { key: 'b', seq: 5, value: 'first' },
      { key: 'c', seq: 5, tombstone: true },
      { key: 'e', seq: 9, value: 'first' },
    ]);
    await write(
      [
        { key: 'a', seq: 5, value: 'second' },
        { key: 'b', seq: 5, tombstone: true },
        { key: 'f', seq: 9, value: 'second' },
      ],
      2,
    );
    await write([
      { key: 'c', seq: 5, value: 'third' },
      { key: 'd', seq: 0, value: 'zero' },
    ]);
    await write([{ key: 'd', seq: 0, value: 'fourth' }], 2);
    const expected: LiveRecord[] = [
      { key: 'a', seq: 5, value: 'second' },
      { key: 'c', seq: 5, value: 'third' },
      { key: 'd', seq: 0, value: 'fourth' },
      { key: 'e', seq: 9, value: 'first' },
      { key: 'f', seq: 9, value: 'second' },
    ];
    const check = async (want: LiveRecord[]) => {
      expect(await groupRecords()).toEqual(want);
      const snapshot = await readGroupSnapshot(store, { namespaceId: ns, group }, jsonRootCodec);
      for (const key of ['a', 'b', 'c', 'd', 'e', 'f'])
        expect(await lookupRecord(store, snapshot, key)).toEqual(want.find((r) => r.key === key));
    };
    await check(expected);
    await compactGroup(limits(1, 1024));
    await check(expected);
    // Registered after the compaction, so listed after its outputs: it wins the tie. Its seqs stay
    // above the tombstone the compaction dropped (b's 5), as the sequence floor requires (spec 6c.3).
    await write([
      { key: 'e', seq: 9, tombstone: true },
      { key: 'f', seq: 9, value: 'fifth' },
    ]);
    const after = [...expected.slice(0, 3), { key: 'f', seq: 9, value: 'fifth' }];
    await check(after);
    await compactGroup(limits(2, 1024));
    await check(after);
  });
});
