/**
 * Segment format v2 (zstd blocks, checksums and an index): round trips, the golden file, corruption, chunking, and the
 * index lookup.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import fc from 'fast-check';
import { describe, expect, it, vi } from 'vitest';
import { SettingsError, settingsFromEnv } from '../../src/config';
import { GOLDEN_RECORDS, GOLDEN_V2_EXTRA } from '../support/golden-segment';
import { crc32, zstdCompressSync } from 'node:zlib';
import {
  encodeSegment,
  lookupInSegment,
  MAX_BLOCK_RECORD_BYTES,
  mergeSegments,
  newSegmentWriter,
  readMergeBatches,
  readSegment,
  readSegmentBatches,
  SegmentCorruptError,
  type SegmentRecord,
} from '../../src/segments';

/** Set, every decompression on the codec pool fails with it, as when a codec thread dies. */
const codecPool = vi.hoisted(() => ({ failure: undefined as Error | undefined }));
vi.mock('../../src/segments/codec-pool', async (importOriginal) => {
  const original = await importOriginal<typeof import('../../src/segments/codec-pool')>();
  return {
    ...original,
    zstdDecompressOnPool: (compressed: Uint8Array, maxOutputLength: number) =>
      codecPool.failure
        ? Promise.reject(codecPool.failure)
        : original.zstdDecompressOnPool(compressed, maxOutputLength),
  };
});

async function readAll(bytes: Uint8Array, chunks: Uint8Array[] = [bytes]): Promise<SegmentRecord[]> {
  const out: SegmentRecord[] = [];
  for await (const r of readSegment('seg-key', Readable.from(chunks))) out.push(r);
  return out;
}
const lookup = (bytes: Uint8Array, key: string) => lookupInSegment('seg-key', Readable.from([bytes]), key);

/** `count` records over several blocks: values of about 200 bytes, every fifth a tombstone. */
const many = (count: number): SegmentRecord[] =>
  Array.from({ length: count }, (_, i): SegmentRecord => {
    const key = `k${String(i * 2).padStart(7, '0')}`;
    return i % 5 === 0
      ? { key, seq: i, tombstone: true }
      : { key, seq: i * 1000, value: `${i}:${'v'.repeat(i % 400)}` };
  });

/** The offsets of a v2 segment's frames, read from their headers: [offset, compressed length] per block. */
function blocksOf(bytes: Uint8Array): [number, number][] {
  const b = Buffer.from(bytes);
  const out: [number, number][] = [];
  for (let at = 8; b[at] === 0x42; at += 17 + b.readUInt32BE(at + 1)) out.push([at, b.readUInt32BE(at + 1)]);
  return out;
}

/** `bytes` with block 2's compressed bytes replaced by as many that are not zstd, under a matching checksum. */
function notZstd(bytes: Uint8Array): Buffer {
  const b = Buffer.from(bytes);
  const [at, length] = blocksOf(b)[1]!;
  const compressed = b.subarray(at + 17, at + 17 + length);
  compressed.fill(0x5a);
  b.writeUInt32BE(crc32(compressed, crc32(b.subarray(at + 5, at + 13))), at + 13);
  return b;
}

/** `bytes` with one bit of byte `at` changed. */
function flip(bytes: Uint8Array, at: number): Buffer {
  const b = Buffer.from(bytes);
  b[at]! ^= 0x20;
  return b;
}

