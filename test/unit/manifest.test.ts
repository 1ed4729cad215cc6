/**
 * Deletion manifests on the embedded store: the key grammar of passes and parts, intent before deletion, a dry run's
 * store.
 */
import { setImmediate } from 'node:timers/promises';
import { describe, expect, it, vi } from 'vitest';
import {
  manifestPartKey,
  manifestsPrefix,
  namespaceId,
  newPassId,
  parseManifestPartKey,
  parseManifestPrefix,
  parsePassPrefix,
  passClockMs,
  passId,
  passManifestPrefix,
  type PartTotals,
} from '../../src/keys';
import {
  deleterOf,
  listGcPasses,
  listManifestPasses,
  readPassManifest,
  writeManifestPart,
  type ManifestTarget,
} from '../../src/collector';
import {
  createEmbeddedObjectStore,
  NotFoundError,
  PreconditionFailedError,
  type DeleteResult,
  type ObjectStore,
} from '../../src/store';
import { dryRunStore, type RecordedWrite } from '../../src/store/dry-run';

const ns = namespaceId('unit');

describe('manifest keys', () => {
  it('a pass id carries its clock, sorts by it, and its manifest and parts parse back; nothing else does', () => {
    const [early, late] = [newPassId(1_700_000_000_000), newPassId(1_700_000_000_001)];
    expect(passClockMs(early)).toBe(1_700_000_000_000);
    expect(early < late).toBe(true);
    const totals = { byRule: { lease: 1, claimed_prefix: 2 }, bytes: 1234, dryRun: true };
    const part = manifestPartKey(ns, early, totals);
    expect(part.startsWith(`${passManifestPrefix(ns, early)}part_`)).toBe(true);
    expect(part).toMatch(/\/part_[0-9a-f]{32}\.bytes-1234\.claimed_prefix-2\.lease-1\.dry_run\.ndjson\.gz$/);
    expect(parseManifestPartKey(part)).toEqual({ namespaceId: ns, passId: early, totals });
    expect(parseManifestPartKey(manifestPartKey(ns, early, { byRule: {}, bytes: 0, dryRun: false }))?.totals).toEqual({
      byRule: {},
      bytes: 0,
      dryRun: false,
    });
    // A part named before part names carried their totals is still a part, of no known totals.
    expect(parseManifestPartKey(`${passManifestPrefix(ns, early)}part_${'a'.repeat(32)}.ndjson.gz`)).toEqual({
      namespaceId: ns,
      passId: early,
    });
    const badTotals: PartTotals[] = [
      { ...totals, bytes: -1 },
      { ...totals, bytes: 0.5 },
      { ...totals, byRule: { bytes: 1 } },
      { ...totals, byRule: { 'a-b': 1 } },
      { ...totals, byRule: { lease: NaN } },
    ];
    for (const bad of badTotals) {
      expect(() => manifestPartKey(ns, early, bad)).toThrow(/invalid manifest part totals/);
    }
    expect(parseManifestPrefix(passManifestPrefix(ns, early))).toEqual({ namespaceId: ns, passId: early });
    expect(parsePassPrefix(ns, passManifestPrefix(ns, early))).toBe(early);
    for (const bad of [
      'gc_1_00',
      `${early}/`,
      'gc_170000000000a_0123456789abcdef',
      '../gc_1700000000000_0123456789abcdef',
    ])
      expect(() => passId(bad)).toThrow(/invalid pass id/);
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
      deleteMany: (keys: readonly string[]): Promise<DeleteResult> => (
        log.push(`delete ${keys.join(',')}`),
        store.deleteMany(keys)
      ),
    });
    const keys = ['namespaces/unit/metadata/segments/a', 'namespaces/unit/metadata/segments/b'];
    for (const k of keys) await store.put(k, new Uint8Array([1, 2, 3]));
    const objects = await Promise.all(keys.map((k) => store.head(k)));
    const target: ManifestTarget = {
      store: logged,
      namespaceId: ns,
      passId: newPassId(Date.now()),
      nowMs: 42,
      dryRun: false,
    };
    return { store, logged, log, keys, objects, target };
  };

  it("a batch's part is written before its DeleteObjects, and names each object with its rule and what the rule read", async () => {
    const { store, logged, log, keys, objects, target } = await setUp();
    await deleterOf(
      logged,
      target,
    )(objects.map((object) => ({ object, rule: 'lost_write', read: { rootGeneration: 7 } })));
    expect(log).toHaveLength(2);
    expect(log[0]).toMatch(
      /^put namespaces\/unit\/metadata\/gc\/gc_\d{13}_[0-9a-f]{16}\/part_[0-9a-f]{32}\.bytes-6\.lost_write-2\.ndjson\.gz$/,
    );
    expect(log[1]).toBe(`delete ${keys.join(',')}`);
    expect(await listManifestPasses(store, ns)).toEqual([target.passId]);
    const [part] = await readPassManifest(store, ns, target.passId);
    expect(part?.lines).toEqual(
      objects.map((o) => ({
        key: o.key,
        size: 3,
        etag: o.etag,
        lastModified: o.lastModified?.toISOString(),
        rule: 'lost_write',
        read: { rootGeneration: 7 },
        decidedAtMs: 42,
      })),
    );
    expect((await store.list({ prefix: 'namespaces/unit/metadata/segments/' })).objects).toEqual([]);
  });

  it("a dry run's store records the delete instead of making it; the manifest, marked dry run, is still written to the real store", async () => {
    const writes: RecordedWrite[] = [];
    const { store, logged, log, keys, objects, target } = await setUp();
    const result = await deleterOf(
      dryRunStore(logged, (w) => writes.push(w)),
      { ...target, dryRun: true },
    )(objects.map((object) => ({ object, rule: 'lost_write', read: {} })));
    expect(result).toEqual({ deleted: keys, failed: [] });
    expect(writes).toEqual(keys.map((key) => ({ kind: 'delete', key })));
    expect(log.filter((l) => l.startsWith('delete'))).toEqual([]);
    expect((await store.list({ prefix: 'namespaces/unit/metadata/segments/' })).objects.map((o) => o.key)).toEqual(
      keys,
    );
    const [part] = await readPassManifest(store, ns, target.passId);
    expect(part?.lines.map((l) => l.dryRun)).toEqual([true, true]);
  });

  it('an empty batch writes no part and sends no delete', async () => {
    const { logged, log, target } = await setUp();
    expect(await deleterOf(logged, target)([])).toEqual({ deleted: [], failed: [] });
    expect(log).toEqual([]);
  });
});

