/**
 * Segment format v2: records in blocks, each compressed with zstd and checksummed, and a block index
 * at the end so a reader holding the bytes seeks to a key's block. Layout (integers big-endian):
 *
 *     header  "MSEG" 00 00 00 02
 *     block*  'B' u32 compressed length, u32 raw length, u32 record count, u32 CRC-32, zstd frame
 *     index   'I' u32 index length, u32 CRC-32 of the index, index
 *     trailer u64 offset of the index frame, "MSEG-END"
 *
 * A block's CRC-32 covers its raw length, record count and compressed bytes. Its raw records, sorted
 * strictly by key (UTF-16 code units, as JavaScript compares strings, like v1): varint key length,
 * key (UTF-8), varint seq, a flag byte (0 a value, 1 a tombstone), and for a value a varint length
 * and the value (UTF-8). The index:
 * varint block count, then per block its varint offset, varint record count, and its first and last
 * keys (varint length, UTF-8). Varints are unsigned LEB128 up to 2^53.
 */
import { isUtf8 } from 'node:buffer';
import { constants, crc32, zstdCompressSync, zstdDecompressSync, type ZstdOptions } from 'node:zlib';
import { quoted } from '../errors';
import { zstdCompressOnPool, zstdDecompressOnPool } from './codec-pool';
import { SegmentCorruptError, SegmentTally, type SegmentRecord } from './format';

const BLOCK_HEADER = Buffer.from([0x4d, 0x53, 0x45, 0x47, 0, 0, 0, 2]);
const TRAILER_MAGIC = Buffer.from('MSEG-END');
const TRAILER_BYTES = 16;
const BLOCK_TAG = 0x42;
const INDEX_TAG = 0x49;
const FRAME_HEAD_BYTES = 17;
const INDEX_HEAD_BYTES = 9;

/**
 * Raw bytes at which the writer closes a block: small enough that a lookup decompresses little, large enough that zstd
 * finds its matches.
 */
const BLOCK_TARGET_BYTES = 128 * 1024;

/**
 * The most raw bytes of one record (key and value, UTF-8) a v2 segment holds (the writer's bound,
 * records.ts, is narrower: what every format holds). A block is closed at {@link BLOCK_TARGET_BYTES},
 * so it holds at most this much more.
 */
export const MAX_BLOCK_RECORD_BYTES = 1 << 20;

/**
 * The most raw bytes a reader accepts in one block (and its index): its memory stays bounded whatever an input claims.
 */
const MAX_BLOCK_BYTES = BLOCK_TARGET_BYTES + MAX_BLOCK_RECORD_BYTES + 64;
const MAX_INDEX_BYTES = 64 << 20;

/**
 * zstd level of written blocks: in 128 KiB blocks level 1 made smaller output than level 3 on both benchmark shapes
 * (`bench/compaction.ts --phases gzip-levels`, docs/performance.md).
 */
const ZSTD_LEVEL = 1;

/**
 * Whether `bytes` (at least the first of them) start like a v2 segment, not v1 (gzip: 1f 8b); the v2 reader checks the
 * rest of the header.
 */
export const isBlockSegment = (bytes: Uint8Array): boolean => bytes[0] === BLOCK_HEADER[0];

/**
 * A record of a v2 block as read: its key decoded (merges compare keys), its value left as bytes of
 * the block until asked for. A v2 writer copies its encoding as it is, so a record that moves from a
 * v2 input to a v2 output is never decoded nor encoded again.
 */
export class EncodedRecord {
  // Positional, not an options object: one is made per record read, and an options object would be a second allocation
  // each.
  constructor(
    readonly key: string,
    readonly seq: number,
    readonly isTombstone: boolean,
    /** The decompressed block holding the record: [start, end) is its encoding, [valueStart, end) its value (UTF-8). */
    private readonly block: Buffer,
    private readonly start: number,
    private readonly valueStart: number,
    private readonly end: number,
  ) {}

  /** Bytes of the record's encoding in a block. */
  get encodedBytes(): number {
    return this.end - this.start;
  }

  /** Copies the record's encoding to `target` at `at`; returns the offset after it. */
  copyTo(target: Buffer, at: number): number {
    return at + this.block.copy(target, at, this.start, this.end);
  }