describe('segment format v2', () => {
  const records: SegmentRecord[] = [
    { key: 'a', seq: 1, value: 'one' },
    { key: 'b', seq: 2, tombstone: true },
    { key: 'c', seq: 3, value: '' },
  ];

  it('round-trips records, values and tombstones, in one block or many, and an empty segment', async () => {
    expect(await readAll(encodeSegment(records, 2))).toEqual(records);
    expect(await readAll(encodeSegment([], 2))).toEqual([]);
    const large = many(5000);
    const bytes = encodeSegment(large, 2);
    expect(blocksOf(bytes).length).toBeGreaterThan(3);
    expect(await readAll(bytes)).toEqual(large);
    // Batches are whole blocks.
    const batches: number[] = [];
    for await (const batch of readSegmentBatches('seg-key', Readable.from([bytes]))) batches.push(batch.length);
    expect(batches.length).toBe(blocksOf(bytes).length);
  });

  it('reads the golden v2 segment, and the encoder of today writes records that decode the same', async () => {
    const golden = readFileSync(join(__dirname, '..', 'golden', 'segment-v2.mseg'));
    const goldenRecords = [...GOLDEN_RECORDS, GOLDEN_V2_EXTRA];
    expect(await readAll(golden)).toEqual(goldenRecords);
    for (const r of goldenRecords) expect(await lookup(golden, r.key)).toEqual(r);
    expect(await readAll(encodeSegment(goldenRecords, 2))).toEqual(goldenRecords);
  });

  it('reads records whatever the chunking of the bytes, frames split anywhere', async () => {
    const bytes = encodeSegment(many(3000), 2);
    const expected = many(3000);
    await fc.assert(
      fc.asyncProperty(fc.array(fc.integer({ min: 1, max: 70_000 }), { minLength: 1, maxLength: 20 }), async (cuts) => {
        const chunks: Uint8Array[] = [];
        for (let at = 0, i = 0; at < bytes.length; at += cuts[i++ % cuts.length]!)
          chunks.push(bytes.subarray(at, at + cuts[i % cuts.length]!));
        expect(await readAll(bytes, chunks)).toEqual(expected);
      }),
      { numRuns: 30 },
    );
  });

  it.each([
    [
      'a changed byte in a block',
      (b: Uint8Array) => flip(b, blocksOf(b)[1]![0] + 40),
      /block 2 does not match its checksum/,
    ],
    [
      'a changed record count',
      (b: Uint8Array) => flip(b, blocksOf(b)[0]![0] + 12),
      /block 1 does not match its checksum/,
    ],
    ['truncated after a block: no index', (b: Uint8Array) => b.subarray(0, blocksOf(b)[2]![0]), /truncated/],
    ['truncated inside a block', (b: Uint8Array) => b.subarray(0, blocksOf(b)[1]![0] + 100), /truncated in block 2/],
    ['truncated in the trailer', (b: Uint8Array) => b.subarray(0, b.length - 3), /truncated in the index/],
    [
      'a block left out',
      (b: Uint8Array) => Buffer.concat([b.subarray(0, blocksOf(b)[1]![0]), b.subarray(blocksOf(b)[2]![0])]),
      /trailer is malformed|index does not describe/,
    ],
    ['a changed index', (b: Uint8Array) => flip(b, b.length - 20), /index does not match its checksum/],
    ['an unknown header', (b: Uint8Array) => flip(b, 7), /header/],
    ['data after the trailer', (b: Uint8Array) => Buffer.concat([b, Buffer.from('x')]), /after the trailer/],
    ['not a frame', (b: Uint8Array) => flip(b, blocksOf(b)[1]![0]), /unknown frame/],
    ['a block that is not zstd under a matching checksum', notZstd, /block 2 is not zstd/],
  ])('rejects %s as corrupt, naming the key', async (_, corrupt, reason) => {
    const bad = corrupt(encodeSegment(many(3000), 2));
    await expect(readAll(bad)).rejects.toBeInstanceOf(SegmentCorruptError);
    await expect(readAll(bad)).rejects.toThrow(/segment seg-key is corrupt/);
    await expect(readAll(bad)).rejects.toThrow(reason);
  });

  it('a codec thread that fails does not make a sound segment corrupt: its error stands, and may be retried', async () => {
    const sound = encodeSegment(many(3000), 2);
    codecPool.failure = new Error('a block codec thread exited with code 1');
    try {
      const failed = await readAll(sound).then(
        () => undefined,
        (err: unknown) => err,
      );
      expect(failed).toBe(codecPool.failure);
    } finally {
      codecPool.failure = undefined;
    }
    expect(await readAll(sound)).toEqual(many(3000));
  });

  it('refuses to write a record whose key and value are larger than a block allows', () => {
    expect(() => encodeSegment([{ key: 'big', seq: 1, value: 'x'.repeat(MAX_BLOCK_RECORD_BYTES) }], 2)).toThrow(
      /record "big" is \d+ bytes of key and value/,
    );
    expect(
      encodeSegment([{ key: 'big', seq: 1, value: 'x'.repeat(MAX_BLOCK_RECORD_BYTES - 3) }], 2).length,
    ).toBeGreaterThan(0);
  });

  it('refuses to read a record larger than a writer makes (a v2 output copies records as they are)', async () => {
    // The largest record a writer accepts reads back; one byte more, in a block otherwise well formed, is corrupt.
    const largest: SegmentRecord = { key: 'big', seq: 1, value: 'x'.repeat(MAX_BLOCK_RECORD_BYTES - 3) };
    expect(await readAll(encodeSegment([largest], 2))).toEqual([largest]);
    const value = Buffer.alloc(MAX_BLOCK_RECORD_BYTES - 2, 'x');
    const varint = (n: number) => {
      const out: number[] = [];
      for (; n >= 0x80; n = Math.floor(n / 0x80)) out.push((n % 0x80) | 0x80);
      out.push(n);
      return Buffer.from(out);
    };
    const raw = Buffer.concat([
      varint(3),
      Buffer.from('big'),
      varint(1),
      Buffer.from([0]),
      varint(value.length),
      value,
    ]);
    const compressed = zstdCompressSync(raw);
    const head = Buffer.alloc(17);
    head[0] = 0x42;
    head.writeUInt32BE(compressed.length, 1);
    head.writeUInt32BE(raw.length, 5);
    head.writeUInt32BE(1, 9);
    head.writeUInt32BE(crc32(compressed, crc32(head.subarray(5, 13))), 13);
    // The block, then the index frame's tag: the reader parses a block once it sees the frame after it.
    const segment = Buffer.concat([
      Buffer.from([0x4d, 0x53, 0x45, 0x47, 0, 0, 0, 2]),
      head,
      compressed,
      Buffer.from([0x49]),
    ]);
    await expect(readAll(segment)).rejects.toThrow(/block 1 record 1 is larger than a segment allows/);
  });

  it('a merge of v2 segments into v2 copies each winning record as it is, and into v1 decodes it', async () => {
    const older = many(3000);
    // Newer versions of every third key, and a value that is not valid UTF-8 on its own: copied, its bytes are kept.
    const newer: SegmentRecord[] = older
      .filter((_, i) => i % 3 === 0)
      .map((r, i) =>
        i % 2 === 0
          ? { key: r.key, seq: r.seq + 1, value: `new ${i} ☃` }
          : { key: r.key, seq: r.seq + 1, tombstone: true },
      );
    const sources = [encodeSegment(older, 2), encodeSegment(newer, 2)];
    const merged = async (version: 1 | 2) => {
      const writer = newSegmentWriter(version, { background: true });
      const batches = sources.map((bytes, i) => readMergeBatches(`seg-${i}`, Readable.from([bytes])));
      for await (const batch of mergeSegments(batches, { dropTombstones: false }))
        for (const record of batch) writer.add(record);
      return writer.finish();
    };
    const winners = older.map((r) => newer.find((n) => n.key === r.key) ?? r);
    expect(Buffer.from(await merged(2)).equals(Buffer.from(encodeSegment(winners, 2)))).toBe(true);
    expect(Buffer.from(await merged(1)).equals(Buffer.from(encodeSegment(winners, 1)))).toBe(true);
  });
});

