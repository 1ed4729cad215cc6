/** Deletion manifests on the embedded store: the key grammar of passes and parts, intent before deletion, a dry run's store. */
import { describe, expect, it } from 'vitest';
import { manifestPartKey, manifestsPrefix, namespaceId, newPassId, parseManifestPartKey, parseManifestPrefix, parsePassPrefix, passClockMs, passId, passManifestPrefix } from '../../src/keys';
import { deleterOf, listManifestPasses, readPassManifest, type ManifestTarget } from '../../src/protocol';
import { createEmbeddedObjectStore, type DeleteResult, type ObjectStore } from '../../src/store';
import { dryRunStore, type RecordedWrite } from '../../src/store/dry-run';

const ns = namespaceId('unit');

describe('manifest keys', () => {
  it('a pass id carries its clock, sorts by it, and its manifest and parts parse back; nothing else does', () => {
    const [early, late] = [newPassId(1_700_000_000_000), newPassId(1_700_000_000_001)];
    expect(passClockMs(early)).toBe(1_700_000_000_000);
    expect(early < late).toBe(true);
    const part = manifestPartKey(ns, early);
    expect(part.startsWith(passManifestPrefix(ns, early))).toBe(true);
    expect(parseManifestPartKey(part)).toEqual({ namespaceId: ns, passId: early });
    expect(parseManifestPrefix(passManifestPrefix(ns, early))).toEqual({ namespaceId: ns, passId: early });
    expect(parsePassPrefix(ns, passManifestPrefix(ns, early))).toBe(early);
    for (const bad of ['gc_1_00', `${early}/`, 'gc_170000000000a_0123456789abcdef', '../gc_1700000000000_0123456789abcdef']) expect(() => passId(bad)).toThrow(/invalid pass id/);
    expect(parseManifestPartKey(`${manifestsPrefix(ns)}notes.txt`)).toBeUndefined();
    expect(parsePassPrefix(ns, `${manifestsPrefix(ns)}notes/`)).toBeUndefined();
  });
});

describe('deleting through a manifest', () => {
  const setUp = async () => {
    const store = createEmbeddedObjectStore({ path: ':memory:' });
    const log: string[] = [];
    const logged = Object.assign(Object.create(store) as ObjectStore, {
      put: (key: string, body: Uint8Array) => (log.push(`put ${key}`), store.put(key, body)),
      deleteMany: (keys: readonly string[]): Promise<DeleteResult> => (log.push(`delete ${keys.join(',')}`), store.deleteMany(keys)),
    });
    const keys = ['namespaces/unit/metadata/segments/a', 'namespaces/unit/metadata/segments/b'];
    for (const k of keys) await store.put(k, new Uint8Array([1, 2, 3]));
    const objects = await Promise.all(keys.map((k) => store.head(k)));
    const target: ManifestTarget = { store: logged, namespaceId: ns, passId: newPassId(Date.now()), nowMs: 42, dryRun: false };
    return { store, logged, log, keys, objects, target };
  };

  it("a batch's part is written before its DeleteObjects, and names each object with its rule and what the rule read", async () => {
    const { store, logged, log, keys, objects, target } = await setUp();
    await deleterOf(logged, target)(objects.map((object) => ({ object, rule: 'lost_write', read: { rootGeneration: 7 } })));
    expect(log).toHaveLength(2);
    expect(log[0]).toMatch(/^put namespaces\/unit\/metadata\/gc\/gc_\d{13}_[0-9a-f]{16}\/part_[0-9a-f]{32}\.ndjson\.gz$/);
    expect(log[1]).toBe(`delete ${keys.join(',')}`);
    expect(await listManifestPasses(store, ns)).toEqual([target.passId]);
    const [part] = await readPassManifest(store, ns, target.passId);
    expect(part?.lines).toEqual(objects.map((o) => ({ key: o.key, size: 3, etag: o.etag, lastModified: o.lastModified?.toISOString(), rule: 'lost_write', read: { rootGeneration: 7 }, decidedAtMs: 42 })));
    expect((await store.list({ prefix: 'namespaces/unit/metadata/segments/' })).objects).toEqual([]);
  });

  it("a dry run's store records the delete instead of making it; the manifest, marked dry run, is still written to the real store", async () => {
    const writes: RecordedWrite[] = [];
    const { store, logged, log, keys, objects, target } = await setUp();
    const result = await deleterOf(dryRunStore(logged, (w) => writes.push(w)), { ...target, dryRun: true })(objects.map((object) => ({ object, rule: 'lost_write', read: {} })));
    expect(result).toEqual({ deleted: keys, failed: [] });
    expect(writes).toEqual(keys.map((key) => ({ kind: 'delete', key })));
    expect(log.filter((l) => l.startsWith('delete'))).toEqual([]);
    expect((await store.list({ prefix: 'namespaces/unit/metadata/segments/' })).objects.map((o) => o.key)).toEqual(keys);
    const [part] = await readPassManifest(store, ns, target.passId);
    expect(part?.lines.map((l) => l.dryRun)).toEqual([true, true]);
  });

  it('an empty batch writes no part and sends no delete', async () => {
    const { logged, log, target } = await setUp();
    expect(await deleterOf(logged, target)([])).toEqual({ deleted: [], failed: [] });
    expect(log).toEqual([]);
  });
});
