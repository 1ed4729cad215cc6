/**
 * What a record may hold, whatever format stores it: well-formed text, and no more bytes than the
 * narrowest place the package writes it. The writer checks both at the door, a lookup checks its
 * key, and the readers refuse text that is not well-formed in segments others wrote.
 */
import { TypedError } from '../errors';
import { MAX_SEGMENT_LINE_BYTES, recordLineBytes, type SegmentRecord } from './format';
import { illFormedText } from './text';

/**
 * The most bytes a key may take as a JSON string (quotes and escapes included, UTF-8). Places that
 * repeat a key beside others must hold it: a format-1 footer names two (an output's first and last
 * record, wherever outputs are cut), and the compactor's progress, heartbeated in at most 64 KiB
 * (`MAX_PROGRESS_BYTES`), names one beside a number per intermediate run.
 */
export const MAX_KEY_BYTES = 16 * 1024;

/**
 * Why `record` cannot be stored in every format the package writes, or undefined: its text is not
 * well-formed, its key takes more than {@link MAX_KEY_BYTES}, or its format-1 line (which holds key
 * and value JSON-escaped, more bytes than format 2 stores) more than `MAX_SEGMENT_LINE_BYTES`.
 */
export function recordProblem(record: SegmentRecord): string | undefined {
  const text = illFormedText(record);
  if (text !== undefined)
    return `is not well-formed text: ${text}; keys and values must be well-formed Unicode (String.prototype.isWellFormed)`;
  const keyBytes = Buffer.byteLength(JSON.stringify(record.key));
  if (keyBytes > MAX_KEY_BYTES)
    return `has a key of ${keyBytes} bytes as JSON, more than a key may take (${MAX_KEY_BYTES})`;
  const lineBytes = recordLineBytes(record);
  if (lineBytes > MAX_SEGMENT_LINE_BYTES)
    return `is ${lineBytes} bytes as a format-1 line, more than a record may take (${MAX_SEGMENT_LINE_BYTES})`;
  return undefined;
}

/**
 * The records handed to the writer, or the key handed to a lookup, were refused before anything was written or read.
 */
export class InvalidSegmentInputError extends TypedError implements SegmentInputRefusal {
  readonly failureType = 'InvalidInput';
  readonly namespaceId: string;
  readonly group: string;
  readonly reason: string;
  readonly recordIndex?: number;
  readonly refused: 'write' | 'lookup';
  constructor({ namespaceId, group, reason, recordIndex, refused = 'write' }: SegmentInputRefusal) {
    super(
      refused === 'write'
        ? `input segment for group ${group} of namespace ${namespaceId} refused, nothing written: ${reason}`
        : `lookup in group ${group} of namespace ${namespaceId} refused: ${reason}`,
    );
    this.namespaceId = namespaceId;
    this.group = group;
    this.reason = reason;
    this.recordIndex = recordIndex;
    this.refused = refused;
  }
}

/** What {@link InvalidSegmentInputError} refused, in which group, and why. */
export interface SegmentInputRefusal {
  /** The namespace of the group written or looked up. */
  readonly namespaceId: string;
  /** The family group. */
  readonly group: string;
  /** What is wrong, naming the record or key at fault. */
  readonly reason: string;
  /** Index in the caller's list of the first record at fault, when one is. */
  readonly recordIndex?: number;
  /** What was refused: an input segment's records (nothing was written) or a lookup's key. Default `write`. */
  readonly refused?: 'write' | 'lookup';
}