describe('v2 point lookup by the index', () => {
  const records = many(5000);
  const bytes = encodeSegment(records, 2);

  it('finds every key and no other, before, between and after the blocks', async () => {
    for (const r of records.filter((_, i) => i % 97 === 0 || i === records.length - 1))
      expect(await lookup(bytes, r.key)).toEqual(r);
    for (const absent of ['a', 'k0000001', 'k0004001', 'z']) expect(await lookup(bytes, absent)).toBeUndefined();
  });

  it('verifies the block it reads and reads no other', async () => {
    const damaged = flip(bytes, blocksOf(bytes)[1]![0] + 40);
    const blocks = await blockRecords(bytes);
    // A key of the damaged block: the lookup decodes that block and fails on its checksum.
    const lastOfSecond = blocks[1]!.at(-1)!;
    const firstOfThird = blocks[2]![0]!;
    await expect(lookup(damaged, lastOfSecond.key)).rejects.toThrow(/block 2 does not match its checksum/);
    // A key of another block: the damaged one is not read.
    expect(await lookup(damaged, firstOfThird.key)).toEqual(firstOfThird);
    await expect(lookup(flip(bytes, bytes.length - 20), firstOfThird.key)).rejects.toThrow(
      /index does not match its checksum/,
    );
  });
});

/** The records of each block of `bytes`, in order: the reader's batches are its blocks. */
async function blockRecords(bytes: Uint8Array): Promise<SegmentRecord[][]> {
  const out: SegmentRecord[][] = [];
  for await (const batch of readSegmentBatches('seg-key', Readable.from([bytes]))) out.push(batch);
  return out;
}

describe('v1 and v2 together', () => {
  it('a merge reads sources of both formats alike', async () => {
    const [a, b] = [many(2000), many(3000).map((r) => ({ ...r, seq: r.seq + 1 }))];
    const open = (bytes: Uint8Array) => readSegmentBatches('seg-key', Readable.from([bytes]))[Symbol.asyncIterator]();
    const merged: SegmentRecord[] = [];
    for await (const batch of mergeSegments([open(encodeSegment(a, 1)), open(encodeSegment(b, 2))], {
      dropTombstones: false,
    }))
      merged.push(...batch);
    expect(merged).toEqual(b);
    expect(await lookupInSegment('seg-key', Readable.from([encodeSegment(a, 1)]), a[7]!.key)).toEqual(a[7]);
  });
});

describe('the segment format setting', () => {
  it('is read from COMPACTION_SEGMENT_FORMAT, 2 unless set, and refuses a format that does not exist', () => {
    expect(settingsFromEnv({}).segmentFormat).toBe(2);
    expect(settingsFromEnv({ COMPACTION_SEGMENT_FORMAT: '1' }).segmentFormat).toBe(1);
    for (const bad of ['3', '0', 'zstd'])
      expect(() => settingsFromEnv({ COMPACTION_SEGMENT_FORMAT: bad }), bad).toThrow(SettingsError);
    expect(() => settingsFromEnv({ COMPACTION_SEGMENT_FORMAT: '3' })).toThrow(
      'COMPACTION_SEGMENT_FORMAT must be one of 1, 2, not "3"',
    );
  });
});