describe('sharing parts', () => {
  const setUp = async () => {
    const store = createEmbeddedObjectStore({ path: ':memory:' });
    const log: string[] = [];
    let failPuts = false;
    /** While set, a put is held until the test lets it go. */
    let held: Promise<void> | undefined;
    const logged = Object.assign(Object.create(store) as ObjectStore, {
      put: async (key: string, body: Uint8Array) => {
        log.push(`put ${key.split('/').at(-1)?.split('.')[0]}`);
        await held;
        if (failPuts) throw new Error('put refused');
        return store.put(key, body);
      },
      deleteMany: (keys: readonly string[]): Promise<DeleteResult> => (
        log.push(`delete ${keys.map((k) => k.split('/').at(-1)).join(',')}`),
        store.deleteMany(keys)
      ),
      deleteIfMatch: (key: string, etag: string) => (
        log.push(`delete ${key.split('/').at(-1)} if ${etag}`),
        store.deleteIfMatch(key, etag)
      ),
    });
    const keys = ['a', 'b', 'c', 'lease.json'].map(
      (k) => `namespaces/unit/metadata/compactions/cmp_${'1'.repeat(32)}/${k}`,
    );
    for (const k of keys) await store.put(k, new Uint8Array([1, 2]));
    const [a, b, c, lease] = (await Promise.all(keys.map((k) => store.head(k)))).map((object) => ({
      object,
      rule: 'orphaned_prefix' as const,
      read: {},
    }));
    const target: ManifestTarget = {
      store: logged,
      namespaceId: ns,
      passId: newPassId(Date.now()),
      nowMs: 42,
      dryRun: false,
    };
    const hold = (): (() => void) => {
      let release = () => {};
      held = new Promise((resolve) => (release = resolve));
      return () => ((held = undefined), release());
    };
    return {
      store,
      logged,
      log,
      target,
      a: a!,
      b: b!,
      c: c!,
      lease: { ...lease!, rule: 'lease' as const },
      failNextPuts: (fail: boolean) => (failPuts = fail),
      hold,
    };
  };
  const partNames = (log: readonly string[]) => log.filter((l) => l.startsWith('put')).length;

  it('batches handed in while a part is written share the next part, each deleted only once its lines are durable', async () => {
    const { store, logged, log, target, a, b, c, hold } = await setUp();
    const deletes = deleterOf(logged, target);
    const release = hold();
    const first = deletes([a]);
    await vi.waitFor(() => expect(log).toEqual([expect.stringMatching(/^put part_/)]));
    // The first batch's part is in flight when the others come: they wait for it, then share one part.
    const rest = [deletes([b]), deletes([c])];
    await setImmediate();
    expect(log).toHaveLength(1);
    release();
    await Promise.all([first, ...rest]);
    expect(partNames(log)).toBe(2);
    expect(log.indexOf('delete a')).toBeGreaterThan(0);
    const secondPart = log.lastIndexOf(log.filter((l) => l.startsWith('put')).at(-1) ?? '');
    for (const d of ['delete b', 'delete c']) expect(log.indexOf(d)).toBeGreaterThan(secondPart);
    const parts = await readPassManifest(store, ns, target.passId);
    expect(parts.map((p) => p.lines.map((l) => l.key.split('/').at(-1)).sort()).sort()).toEqual([['a'], ['b', 'c']]);
  });

  it('a part that fails fails every batch in it, and deletes none of them', async () => {
    const { logged, log, target, a, b, failNextPuts } = await setUp();
    const deletes = deleterOf(logged, target);
    failNextPuts(true);
    const outcomes = await Promise.allSettled([deletes([a]), deletes([b])]);
    expect(outcomes.map((o) => o.status)).toEqual(['rejected', 'rejected']);
    expect(log.filter((l) => l.startsWith('delete'))).toEqual([]);
    failNextPuts(false);
    await deletes([a]);
    expect(log.at(-1)).toBe('delete a');
  });

  it("a lease recorded with its walk's last batch is deleted afterwards without a part of its own, only in the version named; one not recorded needs its own", async () => {
    const { store, logged, log, target, a, b, lease } = await setUp();
    const deletes = deleterOf(logged, target);
    const etag = lease.object.etag!;
    await deletes([a], [lease]);
    expect(log).toEqual([expect.stringMatching(/^put part_/), 'delete a']);
    await expect(deletes.deleteIfMatch(lease, '"another version"')).rejects.toBeInstanceOf(PreconditionFailedError);
    expect((await store.head(lease.object.key)).etag).toBe(etag);
    await deletes.deleteIfMatch(lease, etag);
    expect(log).toEqual([
      expect.stringMatching(/^put part_/),
      'delete a',
      'delete lease.json if "another version"',
      `delete lease.json if ${etag}`,
    ]);
    await expect(store.head(lease.object.key)).rejects.toBeInstanceOf(NotFoundError);
    const [part] = await readPassManifest(store, ns, target.passId);
    expect(part?.lines.map((l) => [l.key.split('/').at(-1), l.rule, l.etag])).toEqual([
      ['a', 'orphaned_prefix', a.object.etag],
      ['lease.json', 'lease', etag],
    ]);
    // Not recorded before: a part of its own first, once however often the delete is tried.
    log.length = 0;
    await expect(deletes.deleteIfMatch(b, '"another version"')).rejects.toBeInstanceOf(PreconditionFailedError);
    await deletes.deleteIfMatch(b, b.object.etag!);
    expect(log).toEqual([
      expect.stringMatching(/^put part_/),
      'delete b if "another version"',
      `delete b if ${b.object.etag}`,
    ]);
    // Without a manifest there is nothing to record: the delete goes at once.
    log.length = 0;
    await deleterOf(logged, undefined).deleteIfMatch(a, '"gone already"');
    expect(log).toEqual(['delete a if "gone already"']);
  });
});

