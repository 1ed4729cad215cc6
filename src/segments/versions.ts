/**
 * The two segment formats side by side: v1 (gzip of JSON lines, format.ts) and v2 (zstd blocks with
 * an index, blocks.ts). Readers tell them apart by their first bytes, so a group may hold both; a
 * setting chooses what a compactor writes.
 */
import { WORKER_SETTINGS } from '../config/declaration';
import {
  BlockSegmentBuilder,
  isBlockSegment,
  lookupInBlockSegment,
  readBlockSegment,
  type MergeRecord,
} from './blocks';
import { readGzipSegment, SegmentBuilder, type SegmentRecord } from './format';

/** The versions there are, as the setting that chooses one declares them. */
export const SEGMENT_FORMAT_VERSIONS = WORKER_SETTINGS.segmentFormat.values;
export type SegmentFormatVersion = (typeof SEGMENT_FORMAT_VERSIONS)[number];

/**
 * What new segments are written in unless a setting says otherwise: v2, which does more records per
 * CPU-second than v1 in fewer bytes (docs/performance.md). A reader in another language must read v2
 * (docs/formats.md); `COMPACTION_SEGMENT_FORMAT=1` keeps writing v1 for readers that read only v1.
 */
export const DEFAULT_SEGMENT_FORMAT_VERSION: SegmentFormatVersion = WORKER_SETTINGS.segmentFormat.default;

/** A segment being built in memory, in either format; the caller bounds it with `size`. */
export interface SegmentWriter {
  /** Uncompressed bytes of the records so far: the measure of the target segment size. */
  readonly size: number;
  readonly count: number;
  readonly firstKey: string | null;
  readonly lastKey: string | null;
  /** Appends a record; keys must rise strictly. A RangeError for a record larger than the format allows. */
  add(record: MergeRecord): void;
  /** The segment's bytes, compressed on this thread. */
  encode(): Uint8Array;
  /** The segment's bytes, once the compression running in the background (v2, when asked for) is done. */
  finish(): Promise<Uint8Array>;
}

/**
 * A writer of `version`; `background`: compress v2 blocks on the compactor pool's threads as they close (other
 * cores), for {@link SegmentWriter.finish}.
 */
export const newSegmentWriter = (
  version: SegmentFormatVersion = DEFAULT_SEGMENT_FORMAT_VERSION,
  options: { background?: boolean } = {},
): SegmentWriter => (version === 2 ? new BlockSegmentBuilder(options) : new SegmentBuilder());

export function encodeSegment(
  records: Iterable<SegmentRecord>,
  version: SegmentFormatVersion = DEFAULT_SEGMENT_FORMAT_VERSION,
): Uint8Array {
  const writer = newSegmentWriter(version);
  for (const r of records) writer.add(r);
  return writer.encode();
}

/**
 * Streams the records of a segment of either format, a batch at a time (a v2 block, or what one
 * chunk of a v1 segment completes), checking each as its format requires. A v2 block is verified
 * before its records are yielded; v1's checksum is in its footer: in both, treat what was read as
 * unverified until the iteration ends without error.
 */
export async function* readSegmentBatches(
  key: string,
  chunks: AsyncIterable<Uint8Array>,
): AsyncGenerator<SegmentRecord[]> {
  for await (const batch of readMergeBatches(key, chunks))
    yield batch.map((record) => ('toRecord' in record ? record.toRecord() : record));
}

/**
 * {@link readSegmentBatches} for a merge that writes what it reads: a v2 block's records keep their
 * values encoded, so a v2 writer copies them without decoding them.
 */
export async function* readMergeBatches(key: string, chunks: AsyncIterable<Uint8Array>): AsyncGenerator<MergeRecord[]> {
  const { first, rest } = await opened(chunks);
  if (first !== undefined && isBlockSegment(first)) return yield* readBlockSegment(key, rest, first);
  // v1, or too short to say: the gzip reader names what is wrong.
  yield* readGzipSegment(key, withFirst(first, rest));
}

/** The first non-empty chunk of `chunks` (undefined when there is none) and the iterator of the rest. */
async function opened(
  chunks: AsyncIterable<Uint8Array>,
): Promise<{ first: Uint8Array | undefined; rest: AsyncIterator<Uint8Array> }> {
  const rest = chunks[Symbol.asyncIterator]();
  for (;;) {
    const next = await rest.next();
    if (next.done) return { first: undefined, rest };
    if (next.value.length > 0) return { first: next.value, rest };
  }
}

async function* withFirst(first: Uint8Array | undefined, rest: AsyncIterator<Uint8Array>): AsyncGenerator<Uint8Array> {
  if (first === undefined) return;
  yield first;
  for (let next = await rest.next(); !next.done; next = await rest.next()) yield next.value;
}

/** The records of a segment one at a time: {@link readSegmentBatches} for a caller that wants no batches. */
export async function* readSegment(key: string, chunks: AsyncIterable<Uint8Array>): AsyncGenerator<SegmentRecord> {
  for await (const batch of readSegmentBatches(key, chunks)) yield* batch;
}

/**
 * The record of `wanted` in the segment whose bytes `chunks` stream, or undefined. A v2 segment is
 * gathered (one compressed segment in memory) and searched by its index: only the block that may
 * hold the key is decoded, and verified. A v1 segment is streamed to its end, so its checksum has
 * passed before the answer is returned.
 */
export async function lookupInSegment(
  key: string,
  chunks: AsyncIterable<Uint8Array>,
  wanted: string,
): Promise<SegmentRecord | undefined> {
  const { first, rest } = await opened(chunks);
  if (first !== undefined && isBlockSegment(first)) {
    const all: Uint8Array[] = [];
    for await (const chunk of withFirst(first, rest)) all.push(chunk);
    return lookupInBlockSegment(key, Buffer.concat(all), wanted);
  }
  let found: SegmentRecord | undefined;
  for await (const batch of readGzipSegment(key, withFirst(first, rest))) found ??= batch.find((r) => r.key === wanted);
  return found;
}
