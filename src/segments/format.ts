/**
 * The reference compactor's segment format: gzip of newline-delimited JSON — a header line,
 * records sorted strictly by key, and a footer with the record count, key range and a SHA-256
 * over the record lines. Readers stream it and check every property before trusting a record.
 */
import { quoted, TypedError } from '../errors';
import type { MergeRecord } from './blocks';
import { gzipOnPool } from './pool';
import { illFormedText } from './text';
import { isUtf8 } from 'node:buffer';
import { createHash, type Hash } from 'node:crypto';
import { Readable } from 'node:stream';
import { createGunzip, gzipSync } from 'node:zlib';
import { z } from 'zod';

export const SEGMENT_EXTENSION = 'mseg';
const HEADER = { format: 'metadata_segment', version: 1 } as const;
const HEADER_LINE = `${JSON.stringify(HEADER)}\n`;

/**
 * The longest line (header, record or footer, in uncompressed bytes) a segment may hold: a reader
 * fails on a longer one as corrupt, so its memory stays bounded whatever an input contains, and
 * the writer refuses to build one.
 */
export const MAX_SEGMENT_LINE_BYTES = 1 << 20;

/**
 * gzip level of written segments, chosen by measurement (docs/performance.md, "Codec levels"): level 3
 * compresses faster than the default 6 for 5–7 % more bytes, and decompresses as fast.
 */
const GZIP_LEVEL = 3;

/** One metadata record: the newest `seq` of a key wins; a tombstone deletes the key. */
export type SegmentRecord =
  | { readonly key: string; readonly seq: number; readonly value: string }
  | { readonly key: string; readonly seq: number; readonly tombstone: true };

/**
 * A segment's bytes fail its format's checks (header, order, a checksum): the job that read it stops, publishing
 * nothing.
 */
export class SegmentCorruptError extends TypedError {
  readonly failureType = 'SegmentCorrupt';
  constructor(
    readonly key: string,
    readonly reason: string,
  ) {
    super(`segment ${key} is corrupt: ${reason}`);
  }
}

const headerSchema = z.strictObject({ format: z.literal(HEADER.format), version: z.literal(HEADER.version) });
const footerSchema = z.strictObject({
  footer: z.strictObject({
    count: z.number().int().nonnegative(),
    first_key: z.string().nullable(),
    last_key: z.string().nullable(),
    sha256: z.string(),
  }),
});
type Footer = z.infer<typeof footerSchema>['footer'];

/**
 * A record line, written field by field: the same bytes as `JSON.stringify` of the record, without building an object
 * per line.
 */
function recordLine(record: SegmentRecord): string {
  const head = `{"key":${JSON.stringify(record.key)},"seq":${record.seq}`;
  return 'tombstone' in record ? `${head},"tombstone":true}\n` : `${head},"value":${JSON.stringify(record.value)}}\n`;
}

/** Bytes of the line that holds `record`, without its newline: what the line bound counts. */
export const recordLineBytes = (record: SegmentRecord): number => Buffer.byteLength(recordLine(record)) - 1;

/** What a builder of either format counts of the records added so far, whose keys must ascend. */
export abstract class SegmentTally {
  protected bytes = 0;
  protected records = 0;
  protected first: string | null = null;
  protected last: string | null = null;

  /** Uncompressed bytes of the records so far, in the format's own encoding: the measure of the target segment size. */
  get size(): number {
    return this.bytes;
  }
  get count(): number {
    return this.records;
  }
  get firstKey(): string | null {
    return this.first;
  }
  get lastKey(): string | null {
    return this.last;
  }

  /** Refuses a key that does not follow the last one added: a segment's keys are unique and ascending. */
  protected checkOrder(key: string): void {
    if (this.last !== null && !(key > this.last))
      throw new Error(`records must be added in strictly ascending key order: ${key} after ${this.last}`);
  }

  /** Counts a record of `key` that took `bytes`. */
  protected counted(key: string, bytes: number): void {
    this.bytes += bytes;
    this.records++;
    this.first ??= key;
    this.last = key;
  }
}

/** Builds one segment in memory; the caller bounds it with {@link SegmentBuilder.size}. */
export class SegmentBuilder extends SegmentTally {
  private text = '';