describe('gc passes', () => {
  it("totals each pass from its parts' names, reading only a part whose name carries none", async () => {
    const store = createEmbeddedObjectStore({ path: ':memory:' });
    let gets = 0;
    const counted = Object.assign(Object.create(store) as ObjectStore, {
      get: (key: string, options?: Parameters<ObjectStore['get']>[1]) => (gets++, store.get(key, options)),
    });
    const keys = ['x', 'y', 'zz'].map((k) => `namespaces/unit/metadata/segments/${k}`);
    for (const k of keys) await store.put(k, new Uint8Array(k.length));
    const [x, y, z] = await Promise.all(keys.map((k) => store.head(k)));
    const target: ManifestTarget = { store, namespaceId: ns, passId: newPassId(Date.now()), nowMs: 42, dryRun: false };
    await deleterOf(
      store,
      target,
    )([
      { object: x!, rule: 'lost_write', read: {} },
      { object: y!, rule: 'retired_segment', read: {} },
    ]);
    // A part of a pass killed before part names carried totals: its lines are read.
    const legacy = await writeManifestPart(target, [{ object: z!, rule: 'lost_write', read: {} }]);
    const unnamed = legacy.replace(/part_([0-9a-f]{32})\..*$/, 'part_$1.ndjson.gz');
    await store.put(unnamed, (await store.get(legacy)).body);
    await store.deleteMany([legacy]);
    gets = 0;
    const [summary] = await listGcPasses(counted, { namespaces: [ns] });
    expect(summary).toEqual({
      passId: target.passId,
      nowMs: passClockMs(target.passId),
      dryRun: false,
      namespaces: [ns],
      parts: 2,
      objects: 3,
      bytes: keys.reduce((n, k) => n + k.length, 0),
      byRule: { lost_write: 2, retired_segment: 1 },
    });
    expect(gets).toBe(1);
  });
});
