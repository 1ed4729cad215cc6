/**
 * Every deletion accounted for (issue 32), on MinIO through real passes on the Temporal dev server:
 * each pass's manifest names exactly what it deleted, with the rule and what the rule read, each
 * batch's part written before its DeleteObjects; a dry run's manifest is the next real pass's deletions.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  inputSegmentKey,
  leaseKey,
  namespaceId,
  newJobId,
  newSegmentId,
  manifestPartKey,
  manifestsPrefix,
  newPassId,
  parseManifestPartKey,
  parseManifestPrefix,
  passClockMs,
  passId,
  passManifestPrefix,
  stagedSegmentKey,
  type MetadataCompactionId,
  type NamespaceId,
} from '../../src/keys';
import { createLeaseState, encodeLease } from '../../src/lease';
import { updateRoot } from '../../src/protocol';
import { listGcPasses, listManifestPasses, readPassManifest, type ManifestLine } from '../../src/collector';
import { jsonRootCodec, type RootState } from '../../src/root';
import type { DeleteResult, ObjectStore } from '../../src/store';
import type { GcInput, GcReport } from '../../src/workflows/gc';
import {
  quickExpirySettings as settings,
  startTestWorker,
  storeAndClient,
  uniqueId,
  type RunningWorker,
} from '../support/temporal';

const { leaseExpiryMs, stagingGraceMs, readerGraceMs, lostWriteGraceMs } = settings.timing;
const bytes = (s: string) => new TextEncoder().encode(s);

/** The worker's store: forwards to MinIO and logs every write, delete and HEAD in order. */
function loggingStore(inner: ObjectStore, log: { op: 'put' | 'delete' | 'head'; keys: string[] }[]): ObjectStore {
  return Object.assign(Object.create(inner) as ObjectStore, {
    head(key: string) {
      log.push({ op: 'head', keys: [key] });
      return inner.head(key);
    },
    async put(key: string, body: Uint8Array) {
      const etag = await inner.put(key, body);
      log.push({ op: 'put', keys: [key] });
      return etag;
    },
    async deleteMany(keys: readonly string[]): Promise<DeleteResult> {
      log.push({ op: 'delete', keys: [...keys] });
      return inner.deleteMany(keys);
    },
    async deleteIfMatch(key: string, etag: string): Promise<void> {
      log.push({ op: 'delete', keys: [key] });
      return inner.deleteIfMatch(key, etag);
    },
  });
}