  toRecord(): SegmentRecord {
    const { key, seq } = this;
    return this.isTombstone
      ? { key, seq, tombstone: true }
      : { key, seq, value: this.block.toString('utf8', this.valueStart, this.end) };
  }
}

/** A record as a merge moves it: decoded (v1, or written by a caller), or still encoded (read from v2). */
export type MergeRecord = SegmentRecord | EncodedRecord;

export const isTombstone = (record: MergeRecord): boolean =>
  record instanceof EncodedRecord ? record.isTombstone : 'tombstone' in record;

interface BlockEntry {
  readonly offset: number;
  readonly count: number;
  readonly firstKey: string;
  readonly lastKey: string;
}

/**
 * A closed block: its raw records to compress on this thread, or their compression running in the background, which
 * took them.
 */
interface ClosedBlock {
  readonly count: number;
  readonly firstKey: string;
  readonly lastKey: string;
  readonly rawLength: number;
  readonly bytes: { readonly raw: Buffer } | { readonly compressed: Promise<Buffer> };
}

const ZSTD_OPTIONS = { params: { [constants.ZSTD_c_compressionLevel]: ZSTD_LEVEL } };

/**
 * Builds one v2 segment in memory, block by block; the same interface as the v1 `SegmentBuilder`.
 * With `background`, each block is compressed on the block codec pool (codec-pool.ts) as soon as it closes (other
 * cores, while this thread goes on filling the next block), and {@link finish} waits for them.
 */
export class BlockSegmentBuilder extends SegmentTally {
  private readonly blocks: ClosedBlock[] = [];
  private raw = Buffer.allocUnsafe(BLOCK_TARGET_BYTES + 1024);
  private rawBytes = 0;
  private blockCount = 0;
  private blockFirst: string | null = null;

  constructor(private readonly options: { readonly background?: boolean } = {}) {
    super();
  }

  add(record: MergeRecord): void {
    const key = record.key;
    this.checkOrder(key);
    const start = this.rawBytes;
    const at = record instanceof EncodedRecord ? this.copyEncoded(record) : this.encodeRecord(record);
    this.rawBytes = at;
    this.blockCount++;
    this.blockFirst ??= key;
    this.counted(key, at - start);
    if (this.rawBytes >= BLOCK_TARGET_BYTES) this.closeBlock();
  }

  /** Room for `need` more bytes in the block being filled. */
  private reserve(need: number): Buffer {
    if (this.rawBytes + need > this.raw.length) {
      const grown = Buffer.allocUnsafe(Math.max(this.raw.length * 2, this.rawBytes + need));
      this.raw.copy(grown, 0, 0, this.rawBytes);
      this.raw = grown;
    }
    return this.raw;
  }

  /** A record read from a v2 block, whose reader bounded its size: its bytes as they are. */
  private copyEncoded(record: EncodedRecord): number {
    return record.copyTo(this.reserve(record.encodedBytes), this.rawBytes);
  }

  private encodeRecord(record: SegmentRecord): number {
    const key = record.key;
    const value = 'tombstone' in record ? undefined : record.value;
    const keyBytes = Buffer.byteLength(key);
    const valueBytes = value === undefined ? 0 : Buffer.byteLength(value);
    if (keyBytes + valueBytes > MAX_BLOCK_RECORD_BYTES) {
      throw new RangeError(
        `record ${JSON.stringify(key.slice(0, 100))} is ${keyBytes + valueBytes} bytes of key and value, more than a segment allows (${MAX_BLOCK_RECORD_BYTES})`,
      );
    }
    const raw = this.reserve(keyBytes + valueBytes + 30);
    let at = writeVarint(raw, this.rawBytes, keyBytes);
    at += raw.write(key, at, 'utf8');
    at = writeVarint(raw, at, record.seq);
    if (value === undefined) {
      raw[at++] = 1;
    } else {
      raw[at++] = 0;
      at = writeVarint(raw, at, valueBytes);
      at += raw.write(value, at, 'utf8');
    }
    return at;
  }

