/**
 * A v2 segment read in part: its block index from its tail, and a run of its blocks by their byte
 * span, each block checked against its index entry. A merge split into key ranges plans its ranges
 * with the first and reads each range's blocks with the second.
 */
import { crc32 } from 'node:zlib';
import {
  BLOCK_HEADER,
  BLOCK_TAG,
  decodeIndex,
  FRAME_HEAD_BYTES,
  INDEX_HEAD_BYTES,
  INDEX_TAG,
  BLOCKS_PER_POOL_TASK,
  type FrameBatch,
  inflatedInBatches,
  takeFrames,
  MAX_INDEX_BYTES,
  parseBlock,
  SegmentBytes,
  TRAILER_BYTES,
  TRAILER_MAGIC,
  type EncodedRecord,
} from './blocks';
import { SegmentCorruptError } from './format';

/** A block as the index gives it, with where its frame ends (the next frame's start, or the index's). */
export interface IndexedBlock {
  readonly offset: number;
  readonly end: number;
  readonly count: number;
  readonly firstKey: string;
  readonly lastKey: string;
}

/** Bytes of a segment's tail read first: its trailer and, for all but very large segments, its whole index. */
export const INDEX_TAIL_BYTES = 64 * 1024;

/**
 * The blocks of the v2 segment `key`, `size` bytes long, from `tail`, its bytes from `size -
 * tail.length` on: `{ readFrom }` when the index starts before them (read the tail again from there);
 * undefined when the segment does not end like v2 (a v1 segment: read it whole). The index must be
 * whole and checked (CRC-32), and its blocks must tile the bytes from the header to the index in key
 * order; otherwise {@link SegmentCorruptError}.
 */
export function blockIndexFromTail(
  key: string,
  size: number,
  tail: Uint8Array,
): { blocks: IndexedBlock[] } | { readFrom: number } | undefined {
  const corrupt = (reason: string) => new SegmentCorruptError(key, reason);
  const buf = Buffer.from(tail.buffer, tail.byteOffset, tail.byteLength);
  const base = size - buf.length;
  if (buf.length < TRAILER_BYTES || !TRAILER_MAGIC.equals(buf.subarray(buf.length - TRAILER_BYTES + 8))) return;
  const indexAt = Number(buf.readBigUInt64BE(buf.length - TRAILER_BYTES));
  if (indexAt < BLOCK_HEADER.length || indexAt + INDEX_HEAD_BYTES > size - TRAILER_BYTES)
    throw corrupt('the trailer is malformed');
  if (indexAt < base) return { readFrom: indexAt };
  const at = indexAt - base;
  const indexLength = buf.readUInt32BE(at + 1);
  const start = at + INDEX_HEAD_BYTES;
  if (buf[at] !== INDEX_TAG || indexLength > MAX_INDEX_BYTES || start + indexLength !== buf.length - TRAILER_BYTES)
    throw corrupt('the trailer is malformed');
  if (crc32(buf.subarray(start, start + indexLength)) !== buf.readUInt32BE(at + 5))
    throw corrupt('the index does not match its checksum');
  const entries = decodeIndex(corrupt, buf, start, start + indexLength);
  const blocks = entries.map((e, i) => ({ ...e, end: entries[i + 1]?.offset ?? indexAt }));
  const tiled = blocks.every(
    (b, i) =>
      b.offset + FRAME_HEAD_BYTES < b.end &&
      b.count > 0 &&
      b.firstKey <= b.lastKey &&
      (i === 0
        ? b.offset === BLOCK_HEADER.length
        : b.offset === blocks[i - 1]!.end && b.firstKey > blocks[i - 1]!.lastKey),
  );
  if (!tiled || (blocks.length === 0 && indexAt !== BLOCK_HEADER.length)) throw corrupt('the index is malformed');
  return { blocks };
}

/** Blocks `first` to `last` (index numbers from 0) of a segment: the bytes of their frames and their entries. */
export interface BlockSpan {
  readonly key: string;
  readonly blocks: readonly IndexedBlock[];
  /** The number of the span's first block in its segment, from 0: errors name blocks as the whole reader does. */
  readonly first: number;
  /** The last key of the block before the span (null for the segment's first): the span's keys come after it. */
  readonly after: string | null;
}

/** Where a span's frames lie in its segment: [start, end). */
export const spanBytes = (span: BlockSpan): { start: number; end: number } => ({
  start: span.blocks[0]!.offset,
  end: span.blocks[span.blocks.length - 1]!.end,
});

/**
 * The records of `span`'s blocks from `chunks`, its frames' bytes: each frame checked (CRC-32, the
 * block bound) and its records checked as the whole reader checks them, and each block must be the
 * one its index entry describes (length, record count, first and last key).
 */
export async function* readBlockSpan(
  span: BlockSpan,
  chunks: AsyncIterator<Uint8Array>,
): AsyncGenerator<EncodedRecord[]> {
  const corrupt = (reason: string) => new SegmentCorruptError(span.key, reason);
  const bytes = new SegmentBytes(chunks, new Uint8Array(), corrupt);
  let after = span.after;
  for await (const { head, raw, number } of inflatedInBatches(corrupt, spanFrames(span, bytes))) {
    const entry = span.blocks[number - span.first - 1]!;
    const records = parseBlock(corrupt, { head, raw, after, number });
    if (
      records.length !== entry.count ||
      records[0]!.key !== entry.firstKey ||
      records[records.length - 1]!.key !== entry.lastKey
    )
      throw corrupt('the index does not describe the blocks');
    after = entry.lastKey;
    yield records;
  }
}

/** The frames of `span`'s blocks in batches, each where its index entry says it is. */
async function* spanFrames(span: BlockSpan, bytes: SegmentBytes): AsyncGenerator<FrameBatch> {
  for (let taken = 0; taken < span.blocks.length;) {
    const first = span.first + taken + 1;
    const frames = await takeFrames(
      bytes,
      first,
      Math.min(BLOCKS_PER_POOL_TASK, span.blocks.length - taken),
      (head, number) => {
        const entry = span.blocks[number - span.first - 1]!;
        if (head[0] !== BLOCK_TAG || entry.offset + FRAME_HEAD_BYTES + head.readUInt32BE(1) !== entry.end)
          throw bytes.corrupt(`block ${number} is not where the index says`);
      },
    );
    taken += frames.length;
    yield { frames, first };
  }
}
