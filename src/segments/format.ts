/**
 * The reference compactor's segment format: gzip of newline-delimited JSON — a header line,
 * records sorted strictly by key, and a footer with the record count, key range and a SHA-256
 * over the record lines. Readers stream it and check every property before trusting a record.
 */
import { createHash } from 'node:crypto';
import { createInterface } from 'node:readline';
import { Readable } from 'node:stream';
import { createGunzip, gzipSync } from 'node:zlib';
import { z } from 'zod';

export const SEGMENT_EXTENSION = 'mseg';
const HEADER = { format: 'metadata_segment', version: 1 } as const;

/** One metadata record: the newest `seq` of a key wins; a tombstone deletes the key. */
export type SegmentRecord =
  | { readonly key: string; readonly seq: number; readonly value: string }
  | { readonly key: string; readonly seq: number; readonly tombstone: true };

export class SegmentCorruptError extends Error {
  override readonly name = 'SegmentCorruptError';
  constructor(
    readonly key: string,
    readonly reason: string,
  ) {
    super(`segment ${key} is corrupt: ${reason}`);
  }
}

const seq = z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER);
// One object schema with both optional, then an exactly-one check: a union would build a failure for every tombstone.
const recordSchema = z
  .strictObject({ key: z.string().min(1), seq, value: z.string().optional(), tombstone: z.literal(true).optional() })
  .refine((r) => (r.value === undefined) !== (r.tombstone === undefined), 'a record has either a value or a tombstone');
const headerSchema = z.strictObject({ format: z.literal(HEADER.format), version: z.literal(HEADER.version) });
const footerSchema = z.strictObject({
  footer: z.strictObject({ count: z.number().int().nonnegative(), first_key: z.string().nullable(), last_key: z.string().nullable(), sha256: z.string() }),
});

/** Builds one segment in memory; the caller bounds it with {@link SegmentBuilder.size}. */
export class SegmentBuilder {
  private readonly lines: string[] = [];
  private bytes = 0;
  private first: string | null = null;
  private last: string | null = null;

  /** Uncompressed bytes of the records so far: the measure of the target segment size. */
  get size(): number {
    return this.bytes;
  }
  get count(): number {
    return this.lines.length;
  }
  get firstKey(): string | null {
    return this.first;
  }
  get lastKey(): string | null {
    return this.last;
  }

  add(record: SegmentRecord): void {
    if (this.last !== null && !(record.key > this.last)) throw new Error(`records must be added in strictly ascending key order: ${record.key} after ${this.last}`);
    const line = `${JSON.stringify(record)}\n`;
    this.lines.push(line);
    this.bytes += Buffer.byteLength(line);
    this.first ??= record.key;
    this.last = record.key;
  }

  encode(): Uint8Array {
    const records = this.lines.join('');
    const sha256 = createHash('sha256').update(records).digest('hex');
    const footer = { footer: { count: this.lines.length, first_key: this.first, last_key: this.last, sha256 } };
    return gzipSync(`${JSON.stringify(HEADER)}\n${records}${JSON.stringify(footer)}\n`);
  }
}

export function encodeSegment(records: Iterable<SegmentRecord>): Uint8Array {
  const builder = new SegmentBuilder();
  for (const r of records) builder.add(r);
  return builder.encode();
}

/**
 * Streams the records of a segment. The footer comes last, so a consumer sees records before
 * the checksum is verified; it must treat its output as unpublishable until the stream ends.
 */
export async function* readSegment(key: string, chunks: AsyncIterable<Uint8Array>): AsyncGenerator<SegmentRecord> {
  const corrupt = (reason: string) => new SegmentCorruptError(key, reason);
  const gunzip = createGunzip();
  const source = Readable.from(chunks);
  source.on('error', (err) => gunzip.destroy(err));
  const lines = createInterface({ input: source.pipe(gunzip), crlfDelay: Infinity });
  const hash = createHash('sha256');
  // Record lines are hashed in batches: one hash call per line costs more than the parse.
  let unhashed = '';
  let header = false;
  let footer: z.infer<typeof footerSchema>['footer'] | undefined;
  let count = 0;
  let first: string | null = null;
  let last: string | null = null;
  try {
    for await (const line of lines) {
      if (footer) throw corrupt('data after the footer');
      const value = parseLine(line, corrupt);
      if (!header) {
        if (!headerSchema.safeParse(value).success) throw corrupt('missing or unknown header');
        header = true;
        continue;
      }
      const asFooter = footerSchema.safeParse(value);
      if (asFooter.success) {
        footer = asFooter.data.footer;
        continue;
      }
      const record = recordSchema.safeParse(value);
      if (!record.success) throw corrupt(`record ${count + 1} is malformed`);
      if (last !== null && !(record.data.key > last)) throw corrupt(`keys out of order at ${JSON.stringify(record.data.key)}`);
      unhashed += `${line}\n`;
      if (unhashed.length >= 1 << 16) {
        hash.update(unhashed);
        unhashed = '';
      }
      count++;
      first ??= record.data.key;
      last = record.data.key;
      yield (record.data.tombstone ? { key: record.data.key, seq: record.data.seq, tombstone: true } : record.data) as SegmentRecord;
    }
  } catch (err) {
    if (err instanceof SegmentCorruptError) throw err;
    if ((err as NodeJS.ErrnoException).code?.startsWith('Z_')) throw corrupt(`not gzip: ${(err as Error).message}`);
    throw err;
  }
  if (!header) throw corrupt('empty segment');
  if (!footer) throw corrupt('no footer: the segment is truncated');
  if (footer.count !== count || footer.first_key !== first || footer.last_key !== last) throw corrupt('footer does not describe the records');
  if (footer.sha256 !== hash.update(unhashed).digest('hex')) throw corrupt('checksum does not match the records');
}

function parseLine(line: string, corrupt: (reason: string) => Error): unknown {
  try {
    return JSON.parse(line);
  } catch {
    throw corrupt('a line is not JSON');
  }
}