  /**
   * The segment's bytes, compressed here (on this thread); a builder compressing in the background has only {@link
   * finish}.
   */
  encode(): Uint8Array {
    if (this.blockCount > 0) this.closeBlock();
    return this.assemble(
      this.blocks.map(({ bytes }) => {
        if (!('raw' in bytes)) throw new Error('a segment compressed in the background is finished, not encoded');
        return zstdCompressSync(bytes.raw, ZSTD_OPTIONS);
      }),
    );
  }

  /** The segment's bytes once every block's compression (in the background, when so built) is done. */
  async finish(): Promise<Uint8Array> {
    if (this.blockCount > 0) this.closeBlock();
    return this.assemble(
      await Promise.all(
        this.blocks.map(({ bytes }) => ('raw' in bytes ? zstdCompressSync(bytes.raw, ZSTD_OPTIONS) : bytes.compressed)),
      ),
    );
  }

  private closeBlock(): void {
    const rawLength = this.rawBytes;
    // The block's own copy (the builder's buffer fills the next block meanwhile); in the background it
    // is a buffer of its own, handed over to the codec pool, which then needs no copy of its own.
    const raw = this.options.background ? Buffer.allocUnsafeSlow(rawLength) : Buffer.allocUnsafe(rawLength);
    this.raw.copy(raw, 0, 0, rawLength);
    let bytes: ClosedBlock['bytes'] = { raw };
    if (this.options.background) {
      const compressed = zstdCompressOnPool(raw, ZSTD_LEVEL, { handOver: true });
      // Handled here so a segment abandoned before finish() leaves no unhandled rejection; finish() still sees the
      // failure.
      compressed.catch(() => undefined);
      bytes = { compressed };
    }
    this.blocks.push({ count: this.blockCount, firstKey: this.blockFirst!, lastKey: this.last!, rawLength, bytes });
    this.rawBytes = 0;
    this.blockCount = 0;
    this.blockFirst = null;
  }

  private assemble(compressed: readonly Buffer[]): Buffer {
    const parts: Buffer[] = [BLOCK_HEADER];
    const entries: BlockEntry[] = [];
    let offset = BLOCK_HEADER.length;
    compressed.forEach((bytes, i) => {
      const { count, firstKey, lastKey } = this.blocks[i]!;
      const head = Buffer.allocUnsafe(FRAME_HEAD_BYTES);
      head[0] = BLOCK_TAG;
      head.writeUInt32BE(bytes.length, 1);
      head.writeUInt32BE(this.blocks[i]!.rawLength, 5);
      head.writeUInt32BE(count, 9);
      head.writeUInt32BE(crc32(bytes, crc32(head.subarray(5, 13))), 13);
      entries.push({ offset, count, firstKey, lastKey });
      parts.push(head, bytes);
      offset += head.length + bytes.length;
    });
    const index = encodeIndex(entries);
    const head = Buffer.allocUnsafe(INDEX_HEAD_BYTES);
    head[0] = INDEX_TAG;
    head.writeUInt32BE(index.length, 1);
    head.writeUInt32BE(crc32(index), 5);
    const trailer = Buffer.allocUnsafe(TRAILER_BYTES);
    trailer.writeBigUInt64BE(BigInt(offset), 0);
    TRAILER_MAGIC.copy(trailer, 8);
    return Buffer.concat([...parts, head, index, trailer]);
  }
}

function writeVarint(buf: Buffer, at: number, n: number): number {
  while (n >= 0x80) {
    buf[at++] = (n % 0x80) | 0x80;
    n = Math.floor(n / 0x80);
  }
  buf[at++] = n;
  return at;
}

function encodeIndex(entries: readonly BlockEntry[]): Buffer {
  const parts: Buffer[] = [];
  const varint = (n: number) => {
    const b = Buffer.allocUnsafe(8);
    parts.push(b.subarray(0, writeVarint(b, 0, n)));
  };
  const text = (s: string) => {
    const b = Buffer.from(s);
    varint(b.length);
    parts.push(b);
  };
  varint(entries.length);
  for (const e of entries) {
    varint(e.offset);
    varint(e.count);
    text(e.firstKey);
    text(e.lastKey);
  }
  return Buffer.concat(parts);
}

/** Reads fields of a buffer in order; any read past `end` is corruption, named by `corrupt`. */
class Cursor {
  at: number;
  // Positional, not an options object: a cursor is made per block and index read, beside the per-record parse it
  // drives.
  constructor(
    readonly buf: Buffer,
    start: number,
    readonly end: number,
    private readonly corrupt: (reason: string) => SegmentCorruptError,
    private readonly what: string,
  ) {
    this.at = start;
  }

