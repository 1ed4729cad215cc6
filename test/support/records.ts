/** Test data for compactions: random input records and the reference merge they must compact to. */
import { familyGroup, namespaceId } from '../../src/keys';
import { readRoot } from '../../src/protocol';
import { groupSegments, jsonRootCodec } from '../../src/root';
import { readSegment, type SegmentFormatVersion, type SegmentRecord } from '../../src/segments';
import type { ObjectStore } from '../../src/store';
import { writeInputSegment } from '../../src/writer';

/** `segments` input segments over a shared key space, with overlapping keys, rising seqs and some tombstones. */
export function makeInputs(
  segments: number,
  recordsPerSegment: number,
  keySpace = recordsPerSegment * 2,
): SegmentRecord[][] {
  let seq = 0;
  return Array.from({ length: segments }, (_, s) => {
    const keys = new Set<number>();
    while (keys.size < Math.min(recordsPerSegment, keySpace)) keys.add(Math.floor(Math.random() * keySpace));
    return [...keys].map((k) => {
      const key = `k${String(k).padStart(8, '0')}`;
      return (k + s) % 7 === 0
        ? { key, seq: ++seq, tombstone: true as const }
        : { key, seq: ++seq, value: `v${s}-${k}-${'x'.repeat(k % 40)}` };
    });
  });
}

/**
 * Writes `inputs` as segments of `group`, the `i`-th in `formats[i % formats.length]` (the writer's default format when
 * none is given).
 */
export async function writeInputs(
  store: ObjectStore,
  ns: string,
  group: string,
  inputs: SegmentRecord[][],
  formats: readonly SegmentFormatVersion[] = [],
): Promise<string[]> {
  const keys: string[] = [];
  for (const [i, records] of inputs.entries())
    keys.push(
      await writeInputSegment(store, { namespaceId: ns, group }, records, {
        segmentFormat: formats[i % formats.length],
      }),
    );
  return keys;
}

/** What a full compaction must produce: per key the highest seq, tombstones dropped, sorted. */
export function referenceMerge(inputs: SegmentRecord[][]): SegmentRecord[] {
  const newest = new Map<string, SegmentRecord>();
  for (const r of inputs.flat()) if ((newest.get(r.key)?.seq ?? -1) < r.seq) newest.set(r.key, r);
  return [...newest.values()].filter((r) => !('tombstone' in r)).sort((a, b) => (a.key < b.key ? -1 : 1));
}

export async function readRecords(store: ObjectStore, keys: readonly string[]): Promise<SegmentRecord[]> {
  const out: SegmentRecord[] = [];
  for (const key of keys) for await (const r of readSegment(key, (await store.getStream(key)).body)) out.push(r);
  return out;
}

/**
 * What a reader of a group sees, given its segments in the root's order: per key the record of the
 * highest seq (a later segment on a tie), tombstones applied, as `key → value` sorted by key.
 */
export function readerView(segments: readonly (readonly SegmentRecord[])[]): Record<string, string> {
  const newest = new Map<string, SegmentRecord>();
  for (const records of segments)
    for (const r of records) if ((newest.get(r.key)?.seq ?? -1) <= r.seq) newest.set(r.key, r);
  const view: Record<string, string> = {};
  for (const r of [...newest.values()].sort((a, b) => (a.key < b.key ? -1 : 1)))
    if (!('tombstone' in r)) view[r.key] = r.value;
  return view;
}

/** The reader's view of `group` in the root as it stands in `store`. */
export async function readGroupView(store: ObjectStore, ns: string, group: string): Promise<Record<string, string>> {
  const { root } = await readRoot(store, namespaceId(ns), jsonRootCodec);
  const segments: SegmentRecord[][] = [];
  for (const key of groupSegments(root, familyGroup(group))) segments.push(await readRecords(store, [key]));
  return readerView(segments);
}