  /** A record still encoded (read from a v2 block) is decoded first. */
  add(record: MergeRecord): void {
    this.checkOrder(record.key);
    const line = recordLine('toRecord' in record ? record.toRecord() : record);
    const bytes = Buffer.byteLength(line);
    // The bound is on a line without its newline, as the reader counts it.
    if (bytes - 1 > MAX_SEGMENT_LINE_BYTES)
      throw new RangeError(
        `record ${JSON.stringify(record.key.slice(0, 100))} is ${bytes - 1} bytes as a line, more than a segment allows (${MAX_SEGMENT_LINE_BYTES})`,
      );
    this.text += line;
    this.counted(record.key, bytes);
  }

  encode(): Uint8Array {
    return gzipSync(this.uncompressed(), { level: GZIP_LEVEL });
  }

  /** {@link encode}, compressed on the compactor pool's threads while the caller goes on. */
  finish(): Promise<Uint8Array> {
    return gzipOnPool(this.uncompressed(), GZIP_LEVEL);
  }

  private uncompressed(): Buffer {
    const records = Buffer.from(this.text);
    const sha256 = createHash('sha256').update(records).digest('hex');
    const footer = Buffer.from(
      `${JSON.stringify({ footer: { count: this.records, first_key: this.first, last_key: this.last, sha256 } })}\n`,
    );
    // The footer holds two keys, so it can outgrow the bound when each record line is within it.
    if (footer.length - 1 > MAX_SEGMENT_LINE_BYTES)
      throw new RangeError(
        `the footer of a segment from ${JSON.stringify(this.first?.slice(0, 100))} is ${footer.length - 1} bytes, more than a segment allows (${MAX_SEGMENT_LINE_BYTES})`,
      );
    return Buffer.concat([Buffer.from(HEADER_LINE), records, footer]);
  }
}

/**
 * Streams the records of a v1 segment, a batch per decompressed chunk. The footer comes last, so a
 * consumer sees records before the checksum is verified; it must treat its output as unpublishable
 * until the stream ends.
 */
export async function* readGzipSegment(
  key: string,
  chunks: AsyncIterable<Uint8Array>,
): AsyncGenerator<SegmentRecord[]> {
  const parser = new SegmentParser(key);
  const gunzip = createGunzip();
  const source = Readable.from(chunks);
  source.on('error', (err) => gunzip.destroy(err));
  try {
    for await (const chunk of source.pipe(gunzip) as AsyncIterable<Buffer>) {
      const records = parser.push(chunk);
      if (records.length > 0) yield records;
    }
  } catch (err) {
    if (err instanceof SegmentCorruptError) throw err;
    if ((err as NodeJS.ErrnoException).code?.startsWith('Z_'))
      throw new SegmentCorruptError(key, `not gzip: ${(err as Error).message}`);
    throw err;
  }
  parser.end();
}

/**
 * Splits decompressed bytes into lines and checks each: the header first, then records in strictly
 * ascending key order, then the footer, which must describe them. Record lines are hashed as the
 * byte ranges they occupy in a chunk, not line by line: one hash call per line costs more than the parse.
 */
class SegmentParser {
  private readonly hash: Hash = createHash('sha256');
  /** The start of a line that the previous chunks did not finish; never longer than the line bound. */
  private partial: Buffer[] = [];
  private partialBytes = 0;
  private header = false;
  private footer: Footer | undefined;
  private count = 0;
  private first: string | null = null;
  private last: string | null = null;

  constructor(private readonly key: string) {}

  /**
   * The records of every line that `chunk` completes. Its bytes are checked as UTF-8 once for all its
   * whole lines; a line is checked alone only when its chunk failed.
   */
  push(chunk: Buffer): SegmentRecord[] {
    const records: SegmentRecord[] = [];
    let start = 0;
    let newline = chunk.indexOf(10);
    if (newline !== -1 && this.partialBytes > 0) {
      this.bounded(this.partialBytes + newline);
      const line = Buffer.concat([...this.partial, chunk.subarray(0, newline + 1)]);
      this.partial = [];
      this.partialBytes = 0;
      if (this.line(line, 0, line.length - 1, records, !isUtf8(line))) this.hash.update(line);
      start = newline + 1;
      newline = chunk.indexOf(10, start);
    }
    const utf8 = newline === -1 || isUtf8(chunk.subarray(start, chunk.lastIndexOf(10) + 1));
    let hashFrom = start;
    let hashTo = start;
    for (; newline !== -1; start = newline + 1, newline = chunk.indexOf(10, start)) {
      this.bounded(newline - start);
      if (this.line(chunk, start, newline, records, !utf8)) {
        hashTo = newline + 1;
      } else {
        this.hash.update(chunk.subarray(hashFrom, hashTo));
        hashFrom = hashTo = newline + 1;
      }
    }
    this.hash.update(chunk.subarray(hashFrom, hashTo));
    if (start < chunk.length) {
      this.bounded(this.partialBytes + chunk.length - start);
      this.partial.push(chunk.subarray(start));
      this.partialBytes += chunk.length - start;
    }
    return records;
  }