  varint(): number {
    const buf = this.buf;
    let n = 0;
    let scale = 1;
    for (;;) {
      if (this.at >= this.end || scale > 2 ** 49) throw this.corrupt(`${this.what} is malformed`);
      const byte = buf[this.at++]!;
      n += (byte & 0x7f) * scale;
      if (byte < 0x80) return n;
      scale *= 0x80;
    }
  }

  text(): string {
    const start = this.skipText();
    return this.buf.toString('utf8', start, this.at);
  }

  /** Steps over a length-prefixed text; returns where its bytes start. */
  skipText(): number {
    const length = this.varint();
    const start = this.at;
    if (length > this.end - start) throw this.corrupt(`${this.what} is malformed`);
    this.at = start + length;
    return start;
  }

  byte(): number {
    if (this.at >= this.end) throw this.corrupt(`${this.what} is malformed`);
    return this.buf[this.at++]!;
  }
}

/**
 * A block frame's head and compressed bytes, checked against its CRC-32 and the block bound: what may be decompressed.
 */
function checkedFrame(
  corrupt: (reason: string) => SegmentCorruptError,
  head: Buffer,
  compressed: Buffer,
  number: number,
): ZstdOptions {
  const rawLength = head.readUInt32BE(5);
  if (crc32(compressed, crc32(head.subarray(5, 13))) !== head.readUInt32BE(13))
    throw corrupt(`block ${number} does not match its checksum`);
  if (rawLength > MAX_BLOCK_BYTES)
    throw corrupt(`block ${number} claims ${rawLength} bytes, more than a block may hold`);
  return { maxOutputLength: Math.max(rawLength, 1) };
}

/** Decompresses a checked frame on this thread. */
function inflateBlock(
  corrupt: (reason: string) => SegmentCorruptError,
  head: Buffer,
  compressed: Buffer,
  number: number,
): Buffer {
  const options = checkedFrame(corrupt, head, compressed, number);
  try {
    return zstdDecompressSync(compressed, options);
  } catch (err) {
    throw corrupt(`block ${number} is not zstd: ${(err as Error).message}`);
  }
}

/** Decompresses a checked frame on the block codec pool. */
async function inflateBlockInBackground(
  corrupt: (reason: string) => SegmentCorruptError,
  head: Buffer,
  compressed: Buffer,
  number: number,
): Promise<Buffer> {
  const options = checkedFrame(corrupt, head, compressed, number);
  try {
    return await zstdDecompressOnPool(compressed, options.maxOutputLength!);
  } catch (err) {
    // The block or the pool failed. Decompressed again on this thread, a block that fails is corrupt; one that does
    // not leaves the pool's error as it is: a codec thread that died says nothing of the data, and its attempt may be
    // retried, where a corrupt segment ends the job.
    inflateBlock(corrupt, head, compressed, number);
    throw err;
  }
}

/**
 * Where {@link parseBlock} zeroes what is not text in a copy of a block: one buffer for every block,
 * reused (a block's own copy cost the reader a third of its time in allocations); parsing never
 * awaits, so no two blocks share it at once.
 */
let textScratch = Buffer.alloc(0);

/**
 * A block as read, for {@link parseBlock}: its frame head, its decompressed bytes, the key before it, its number from
 * 1.
 */
interface BlockRead {
  readonly head: Buffer;
  readonly raw: Buffer;
  readonly after: string | null;
  readonly number: number;
}

/**
 * The records of a block's raw bytes, checked: the length its head gave, keys sorted strictly after
 * `after`, no record larger than a writer makes, every key and value UTF-8, nothing left over.
 * Values stay encoded.
 */
