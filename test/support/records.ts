/** Test data for compactions: random input records and the reference merge they must compact to. */
import { readSegment, type SegmentRecord } from '../../src/segments';
import type { ObjectStore } from '../../src/store';
import { writeInputSegment } from '../../src/writer';

/** `segments` input segments over a shared key space, with overlapping keys, rising seqs and some tombstones. */
export function makeInputs(segments: number, recordsPerSegment: number, keySpace = recordsPerSegment * 2): SegmentRecord[][] {
  let seq = 0;
  return Array.from({ length: segments }, (_, s) => {
    const keys = new Set<number>();
    while (keys.size < Math.min(recordsPerSegment, keySpace)) keys.add(Math.floor(Math.random() * keySpace));
    return [...keys].map((k) => {
      const key = `k${String(k).padStart(8, '0')}`;
      return (k + s) % 7 === 0 ? { key, seq: ++seq, tombstone: true as const } : { key, seq: ++seq, value: `v${s}-${k}-${'x'.repeat(k % 40)}` };
    });
  });
}

export async function writeInputs(store: ObjectStore, ns: string, group: string, inputs: SegmentRecord[][]): Promise<string[]> {
  const keys: string[] = [];
  for (const records of inputs) keys.push(await writeInputSegment(store, ns, group, records));
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
