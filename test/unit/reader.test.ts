/**
 * The read path a metadata service uses: one root read, the group's merged records, a point lookup that verifies what
 * it read.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { resolveTiming } from '../../src/config';
import { namespaceId } from '../../src/keys';
import { updateRoot } from '../../src/protocol/root-io';
import { lookupRecord, readableUntilMs, readGroupRecords, readGroupSnapshot } from '../../src/reader';
import { jsonRootCodec } from '../../src/root';
import { SegmentCorruptError, type SegmentRecord } from '../../src/segments';
import { createEmbeddedObjectStore, type ObjectStore } from '../../src/store';
import { writeInputSegment } from '../../src/writer';

const ns = namespaceId('reader');
let store: ObjectStore;
beforeEach(() => {
  store = createEmbeddedObjectStore({ path: ':memory:' });
});
afterEach(() => store.close());

const collect = async (records: AsyncIterable<SegmentRecord>): Promise<SegmentRecord[]> => {
  const all: SegmentRecord[] = [];
  for await (const record of records) all.push(record);
  return all;
};

/** Two segments: inode/1 rewritten, inode/2 deleted by the newer one, inode/3 only in the older. */
async function seeded(): Promise<string[]> {
  return [
    await writeInputSegment(store, { namespaceId: ns, group: 'inodes' }, [
      { key: 'inode/1', seq: 1, value: 'a' },
      { key: 'inode/2', seq: 2, value: 'b' },
      { key: 'inode/3', seq: 3, value: 'c' },
    ]),
    await writeInputSegment(store, { namespaceId: ns, group: 'inodes' }, [
      { key: 'inode/1', seq: 4, value: 'a2' },
      { key: 'inode/2', seq: 5, tombstone: true },
    ]),
  ];
}

describe('reading a group', () => {
  it("a snapshot names the group's live segments and the root's generation and ETag, from one root read", async () => {
    const segments = await seeded();
    const snapshot = await readGroupSnapshot(store, { namespaceId: ns, group: 'inodes' }, jsonRootCodec, () => 1_000);
    // The root was created empty at generation 1, and each registration added one.
    expect(snapshot).toMatchObject({ namespaceId: ns, group: 'inodes', rootGeneration: 3, segments, readAtMs: 1_000 });
    expect(snapshot.rootEtag).toBe((await store.head('namespaces/reader/metadata/root.json')).etag);
    expect((await readGroupSnapshot(store, { namespaceId: ns, group: 'bindings' }, jsonRootCodec)).segments).toEqual(
      [],
    );
  });

  it('a snapshot reads groups only: a segment the root lists as retired is not read', async () => {
    const [older, newer] = await seeded();
    await updateRoot(
      store,
      ns,
      (root) => ({
        ...root,
        generation: root.generation + 1,
        groups: { inodes: [newer!] },
        retired: [{ key: older!, retired_at_ms: 1 }],
      }),
      { codec: jsonRootCodec },
    );
    expect((await readGroupSnapshot(store, { namespaceId: ns, group: 'inodes' }, jsonRootCodec)).segments).toEqual([
      newer,
    ]);
  });

  it('the merged records are one per key in key order, the highest seq winning and deleted keys left out', async () => {
    await seeded();
    const snapshot = await readGroupSnapshot(store, { namespaceId: ns, group: 'inodes' }, jsonRootCodec);
    expect(await collect(readGroupRecords(store, snapshot))).toEqual([
      { key: 'inode/1', seq: 4, value: 'a2' },
      { key: 'inode/3', seq: 3, value: 'c' },
    ]);
  });

  it('a point lookup gives the latest version, and nothing for a deleted or absent key', async () => {
    await seeded();
    const snapshot = await readGroupSnapshot(store, { namespaceId: ns, group: 'inodes' }, jsonRootCodec);
    expect(await lookupRecord(store, snapshot, 'inode/1')).toEqual({ key: 'inode/1', seq: 4, value: 'a2' });
    expect(await lookupRecord(store, snapshot, 'inode/2')).toBeUndefined();
    expect(await lookupRecord(store, snapshot, 'inode/9')).toBeUndefined();
  });

  it("a point lookup verifies every segment it read: a damaged footer fails it even when the key is the segment's first record", async () => {
    const [older] = await seeded();
    const bytes = (await store.get(older!)).body;
    const damaged = new Uint8Array(bytes);
    // The gzip trailer's CRC-32 covers every record; flipping it leaves the records themselves readable.
    damaged[damaged.length - 8]! ^= 0xff;
    await store.put(older!, damaged);
    const snapshot = await readGroupSnapshot(store, { namespaceId: ns, group: 'inodes' }, jsonRootCodec);
    await expect(lookupRecord(store, snapshot, 'inode/3')).rejects.toThrow(SegmentCorruptError);
  });

  it('the segments of a snapshot stay readable for the reader grace less the clock margin from its read: 42.5 minutes at the defaults', async () => {
    await seeded();
    const snapshot = await readGroupSnapshot(store, { namespaceId: ns, group: 'inodes' }, jsonRootCodec, () => 0);
    expect(readableUntilMs(snapshot, resolveTiming())).toBe(42.5 * 60_000);
  });
});
