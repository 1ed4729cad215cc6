/**
 * A production-shaped group for the tier test: hundreds of input segments and ≥ 100 MB stored,
 * generated from seeds so that the reference merge is known key by key without holding the data.
 *
 * Every segment holds a random sorted sample of one shared key space (about `overlap` copies of a
 * key across the group), so the merge meets each key several times; a later segment carries a
 * higher seq, and a record is a tombstone when (key + segment) % 7 = 0 as in `records.ts`. Values
 * are cut from a pseudo-random base64 pool: they compress like real opaque payloads (about 0.7 in
 * gzip), so the stored bytes, which are what crosses the link, stay close to the raw bytes.
 */
import { createCipheriv } from 'node:crypto';
import { familyGroup, inputSegmentKey, namespaceId, newSegmentId } from '../../src/keys';
import { updateRoot } from '../../src/protocol';
import { addSegments, jsonRootCodec } from '../../src/root';
import { SEGMENT_EXTENSION, SegmentBuilder, type SegmentRecord } from '../../src/segments';
import type { ObjectStore } from '../../src/store';
import { SeededRandom } from './soak';

export interface WideGroupShape {
  /** Keep writing segments until there are at least this many... */
  readonly minSegments: number;
  /** ...and they hold at least this many stored (compressed) bytes. */
  readonly minStoredBytes: number;
  /** Distinct keys the segments sample from. */
  readonly keySpace: number;
  /** Mean records per segment; with `keySpace` and `minSegments` it sets the overlap. */
  readonly recordsPerSegment: number;
  /** Segments being uploaded at once. */
  readonly concurrency: number;
}

export interface WideGroup {
  /** Input segment keys, in the root's order. */
  readonly inputs: readonly string[];
  readonly storedBytes: number;
  /** Uncompressed bytes of the records as the writer encodes them. */
  readonly rawBytes: number;
  readonly records: number;
  /** The reference merge in key order: per key the highest seq, tombstones dropped. */
  expected(): Generator<SegmentRecord>;
}

const MIN_VALUE = 200;
const MAX_VALUE = 700;

let valuePool: string | undefined;
/**
 * 32 MiB of base64 from AES-256-CTR under a fixed key: deterministic, incompressible beyond base64's 6 bits per
 * character.
 */
function pool(): string {
  valuePool ??= createCipheriv('aes-256-ctr', Buffer.alloc(32, 7), Buffer.alloc(16, 0))
    .update(Buffer.alloc(24 * 1024 * 1024))
    .toString('base64');
  return valuePool;
}

const keyName = (k: number) => `k${String(k).padStart(9, '0')}`;

/** The record segment `s` holds for key `k`: a pure function of both, so the expected merge can rebuild the winner. */
function recordOf(s: number, k: number, keySpace: number): SegmentRecord {
  const key = keyName(k);
  const seq = s * keySpace + k + 1;
  if ((k + s) % 7 === 0) return { key, seq, tombstone: true };
  const random = new SeededRandom(seq);
  const length = MIN_VALUE + random.int(MAX_VALUE - MIN_VALUE);
  const at = random.int(pool().length - MAX_VALUE);
  return { key, seq, value: `v${s}-${pool().slice(at, at + length)}` };
}

/** Writes the group's segments with bounded concurrency, then registers them in one root update. */
export async function writeWideGroup(
  store: ObjectStore,
  ns: string,
  group: string,
  shape: WideGroupShape,
): Promise<WideGroup> {
  const { keySpace } = shape;
  const namespace = namespaceId(ns);
  const inclusion = shape.recordsPerSegment / keySpace;
  // The newest segment holding each key: all the expected merge needs.
  const newest = new Int32Array(keySpace).fill(-1);
  const inputs: string[] = [];
  const inFlight = new Set<Promise<unknown>>();
  let storedBytes = 0;
  let rawBytes = 0;
  let records = 0;
  for (let s = 0; s < shape.minSegments || storedBytes < shape.minStoredBytes; s++) {
    if (s >= 4 * shape.minSegments)
      throw new Error(
        `${s} segments hold only ${storedBytes} bytes: raise recordsPerSegment to reach ${shape.minStoredBytes}`,
      );
    const random = new SeededRandom(0x5e9 + s);
    // Geometric gaps: each key is in the segment with probability `inclusion`, in ascending order.
    const gap = () => Math.floor(Math.log(1 - random.next()) / Math.log(1 - inclusion));
    const builder = new SegmentBuilder();
    for (let k = gap(); k < keySpace; k += 1 + gap()) {
      builder.add(recordOf(s, k, keySpace));
      newest[k] = s;
    }
    const body = builder.encode();
    const key = inputSegmentKey(namespace, newSegmentId(), SEGMENT_EXTENSION);
    inputs.push(key);
    storedBytes += body.byteLength;
    rawBytes += builder.size;
    records += builder.count;
    const put: Promise<unknown> = store.put(key, body).then(() => inFlight.delete(put));
    put.catch(() => {}); // awaited below; this only keeps a failure from counting as unhandled before then
    inFlight.add(put);
    if (inFlight.size >= shape.concurrency) await Promise.race(inFlight);
  }
  await Promise.all(inFlight);
  await updateRoot(store, namespace, (root) => addSegments(root, familyGroup(group), inputs), { codec: jsonRootCodec });
  return {
    inputs,
    storedBytes,
    rawBytes,
    records,
    *expected() {
      for (let k = 0; k < keySpace; k++) {
        const s = newest[k]!;
        if (s < 0) continue;
        const record = recordOf(s, k, keySpace);
        if (!('tombstone' in record)) yield record;
      }
    },
  };
}