function parseBlock(
  corrupt: (reason: string) => SegmentCorruptError,
  { head, raw, after, number }: BlockRead,
): EncodedRecord[] {
  const count = head.readUInt32BE(9);
  if (raw.length !== head.readUInt32BE(5))
    throw corrupt(`block ${number} decompresses to ${raw.length} bytes, not ${head.readUInt32BE(5)}`);
  const cursor = new Cursor(raw, 0, raw.length, corrupt, `block ${number}`);
  const records = new Array<EncodedRecord>(count);
  // The block's keys and values with every other byte zeroed: UTF-8 exactly when each of them is
  // (a zero is a whole character, and at least one stands between two texts), checked in one call.
  if (textScratch.length < raw.length)
    textScratch = Buffer.allocUnsafeSlow(Math.max(raw.length, 2 * BLOCK_TARGET_BYTES));
  const text = textScratch.subarray(0, raw.length);
  raw.copy(text);
  let last = after;
  for (let i = 0; i < count; i++) {
    const start = cursor.at;
    const keyStart = cursor.skipText();
    const keyEnd = cursor.at;
    const key = raw.toString('utf8', keyStart, keyEnd);
    const seq = cursor.varint();
    const flag = cursor.byte();
    if (key === '' || !Number.isSafeInteger(seq) || flag > 1)
      throw corrupt(`block ${number} record ${i + 1} is malformed`);
    if (last !== null && !(key > last)) throw corrupt(`keys out of order at ${JSON.stringify(key)}`);
    const valueStart = flag === 1 ? cursor.at : cursor.skipText();
    // A record is copied to outputs as it is: it must fit the bound a writer checks.
    if (keyEnd - keyStart + cursor.at - valueStart > MAX_BLOCK_RECORD_BYTES)
      throw corrupt(`block ${number} record ${i + 1} is larger than a segment allows`);
    for (let at = start; at < keyStart; at++) text[at] = 0;
    for (let at = keyEnd; at < valueStart; at++) text[at] = 0;
    records[i] = new EncodedRecord(key, seq, flag === 1, raw, start, valueStart, cursor.at);
    last = key;
  }
  if (cursor.at !== raw.length) throw corrupt(`block ${number} holds more than its ${count} records`);
  // Decoding would replace what is not UTF-8 with U+FFFD: refused, naming the first record that holds any.
  if (!isUtf8(text)) {
    for (let i = 0, at = 0; ; at += records[i++]!.encodedBytes) {
      if (!isUtf8(text.subarray(at, at + records[i]!.encodedBytes)))
        throw corrupt(`block ${number} record ${i + 1} (key ${quoted(records[i]!.key)}) is not UTF-8`);
    }
  }
  return records;
}

/**
 * Reads a v2 segment from its chunks, block by block: each block's records are yielded once its
 * checksum has passed, and the index at the end must describe the blocks read (a truncated or
 * spliced segment fails there). A block is decompressed on the block codec pool while the one before
 * it is consumed. Memory: two blocks and the index.
 */
export async function* readBlockSegment(
  key: string,
  chunks: AsyncIterator<Uint8Array>,
  first: Uint8Array,
): AsyncGenerator<EncodedRecord[]> {
  const corrupt = (reason: string) => new SegmentCorruptError(key, reason);
  const bytes = new SegmentBytes(chunks, first, corrupt);
  const { queue } = bytes;
  await bytes.need(BLOCK_HEADER.length, 'the header');
  if (!BLOCK_HEADER.equals(queue.take(BLOCK_HEADER.length))) throw corrupt('missing or unknown header');
  const seen: BlockEntry[] = [];
  let offset = BLOCK_HEADER.length;
  let last: string | null = null;
  /**
   * The block read before the current one, decompressing in the background while the next is read and the consumer
   * works.
   */
  let pending: { head: Buffer; raw: Promise<Buffer> } | undefined;
  const parsePending = async (): Promise<EncodedRecord[]> => {
    const { head, raw } = pending!;
    pending = undefined;
    const number = seen.length + 1;
    const records = parseBlock(corrupt, { head, raw: await raw, after: last, number });
    if (records.length === 0) throw corrupt(`block ${number} is empty`);
    last = records[records.length - 1]!.key;
    seen.push({ offset, count: records.length, firstKey: records[0]!.key, lastKey: last });
    offset += FRAME_HEAD_BYTES + head.readUInt32BE(1);
    return records;
  };
  for (;;) {
    await bytes.need(1, 'a frame');
    const tag = queue.peekByte();
    if (tag === INDEX_TAG) break;
    const number = seen.length + (pending ? 2 : 1);
    if (tag !== BLOCK_TAG) throw corrupt(`unknown frame after block ${number - 1}`);
    await bytes.need(FRAME_HEAD_BYTES, `block ${number}`);
    const head = queue.take(FRAME_HEAD_BYTES);
    const length = head.readUInt32BE(1);
    if (length > MAX_BLOCK_BYTES + 1024)
      throw corrupt(`block ${number} claims ${length} compressed bytes, more than a block may hold`);
    await bytes.need(length, `block ${number}`);
    const raw = inflateBlockInBackground(corrupt, head, queue.take(length), number);
    // Handled here too: a reader stopped early leaves this block's failure to nobody.
    raw.catch(() => undefined);
    const ready = pending ? await parsePending() : undefined;
    pending = { head, raw };
    if (ready) yield ready;
  }
  if (pending) yield await parsePending();
  await checkIndexDescribes(bytes, seen, offset);
}

