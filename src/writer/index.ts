/**
 * A stand-in for the metadata service's own writer: writes sorted input segments and registers
 * them in the namespace root. The demo and the tests use it to give compactions something to do.
 */
import { TypedError } from '../errors';
import { familyGroup, inputSegmentKey, namespaceId, newSegmentId, type FamilyGroup, type NamespaceId } from '../keys';
import { updateRoot } from '../protocol/root-io';
import { addSegments, jsonRootCodec } from '../root';
import { asSegmentRecord, encodeSegment, SEGMENT_EXTENSION, type SegmentRecord } from '../segments';
import type { ObjectStore } from '../store';

/** The records handed to {@link writeInputSegment} cannot form a segment; nothing was written. */
export class InvalidSegmentInputError extends TypedError {
  override readonly name = 'InvalidSegmentInputError';
  readonly failureType = 'InvalidSegmentInputError';
  readonly retryable = true;
  constructor(
    readonly namespaceId: string,
    readonly group: string,
    readonly reason: string,
    /** Index in the caller's list of the first record at fault, when one is. */
    readonly recordIndex?: number,
  ) {
    super(`input segment for group ${group} of namespace ${namespaceId} refused, nothing written: ${reason}`);
  }
}

/**
 * Encodes the records sorted by key, or refuses them: every record is checked with the segment
 * format's own rule first, so the writer never stores what the next compaction would refuse (a
 * group stuck on a malformed record).
 */
function encodeInputSegment(ns: NamespaceId, group: FamilyGroup, records: readonly SegmentRecord[]): Uint8Array {
  const refuse = (reason: string, recordIndex?: number) => new InvalidSegmentInputError(ns, group, reason, recordIndex);
  if (!Array.isArray(records) || records.length === 0) throw refuse('no records: an input segment holds at least one');
  const keyOf = (record: unknown): unknown => (typeof record === 'object' && record !== null ? (record as { key?: unknown }).key : undefined);
  const keyless = records.findIndex((r) => typeof keyOf(r) !== 'string');
  if (keyless >= 0) throw refuse(`record ${keyless} has no string key`, keyless);
  const malformed = records.findIndex((r) => asSegmentRecord(r) === undefined);
  if (malformed >= 0) {
    const record = records[malformed];
    throw refuse(
      `record ${malformed} (key ${JSON.stringify(keyOf(record))}) is not a segment record: ${JSON.stringify(record)}; ` +
        'it needs a non-empty key, a whole seq of 0 or more, and either a string value or tombstone: true, nothing else',
      malformed,
    );
  }
  const order = records.map((_, i) => i).sort((a, b) => (records[a]!.key < records[b]!.key ? -1 : records[a]!.key > records[b]!.key ? 1 : a - b));
  for (let i = 1; i < order.length; i++) {
    const [first, second] = [order[i - 1]!, order[i]!];
    if (records[first]!.key === records[second]!.key) {
      throw refuse(`records ${first} and ${second} both have key ${JSON.stringify(records[first]!.key)}: keys must be unique`, second);
    }
  }
  try {
    return encodeSegment(order.map((i) => records[i]!));
  } catch (err) {
    // The builder refuses a record whose line a reader would refuse (MAX_SEGMENT_LINE_BYTES).
    if (err instanceof RangeError) throw refuse(err.message);
    throw err;
  }
}

/**
 * Writes one input segment of the reference format (`.mseg`, records sorted by key here) and adds it
 * to the group in the reference root (`root.json`); returns its key.
 * Ids and records are all checked before the first request: on refusal nothing is written.
 */
export async function writeInputSegment(store: ObjectStore, ns: string, group: string, records: readonly SegmentRecord[]): Promise<string> {
  const namespace = namespaceId(ns);
  const validGroup = familyGroup(group);
  const bytes = encodeInputSegment(namespace, validGroup, records);
  const key = inputSegmentKey(namespace, newSegmentId(), SEGMENT_EXTENSION);
  await store.put(key, bytes);
  await updateRoot(store, namespace, (root) => addSegments(root, validGroup, [key]), jsonRootCodec);
  return key;
}