describe('deletion manifests', () => {
  const opened = storeAndClient('minio');
  let store: ObjectStore;
  let worker: RunningWorker;
  const log: { op: 'put' | 'delete' | 'head'; keys: string[] }[] = [];

  beforeAll(async () => {
    store = opened.fixture.store;
    worker = await startTestWorker(loggingStore(store, log), settings);
  });
  afterAll(() => worker?.stop());

  const pass = (input: GcInput): Promise<GcReport> =>
    opened.client.workflow.execute('gcWorkflow', {
      taskQueue: worker.taskQueue,
      workflowId: uniqueId('gc-manifest'),
      args: [input],
    });
  const stage = async (ns: NamespaceId, job: MetadataCompactionId, n: number): Promise<string[]> => {
    const keys = Array.from({ length: n }, () => stagedSegmentKey(ns, job, newSegmentId(), 'seg'));
    for (const k of keys) await store.put(k, bytes(k));
    return keys;
  };
  /** The lines of the pass's manifest of `ns` the report names, by key. */
  const manifestOf = async (ns: NamespaceId, report: GcReport): Promise<Map<string, ManifestLine>> => {
    expect(report.manifests).toHaveLength(1);
    const id = passId(parseManifestPrefix(report.manifests[0] ?? '')?.passId);
    const lines = (await readPassManifest(store, ns, id)).flatMap((p) => p.lines);
    return new Map(lines.map((l) => [l.key, l]));
  };

  /**
   * A namespace where every rule has something to delete: an expired lease's prefix, an orphaned one, a retired
   * segment, a lost write; and a live job.
   */
  async function seed(ns: NamespaceId) {
    const [dead, orphan, live] = [newJobId(), newJobId(), newJobId()];
    const [retired, lost] = [inputSegmentKey(ns, newSegmentId(), 'seg'), inputSegmentKey(ns, newSegmentId(), 'seg')];
    for (const k of [retired, lost]) await store.put(k, bytes(k));
    const retiredAtMs = Date.now() - readerGraceMs - 1000;
    // Retired, and stamped visible by an earlier pass, longer ago than the reader grace.
    const root = await updateRoot(
      store,
      ns,
      (r): RootState => ({ ...r, retired: [{ key: retired, retired_at_ms: retiredAtMs, visible_at_ms: retiredAtMs }] }),
      { codec: jsonRootCodec },
    );
    const staged = [...(await stage(ns, dead, 2)), ...(await stage(ns, orphan, 3))];
    const young = await stage(ns, live, 1);
    await sleep(Math.max(stagingGraceMs, lostWriteGraceMs) + 500);
    const heartbeatAtMs = Date.now() - leaseExpiryMs - 1000;
    await store.put(
      leaseKey(ns, dead),
      encodeLease(createLeaseState({ jobId: dead, namespaceId: ns, ownerId: 'w', nowMs: heartbeatAtMs })),
    );
    await store.put(
      leaseKey(ns, live),
      encodeLease(createLeaseState({ jobId: live, namespaceId: ns, ownerId: 'w', nowMs: Date.now() })),
    );
    return { dead, orphan, retired, lost, staged, young, retiredAtMs, heartbeatAtMs, generation: root.generation };
  }

  it('a dry run lists exactly what the real pass at its clock then deletes; each line names its rule and what the rule read, and was durable before its delete', async () => {
    const ns = namespaceId(uniqueId('manifest').toLowerCase());
    const s = await seed(ns);
    const nowMs = Date.now();

    const dry = await pass({ namespaces: [ns], nowMs, dryRun: true });
    const planned = await manifestOf(ns, dry);
    expect(log.filter((e) => e.op === 'delete')).toEqual([]);
    log.length = 0;
    const real = await pass({ namespaces: [ns], nowMs });
    const done = await manifestOf(ns, real);

    const deleted = log.filter((e) => e.op === 'delete').flatMap((e) => e.keys);
    // The orphaned prefix is claimed by creating a reaping lease, which goes last like the expired one.
    const expected = [...s.staged, leaseKey(ns, s.dead), leaseKey(ns, s.orphan), s.retired, s.lost].sort();
    expect([...deleted].sort()).toEqual(expected);
    expect([...done.keys()].sort()).toEqual(expected);
    // The dry run lists every object the real pass deletes that existed before it: not the lease the real pass creates
    // to claim the orphan.
    expect([...planned.keys()].sort()).toEqual(expected.filter((k) => k !== leaseKey(ns, s.orphan)));
    expect(real.totals.objectsDeleted + real.totals.leasesDeleted).toBe(expected.length);
    // The same rule for each key (what it read may differ: the real pass fences the root, so its generation is one
    // more).
    for (const [key, line] of planned) expect(line.rule, key).toBe(done.get(key)?.rule);
    // The orphan's lease is the pass's own creation: its line read no lease, as the prefix had none.
    expect(done.get(leaseKey(ns, s.orphan))).toMatchObject({ rule: 'lease', read: {} });
    expect([...planned.values()].every((l) => l.dryRun === true)).toBe(true);
    expect([...done.values()].some((l) => l.dryRun)).toBe(false);

    const lease = { status: 'active', heartbeatAtMs: s.heartbeatAtMs };
    const at = (key: string) => done.get(key) as ManifestLine;
    expect(at(leaseKey(ns, s.dead))).toMatchObject({ rule: 'lease', read: { lease }, decidedAtMs: nowMs });
    for (const key of s.staged.slice(0, 2))
      expect(at(key)).toMatchObject({ rule: 'claimed_prefix', read: { lease, rootGeneration: expect.any(Number) } });
    for (const key of s.staged.slice(2))
      expect(at(key)).toMatchObject({ rule: 'orphaned_prefix', read: { rootGeneration: expect.any(Number) } });
    expect(at(s.retired)).toMatchObject({
      rule: 'retired_segment',
      read: { retiredAtMs: s.retiredAtMs, visibleAtMs: s.retiredAtMs },
    });
    expect(at(s.lost)).toMatchObject({ rule: 'lost_write', read: { rootGeneration: expect.any(Number) } });
    for (const line of done.values()) {
      expect(line.size).toBe(
        line.key.endsWith('lease.json')
          ? ((await store.get(leaseKey(ns, s.dead)).catch(() => undefined))?.body.length ?? line.size)
          : line.key.length,
      );
      expect(line.etag).toMatch(/^"[0-9a-f]+"$/);
      expect(Date.parse(line.lastModified ?? '')).toBeGreaterThan(nowMs - 600_000);
    }

    // Intent first: every key of a DeleteObjects was in a manifest part written before it.
    const parts = new Map(
      (await readPassManifest(store, ns, passId(parseManifestPrefix(real.manifests[0] ?? '')?.passId))).map((p) => [
        p.key,
        p.lines,
      ]),
    );
    const recorded = new Set<string>();
    for (const entry of log) {
      if (entry.op === 'put') for (const line of parts.get(entry.keys[0] ?? '') ?? []) recorded.add(line.key);
      else if (entry.op === 'delete') for (const key of entry.keys) expect(recorded.has(key), key).toBe(true);
    }
    expect(log.filter((e) => e.op === 'put' && parseManifestPartKey(e.keys[0] ?? '')).length).toBe(parts.size);
    // The expired lease's line is the walk's (the orphan's created lease has a part of its own): in the part of its
    // prefix's last batch, its ETag and size from the walk's listing, no HEAD of its own.
    const leasePart = [...parts.values()].find((lines) => lines.some((l) => l.key === leaseKey(ns, s.dead)));
    expect(
      leasePart
        ?.filter((l) => l.rule === 'claimed_prefix')
        .map((l) => l.key)
        .sort(),
    ).toEqual(s.staged.slice(0, 2).sort());
    expect(log.filter((e) => e.op === 'head').flatMap((e) => e.keys)).not.toContain(leaseKey(ns, s.dead));
    // At most one part per DeleteObjects of objects (the lease goes by itself, after its walk).
    expect(parts.size).toBeLessThanOrEqual(
      log.filter((e) => e.op === 'delete' && !e.keys.includes(leaseKey(ns, s.dead))).length,
    );

    // `gc passes`: each pass's totals, from its parts' names.
    // Both passes have the same clock, so the order of their ids is chance.
    const passes = await listGcPasses(store, { namespaces: [ns] });
    const [realPass, dryPass] = [passes.find((p) => !p.dryRun), passes.find((p) => p.dryRun)];
    const byRule = { claimed_prefix: 2, orphaned_prefix: 3, lease: 2, retired_segment: 1, lost_write: 1 };
    const sizes = [...done.values()].reduce((n, l) => n + l.size, 0);
    expect(realPass).toEqual({
      passId: passId(parseManifestPrefix(real.manifests[0] ?? '')?.passId),
      nowMs,
      dryRun: false,
      namespaces: [ns],
      parts: parts.size,
      objects: expected.length,
      bytes: sizes,
      byRule,
    });
    expect(dryPass).toMatchObject({ dryRun: true, objects: expected.length - 1, byRule: { ...byRule, lease: 1 } });
    // The live job's young segment and lease are in neither manifest, and the manifests survive the pass that wrote
    // them.
    for (const key of [...s.young, leaseKey(ns, newJobId())]) expect(done.has(key)).toBe(false);
    expect(await listManifestPasses(store, ns)).toHaveLength(2);
    const again = await pass({ namespaces: [ns] });
    expect(again.totals.objectsDeleted).toBe(0);
    expect(await listManifestPasses(store, ns)).toHaveLength(2);
  });

  it('manifests older than the retention are reclaimed by a later pass, each recorded in its manifest; younger ones and keys not of the grammar stay', async () => {
    const ns = namespaceId(uniqueId('retention').toLowerCase());
    await updateRoot(store, ns, (r) => r, { codec: jsonRootCodec });
    const { manifestRetentionMs } = settings;
    const totals = { byRule: { lost_write: 1 }, bytes: 3, dryRun: false };
    const expiredPass = newPassId(Date.now() - manifestRetentionMs - 60_000);
    const old = manifestPartKey(ns, expiredPass, totals);
    // A part named before part names carried their totals is reclaimed alike.
    const oldUnnamed = `${passManifestPrefix(ns, expiredPass)}part_${'0'.repeat(32)}.ndjson.gz`;
    const young = manifestPartKey(ns, newPassId(Date.now() - manifestRetentionMs + 600_000), totals);
    const foreign = `${manifestsPrefix(ns)}notes/readme.txt`;
    for (const key of [old, oldUnnamed, young, foreign]) await store.put(key, bytes(key));

    const report = await pass({ namespaces: [ns] });
    expect(report.totals.manifestPartsDeleted).toBe(2);
    const lines = await manifestOf(ns, report);
    const read = { passClockMs: passClockMs(expiredPass) };
    expect([...lines.values()].sort((a, b) => (a.key < b.key ? -1 : 1))).toEqual(
      [old, oldUnnamed].sort().map((key) => expect.objectContaining({ key, rule: 'expired_manifest', read })),
    );
    const left = (await store.list({ prefix: manifestsPrefix(ns) })).objects.map((o) => o.key);
    for (const key of [old, oldUnnamed]) expect(left).not.toContain(key);
    for (const key of [young, foreign]) expect(left).toContain(key);
  });
});