/** A segment's bytes as its reader takes them: a queue, refilled from the segment's chunks on demand. */
class SegmentBytes {
  readonly queue: ByteQueue;
  private done = false;

  constructor(
    private readonly chunks: AsyncIterator<Uint8Array>,
    first: Uint8Array,
    readonly corrupt: (reason: string) => SegmentCorruptError,
  ) {
    this.queue = new ByteQueue(first);
  }

  /** Makes `n` bytes available, or returns false at the end of the stream. */
  async fill(n: number): Promise<boolean> {
    while (this.queue.length < n) {
      if (this.done) return false;
      const next = await this.chunks.next();
      if (next.done) this.done = true;
      else this.queue.push(next.value);
    }
    return true;
  }

  /** Makes `n` bytes available; the end of the stream before them is a segment truncated in `what`. */
  async need(n: number, what: string): Promise<void> {
    if (!(await this.fill(n))) throw this.corrupt(`truncated in ${what}`);
  }
}

/**
 * Reads the index and trailer that end a segment, after its last block at `indexAt`: checksum,
 * trailer, nothing after it, and an index that describes exactly the blocks read (`seen`).
 */
async function checkIndexDescribes(bytes: SegmentBytes, seen: readonly BlockEntry[], indexAt: number): Promise<void> {
  const { queue, corrupt } = bytes;
  await bytes.need(INDEX_HEAD_BYTES, 'the index');
  const head = queue.take(INDEX_HEAD_BYTES);
  const indexLength = head.readUInt32BE(1);
  if (indexLength > MAX_INDEX_BYTES) throw corrupt('the index is longer than a segment may hold');
  await bytes.need(indexLength + TRAILER_BYTES, 'the index');
  const index = queue.take(indexLength);
  if (crc32(index) !== head.readUInt32BE(5)) throw corrupt('the index does not match its checksum');
  const trailer = queue.take(TRAILER_BYTES);
  if (!TRAILER_MAGIC.equals(trailer.subarray(8)) || Number(trailer.readBigUInt64BE(0)) !== indexAt)
    throw corrupt('the trailer is malformed');
  if (queue.length > 0 || (await bytes.fill(1))) throw corrupt('data after the trailer');
  const entries = decodeIndex(corrupt, index, 0, index.length);
  const same =
    entries.length === seen.length &&
    entries.every(
      (e, i) =>
        e.offset === seen[i]!.offset &&
        e.count === seen[i]!.count &&
        e.firstKey === seen[i]!.firstKey &&
        e.lastKey === seen[i]!.lastKey,
    );
  if (!same) throw corrupt('the index does not describe the blocks');
}

function decodeIndex(
  corrupt: (reason: string) => SegmentCorruptError,
  buf: Buffer,
  start: number,
  end: number,
): BlockEntry[] {
  const cursor = new Cursor(buf, start, end, corrupt, 'the index');
  const count = cursor.varint();
  if (count > end - start) throw corrupt('the index is malformed');
  const entries: BlockEntry[] = [];
  for (let i = 0; i < count; i++)
    entries.push({ offset: cursor.varint(), count: cursor.varint(), firstKey: cursor.text(), lastKey: cursor.text() });
  if (cursor.at !== end) throw corrupt('the index is malformed');
  return entries;
}

/**
 * The record of `wanted` in the whole v2 segment `bytes`, or undefined: the trailer leads to the
 * index, whose checksum is verified, and a binary search of it to the one block that may hold the
 * key; that block is verified and decoded, no other is read.
 */
