/**
 * The input writer checks everything before its first request (issue 15, item 4): each bad input
 * is a typed error saying what is wrong, and the store on MinIO is left exactly as it was.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InvalidKeyError, inputSegmentsPrefix, judgedRootKey, namespaceId, rootKey } from '../../src/keys';
import { readRoot } from '../../src/protocol';
import { jsonRootCodec } from '../../src/root';
import type { SegmentRecord } from '../../src/segments';
import type { ObjectStore } from '../../src/store';
import { InvalidSegmentInputError, writeInputSegment } from '../../src/writer';
import { interceptStore, type StoreOperation } from '../support/faults';
import { readRecords } from '../support/records';
import { openTestStore, type TestStore } from '../support/stores';

const ns = namespaceId('writer');
const good = (key: string, seq = 1): SegmentRecord => ({ key, seq, value: `v-${key}` });
/** Deliberately ill-typed records, as a caller without TypeScript could pass them. */
const bad = (record: unknown): SegmentRecord => record as SegmentRecord;

describe('writeInputSegment refuses bad input before writing anything', () => {
  let fixture: TestStore;
  let store: ObjectStore;
  const requests: StoreOperation[] = [];
  let before: string[];

  const allKeys = async () => (await fixture.store.list({ prefix: '' })).objects.map((o) => o.key);

  beforeAll(async () => {
    fixture = await openTestStore('minio');
    store = interceptStore(fixture.store, (operation) => void requests.push(operation));
    // One good segment first: the namespace has a root whose bytes must not change.
    await writeInputSegment(store, { namespaceId: ns, group: 'bindings' }, [good('a')]);
    before = await allKeys();
  });
  afterAll(() => fixture?.store.close());

  it.each([
    ['no records', [], /no records/, undefined],
    [
      'a negative seq',
      [good('a'), { key: 'b', seq: -1, value: 'v' }],
      /record 1 \(key "b"\) is not a segment record/,
      1,
    ],
    ['a fractional seq', [{ key: 'b', seq: 1.5, value: 'v' }, good('a')], /record 0 \(key "b"\)/, 0],
    ['a value that is not a string', [good('a'), bad({ key: 'c', seq: 1, value: 5 })], /record 1 \(key "c"\)/, 1],
    ['neither a value nor a tombstone', [bad({ key: 'c', seq: 1 })], /record 0 \(key "c"\)/, 0],
    [
      'both a value and a tombstone',
      [bad({ key: 'c', seq: 1, value: 'v', tombstone: true })],
      /record 0 \(key "c"\)/,
      0,
    ],
    ['an unknown field', [bad({ key: 'c', seq: 1, value: 'v', cursor: 3 })], /record 0 \(key "c"\)/, 0],
    ['an empty key', [good('a'), good('')], /record 1 \(key ""\)/, 1],
    ['a record without a key', [good('a'), bad({ seq: 1, value: 'v' })], /record 1 has no string key/, 1],
    ['a record that is not an object', [bad(null)], /record 0 has no string key/, 0],
    [
      'a duplicate key',
      [good('b'), good('a'), good('b', 2)],
      /records 0 and 2 both have key "b": keys must be unique/,
      2,
    ],
  ] as const)('%s: InvalidSegmentInputError naming the record; nothing written', async (_, records, reason, index) => {
    requests.length = 0;
    const err: unknown = await writeInputSegment(
      store,
      { namespaceId: ns, group: 'bindings' },
      records as readonly SegmentRecord[],
    ).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(InvalidSegmentInputError);
    expect((err as Error).message).toMatch(reason);
    expect((err as Error).message).toContain('group bindings of namespace writer');
    expect((err as InvalidSegmentInputError).recordIndex).toBe(index);
    expect(requests).toEqual([]);
  });

  it.each(['../x', 'Upper', '', 'a/b'])(
    'an invalid group %j: InvalidKeyError, and no segment is left behind',
    async (group) => {
      requests.length = 0;
      await expect(writeInputSegment(store, { namespaceId: ns, group }, [good('a')])).rejects.toThrow(InvalidKeyError);
      await expect(writeInputSegment(store, { namespaceId: ns, group }, [good('a')])).rejects.toThrow(
        /invalid family group/,
      );
      expect(requests).toEqual([]);
    },
  );

  it('the store is exactly as it was: the one good segment, its root and the history marker', async () => {
    expect(await allKeys()).toEqual(before);
    expect(before).toEqual(expect.arrayContaining([rootKey(ns), judgedRootKey(ns)]));
    expect((await readRoot(fixture.store, ns, jsonRootCodec)).root.groups).toEqual({
      bindings: before.filter((k) => k.startsWith(inputSegmentsPrefix(ns))),
    });
  });

  it('good records in any order are written sorted and read back by the segment reader', async () => {
    const key = await writeInputSegment(store, { namespaceId: ns, group: 'inodes' }, [
      good('c'),
      { key: 'a', seq: 0, tombstone: true },
      good('b', 7),
    ]);
    expect(await readRecords(fixture.store, [key])).toEqual([
      { key: 'a', seq: 0, tombstone: true },
      good('b', 7),
      good('c'),
    ]);
  });
});