  /** Checks what only the whole segment can show: its header and footer exist and the footer describes the records. */
  end(): void {
    if (this.partialBytes > 0) {
      // A last line without its newline is still read; if it is a record, the footer is missing below.
      const line = Buffer.concat(this.partial);
      const records: SegmentRecord[] = [];
      if (this.line(line, 0, line.length, records, !isUtf8(line)))
        throw this.corrupt('no footer: the segment is truncated');
    }
    if (!this.header) throw this.corrupt('empty segment');
    const footer = this.footer;
    if (!footer) throw this.corrupt('no footer: the segment is truncated');
    if (footer.count !== this.count || footer.first_key !== this.first || footer.last_key !== this.last)
      throw this.corrupt('footer does not describe the records');
    if (footer.sha256 !== this.hash.digest('hex')) throw this.corrupt('checksum does not match the records');
  }

  /**
   * Reads the line `bytes[start, end)`; returns whether it was a record (the footer's checksum covers
   * record lines only). `maybeNotUtf8`: its bytes are checked as UTF-8 first. Positional, not an
   * options object: it runs once per record line, where an options object would allocate per record.
   */
  private line(bytes: Buffer, start: number, end: number, records: SegmentRecord[], maybeNotUtf8: boolean): boolean {
    if (this.footer) throw this.corrupt('data after the footer');
    const value = this.parse(bytes.toString('utf8', start, end));
    // Decoding replaced what is not UTF-8 with U+FFFD: refused, never read as another character.
    if (maybeNotUtf8 && !isUtf8(bytes.subarray(start, end))) {
      const record = asSegmentRecord(value);
      throw this.corrupt(
        record ? `record ${this.count + 1} (key ${quoted(record.key)}) is not UTF-8` : 'a line is not UTF-8',
      );
    }
    if (!this.header) {
      if (!headerSchema.safeParse(value).success) throw this.corrupt('missing or unknown header');
      this.header = true;
      return false;
    }
    if (typeof value === 'object' && value !== null && 'footer' in value) {
      const footer = footerSchema.safeParse(value);
      if (!footer.success) throw this.corrupt('the footer is malformed');
      this.footer = footer.data.footer;
      return false;
    }
    const record = asSegmentRecord(value);
    if (!record) throw this.corrupt(`record ${this.count + 1} is malformed`);
    // JSON may escape a lone surrogate (`\ud800`), which no encoding of text holds.
    const illFormed = illFormedText(record);
    if (illFormed !== undefined)
      throw this.corrupt(`record ${this.count + 1} (key ${quoted(record.key)}) is not well-formed text: ${illFormed}`);
    if (this.last !== null && !(record.key > this.last))
      throw this.corrupt(`keys out of order at ${JSON.stringify(record.key)}`);
    this.count++;
    this.first ??= record.key;
    this.last = record.key;
    records.push(record);
    return true;
  }

  private bounded(lineBytes: number): void {
    if (lineBytes > MAX_SEGMENT_LINE_BYTES) throw this.corrupt(`a line is longer than ${MAX_SEGMENT_LINE_BYTES} bytes`);
  }

  private parse(line: string): unknown {
    try {
      return JSON.parse(line);
    } catch {
      throw this.corrupt('a line is not JSON');
    }
  }

  private corrupt(reason: string): SegmentCorruptError {
    return new SegmentCorruptError(this.key, reason);
  }
}

/**
 * The parsed line as a record if it has exactly the record's fields: a non-empty key, a safe
 * non-negative integer seq, and either a string value or `tombstone: true`. Checked by hand: a
 * schema per record was the compactor's largest cost, and this is the whole of what it checked.
 */
export function asSegmentRecord(value: unknown): SegmentRecord | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const r = value as { key?: unknown; seq?: unknown; value?: unknown; tombstone?: unknown };
  if (typeof r.key !== 'string' || r.key === '' || !Number.isSafeInteger(r.seq) || (r.seq as number) < 0)
    return undefined;
  let fields = 0;
  for (const field in r) if (Object.hasOwn(r, field)) fields++;
  if (fields !== 3) return undefined;
  if (typeof r.value === 'string' || r.tombstone === true) return r as SegmentRecord;
  return undefined;
}