export function lookupInBlockSegment(key: string, bytes: Uint8Array, wanted: string): SegmentRecord | undefined {
  const corrupt = (reason: string) => new SegmentCorruptError(key, reason);
  const buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (
    !BLOCK_HEADER.equals(buf.subarray(0, BLOCK_HEADER.length)) ||
    buf.length < BLOCK_HEADER.length + INDEX_HEAD_BYTES + TRAILER_BYTES
  )
    throw corrupt('missing or unknown header');
  const trailer = buf.subarray(buf.length - TRAILER_BYTES);
  const indexAt = Number(trailer.readBigUInt64BE(0));
  if (
    !TRAILER_MAGIC.equals(trailer.subarray(8)) ||
    indexAt < BLOCK_HEADER.length ||
    indexAt + INDEX_HEAD_BYTES > buf.length - TRAILER_BYTES ||
    buf[indexAt] !== INDEX_TAG
  )
    throw corrupt('the trailer is malformed');
  const indexLength = buf.readUInt32BE(indexAt + 1);
  const indexStart = indexAt + INDEX_HEAD_BYTES;
  if (indexStart + indexLength !== buf.length - TRAILER_BYTES) throw corrupt('the trailer is malformed');
  if (crc32(buf.subarray(indexStart, indexStart + indexLength)) !== buf.readUInt32BE(indexAt + 5))
    throw corrupt('the index does not match its checksum');
  const entries = decodeIndex(corrupt, buf, indexStart, indexStart + indexLength);
  // The first block whose last key is not before the wanted one: the only block that may hold it.
  let lo = 0;
  let hi = entries.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (entries[mid]!.lastKey < wanted) lo = mid + 1;
    else hi = mid;
  }
  const entry = entries[lo];
  if (entry === undefined || wanted < entry.firstKey) return undefined;
  const at = entry.offset;
  if (at + FRAME_HEAD_BYTES > indexAt || buf[at] !== BLOCK_TAG)
    throw corrupt(`block ${lo + 1} is not where the index says`);
  const head = buf.subarray(at, at + FRAME_HEAD_BYTES);
  const length = head.readUInt32BE(1);
  if (at + FRAME_HEAD_BYTES + length > indexAt) throw corrupt(`block ${lo + 1} is not where the index says`);
  const raw = inflateBlock(corrupt, head, buf.subarray(at + FRAME_HEAD_BYTES, at + FRAME_HEAD_BYTES + length), lo + 1);
  const records = parseBlock(corrupt, { head, raw, after: null, number: lo + 1 });
  if (
    records.length !== entry.count ||
    records[0]?.key !== entry.firstKey ||
    records[records.length - 1]?.key !== entry.lastKey
  )
    throw corrupt('the index does not describe the blocks');
  return records.find((r) => r.key === wanted)?.toRecord();
}

/**
 * Chunks of a stream, taken from the front in byte counts: a take within one chunk shares its memory, one across chunks
 * copies.
 */
class ByteQueue {
  private chunks: Buffer[] = [];
  private head = 0;
  length = 0;

  constructor(first: Uint8Array) {
    this.push(first);
  }

  push(chunk: Uint8Array): void {
    if (chunk.length === 0) return;
    this.chunks.push(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength));
    this.length += chunk.length;
  }

  peekByte(): number {
    return this.chunks[0]![this.head]!;
  }

  take(n: number): Buffer {
    if (n === 0) return Buffer.alloc(0);
    const first = this.chunks[0]!;
    this.length -= n;
    if (first.length - this.head >= n) {
      const out = first.subarray(this.head, this.head + n);
      this.head += n;
      if (this.head === first.length) {
        this.chunks.shift();
        this.head = 0;
      }
      return out;
    }
    const out = Buffer.allocUnsafe(n);
    let filled = 0;
    while (filled < n) {
      const chunk = this.chunks[0]!;
      const copied = chunk.copy(out, filled, this.head, Math.min(chunk.length, this.head + n - filled));
      filled += copied;
      this.head += copied;
      if (this.head === chunk.length) {
        this.chunks.shift();
        this.head = 0;
      }
    }
    return out;
  }
}
