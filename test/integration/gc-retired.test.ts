/**
 * Retired segments (issue 17, spec 6a): a compaction's inputs leave the root retired, stay for
 * the reader grace, then the collector deletes them and drops their records; a writer's young
 * segment stays, its lost write goes after T; an untrusted root deletes nothing. The real
 * compaction and gcWorkflow on the Temporal dev server, the store on MinIO, on both test formats
 * (support/formats.ts), one worker each.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Client } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gcPassResult, startCompaction, type GcPassHandle } from '../../src/client';
import {
  inputSegmentKey,
  inputSegmentsPrefix,
  namespaceId,
  newSegmentId,
  rootKey,
  type NamespaceId,
} from '../../src/keys';
import { readRoot, updateRoot } from '../../src/protocol';
import { addSegments, type RootState } from '../../src/root';
import { StoreUnavailableError, type ListRequest, type ObjectStore } from '../../src/store';
import type { gcWorkflow, GcReport } from '../../src/workflows/gc';
import { TEST_FORMATS } from '../support/formats';
import { openTestStore, type TestStore } from '../support/stores';
import {
  connectClient,
  expectReplays,
  quickExpirySettings,
  startTestWorker,
  uniqueId,
  type RunningWorker,
} from '../support/temporal';

const settings = quickExpirySettings;
const { readerGraceMs, lostWriteGraceMs } = settings.timing;
const bindings = 'bindings' as Parameters<typeof addSegments>[1];
const bytes = (s: string) => new TextEncoder().encode(s);

/**
 * Hooks the worker's store runs before a root read or a root CAS of one namespace, to land a writer's change in the
 * middle of a pass.
 */
interface RootHooks {
  ns?: NamespaceId;
  /** Root GETs and CASes of `ns` seen so far. */
  seen?: { get: number; cas: number; deletes: number };
  beforeRootGet?: (count: number) => Promise<void>;
  beforeRootCas?: (count: number) => Promise<void>;
  /**
   * Listings of `ns`'s `metadata/segments/` come in pages of this many keys, each request recorded in `segmentsListed`.
   */
  segmentsPage?: number;
  segmentsListed?: ListRequest[];
  /** Runs before each DeleteObjects of `ns`'s input segments (numbered from 1); a throw fails it. */
  beforeSegmentsDelete?: (count: number) => Promise<void>;
}

function hookedStore(inner: ObjectStore, hooks: () => RootHooks): ObjectStore {
  return Object.assign(Object.create(inner) as ObjectStore, {
    async get(key: string, options?: Parameters<ObjectStore['get']>[1]) {
      const h = hooks();
      if (h.ns && h.seen && key === rootKey(h.ns)) await h.beforeRootGet?.(++h.seen.get);
      return inner.get(key, options);
    },
    async putIfMatch(key: string, body: Uint8Array, etag: string) {
      const h = hooks();
      if (h.ns && h.seen && key === rootKey(h.ns)) await h.beforeRootCas?.(++h.seen.cas);
      return inner.putIfMatch(key, body, etag);
    },
    async list(request: ListRequest) {
      const h = hooks();
      if (!h.ns || !h.segmentsPage || request.prefix !== inputSegmentsPrefix(h.ns)) return inner.list(request);
      h.segmentsListed?.push(request);
      return inner.list({ ...request, maxKeys: h.segmentsPage });
    },
    async deleteMany(keys: readonly string[]) {
      const h = hooks();
      if (h.ns && h.seen && keys[0]?.startsWith(inputSegmentsPrefix(h.ns)))
        await h.beforeSegmentsDelete?.(++h.seen.deletes);
      return inner.deleteMany(keys);
    },
  });
}

describe.each(TEST_FORMATS)('retired segments, $name format', (format) => {
  const { rootCodec } = format.plugins;
  let fixture: TestStore;
  let store: ObjectStore;
  let worker: RunningWorker;
  let client: Client;
  let closeClient: () => Promise<void>;
  let hooks: RootHooks = {};

  const newNamespace = (prefix: string) => namespaceId(uniqueId(prefix).toLowerCase());
  const exists = async (key: string) => (await store.list({ prefix: key })).objects.some((o) => o.key === key);
  const pass = async (
    ns: NamespaceId,
    nowMs?: number,
    dryRun = false,
  ): Promise<{ complete: boolean; report: GcReport; workflowId: string }> => {
    const workflowId = uniqueId('gc-retired');
    const handle: GcPassHandle = await client.workflow.start<typeof gcWorkflow>('gcWorkflow', {
      workflowId,
      taskQueue: worker.taskQueue,
      args: [{ namespaces: [ns], dryRun, ...(nowMs === undefined ? {} : { nowMs }) }],
    });
    return { ...(await gcPassResult(handle)), workflowId };
  };

  beforeAll(async () => {
    fixture = await openTestStore('minio');
    store = fixture.store;
    worker = await startTestWorker(
      hookedStore(store, () => hooks),
      settings,
      undefined,
      undefined,
      format.plugins,
    );
    ({ client, close: closeClient } = await connectClient());
  });
  afterAll(async () => {
    await worker?.stop();
    await closeClient?.();
    await store?.close();
  });

  it('retired inputs stay for the reader grace, a reader of the old root reads them all, then they and their records go', async () => {
    const ns = newNamespace('retire');
    const { keys: inputKeys } = await format.writeInputs(store, ns, bindings, 3, 50);
    const oldRoot = (await readRoot(store, ns, rootCodec)).root;
    const result = await (
      await startCompaction(client, { namespaceId: ns, group: bindings, taskQueue: worker.taskQueue })
    ).result();
    expect(result.outcome).toBe('published');

    const { root } = await readRoot(store, ns, rootCodec);
    expect(root.groups.bindings).toEqual(result.outputs);
    expect(root.retired?.map((r) => r.key).sort()).toEqual([...inputKeys].sort());
    expect(root.retired?.every((r) => r.visible_at_ms === undefined)).toBe(true);

    // Passes during the grace, the last with its clock 1 ms short of it, delete none of them; the reader of the old
    // root reads every
    // segment it names. The first pass stamps each retirement visible: the grace counts from there.
    const during = await pass(ns);
    expect(during.report.totals).toMatchObject({ retiredDeleted: 0, retainedInGrace: inputKeys.length });
    expect((await format.readRecords(store, oldRoot.groups.bindings ?? [])).length).toBeGreaterThan(0);
    const stamped = (await readRoot(store, ns, rootCodec)).root.retired ?? [];
    const visibleAt = Math.max(...stamped.map((r) => r.visible_at_ms ?? Number.POSITIVE_INFINITY));
    expect(visibleAt).toBeGreaterThanOrEqual(Math.max(...stamped.map((r) => r.retired_at_ms)));
    await sleep(Math.max(0, visibleAt + readerGraceMs - Date.now()) + 200);
    const early = await pass(ns, visibleAt + readerGraceMs - 1);
    expect(early.complete).toBe(true);
    expect(early.report.totals).toMatchObject({ retiredDeleted: 0, retainedInGrace: inputKeys.length });
    expect((await format.readRecords(store, oldRoot.groups.bindings ?? [])).length).toBeGreaterThan(0);

    const late = await pass(ns);
    expect(late.complete).toBe(true);
    expect(late.report.totals).toMatchObject({
      retiredDeleted: inputKeys.length,
      retiredRecordsDropped: inputKeys.length,
      retainedInGrace: 0,
    });
    for (const key of inputKeys) expect(await exists(key), key).toBe(false);
    const after = (await readRoot(store, ns, rootCodec)).root;
    expect(after.retired ?? []).toEqual([]);
    expect(after.groups.bindings).toEqual(result.outputs);
    expect((await format.readRecords(store, result.outputs)).length).toBeGreaterThan(0);
    await expectReplays(client, `${late.workflowId}/${ns}`);
  });

  it("a writer's young unreferenced segment survives; once older than the lost-write grace it is a lost write and goes", async () => {
    const ns = newNamespace('lost');
    await updateRoot(store, ns, (r) => r, { codec: rootCodec });
    const lost = inputSegmentKey(ns, newSegmentId(), format.extension);
    await store.put(lost, bytes('a writer died before publishing this'));
    const young = await pass(ns);
    expect(young.report.totals).toMatchObject({ retainedYoung: 1, lostWritesDeleted: 0 });
    expect(await exists(lost)).toBe(true);

    await sleep(lostWriteGraceMs + 500);
    const old = await pass(ns);
    expect(old.report.totals).toMatchObject({ lostWritesDeleted: 1, objectsDeleted: 1 });
    expect(await exists(lost)).toBe(false);
  });

  it('a dry run reports the retired segment and the lost write it would delete, and deletes and writes nothing', async () => {
    const ns = newNamespace('dry');
    const [due, lost] = [
      inputSegmentKey(ns, newSegmentId(), format.extension),
      inputSegmentKey(ns, newSegmentId(), format.extension),
    ];
    for (const k of [due, lost]) await store.put(k, bytes(k));
    const longAgo = Date.now() - readerGraceMs - 1000;
    // Retired, and seen retired (stamped visible) by an earlier pass, longer ago than the reader grace.
    await updateRoot(
      store,
      ns,
      (r): RootState => ({ ...r, retired: [{ key: due, retired_at_ms: longAgo, visible_at_ms: longAgo }] }),
      { codec: rootCodec },
    );
    const rootBefore = await store.get(rootKey(ns));
    await sleep(lostWriteGraceMs + 500);
    const { report } = await pass(ns, undefined, true);
    expect(report.totals).toMatchObject({
      retiredDeleted: 1,
      lostWritesDeleted: 1,
      retiredRecordsDropped: 1,
      objectsDeleted: 2,
      bytesDeleted: due.length + lost.length,
    });
    for (const k of [due, lost]) expect(await exists(k), k).toBe(true);
    expect((await store.get(rootKey(ns))).etag).toBe(rootBefore.etag);
  });

  it('a retired segment that the current root references again, in any group, is kept with its record', async () => {
    const ns = newNamespace('again');
    const key = inputSegmentKey(ns, newSegmentId(), format.extension);
    await store.put(key, bytes('referenced again'));
    await updateRoot(
      store,
      ns,
      (r): RootState => ({
        ...addSegments(r, 'inodes' as typeof bindings, [key]),
        retired: [{ key, retired_at_ms: 1 }],
      }),
      { codec: rootCodec },
    );
    const report = (await pass(ns)).report;
    expect(report.totals).toMatchObject({ retiredDeleted: 0, retainedReferenced: 1 });
    expect(await exists(key)).toBe(true);
    expect((await readRoot(store, ns, rootCodec)).root.retired).toEqual([
      { key, retired_at_ms: 1, visible_at_ms: expect.any(Number) },
    ]);
  });

  it.each([
    ['missing', async (_ns: NamespaceId) => {}],
    ['corrupt', async (ns: NamespaceId) => void (await store.put(rootKey(ns), bytes('{"kind":"metadata_root"')))],
  ])('a %s root deletes nothing under metadata/segments/ and is reported', async (problem, breakRoot) => {
    const ns = newNamespace(problem);
    const keys = [
      inputSegmentKey(ns, newSegmentId(), format.extension),
      inputSegmentKey(ns, newSegmentId(), format.extension),
    ];
    for (const k of keys) await store.put(k, bytes('old'));
    await breakRoot(ns);
    await sleep(lostWriteGraceMs + 500);
    const result = await pass(ns);
    expect(result.complete).toBe(false);
    expect(result.report.totals).toMatchObject({ skippedNamespaces: 1, objectsDeleted: 0 });
    expect(result.report.rootProblems).toEqual([expect.objectContaining({ namespaceId: ns, problem })]);
    expect((await store.list({ prefix: inputSegmentsPrefix(ns) })).objects.map((o) => o.key).sort()).toEqual(
      [...keys].sort(),
    );
  });

  it('a publication landing during a pass: the segment it names survives the batch, and the records CAS keeps the publication', async () => {
    const ns = newNamespace('race');
    const [due, adopted, published] = [0, 1, 2].map(() => inputSegmentKey(ns, newSegmentId(), format.extension)) as [
      string,
      string,
      string,
    ];
    for (const k of [due, adopted]) await store.put(k, bytes(k));
    const longAgo = Date.now() - readerGraceMs - 1000;
    await updateRoot(
      store,
      ns,
      (r): RootState => ({ ...r, retired: [{ key: due, retired_at_ms: longAgo, visible_at_ms: longAgo }] }),
      { codec: rootCodec },
    );
    await sleep(lostWriteGraceMs + 500);
    // `adopted` is a lost write when the pass lists it; a writer publishes it before the delete batch's root read (the
    // pass's third: it judged the root, then looked for retirements to stamp), and writes and publishes `published`
    // before
    // the collector's CAS that drops the record of `due`.
    hooks = {
      ns,
      seen: { get: 0, cas: 0, deletes: 0 },
      beforeRootGet: async (n) => {
        if (n === 3) await updateRoot(store, ns, (r) => addSegments(r, bindings, [adopted]), { codec: rootCodec });
      },
      beforeRootCas: async (n) => {
        if (n !== 1) return;
        await store.put(published, bytes(published));
        await updateRoot(store, ns, (r) => addSegments(r, bindings, [published]), { codec: rootCodec });
      },
    };
    try {
      const report = (await pass(ns)).report;
      expect(report.totals).toMatchObject({ retiredDeleted: 1, lostWritesDeleted: 0, retiredRecordsDropped: 1 });
    } finally {
      hooks = {};
    }
    expect(await exists(due)).toBe(false);
    expect(await exists(adopted)).toBe(true);
    expect(await exists(published)).toBe(true);
    const { root } = await readRoot(store, ns, rootCodec);
    expect(root.groups.bindings).toEqual([adopted, published]);
    expect(root.retired ?? []).toEqual([]);
  });

  it('a reclaim retried after a failed delete resumes from the position its attempt heartbeated: settled keys are not listed again, nothing is counted twice', async () => {
    const ns = newNamespace('resume');
    await updateRoot(store, ns, (r) => r, { codec: rootCodec });
    const lost = Array.from({ length: 6 }, () => inputSegmentKey(ns, newSegmentId(), format.extension)).sort();
    for (const k of lost) await store.put(k, bytes(k));
    await sleep(lostWriteGraceMs + 500);
    const segmentsListed: ListRequest[] = [];
    hooks = {
      ns,
      seen: { get: 0, cas: 0, deletes: 0 },
      segmentsPage: 2,
      segmentsListed,
      beforeSegmentsDelete: async (n) => {
        if (n === 2) throw new StoreUnavailableError(inputSegmentsPrefix(ns), 'connection reset (injected)');
      },
    };
    let result: Awaited<ReturnType<typeof pass>>;
    try {
      const handle = await client.workflow.start<typeof gcWorkflow>('gcWorkflow', {
        workflowId: uniqueId('gc-retired'),
        taskQueue: worker.taskQueue,
        args: [{ namespaces: [ns], dryRun: false, keysPerFlush: 2 }],
      });
      result = { ...(await gcPassResult(handle)), workflowId: handle.workflowId };
    } finally {
      hooks = {};
    }
    expect(result.complete).toBe(true);
    expect(result.report.totals).toMatchObject({ lostWritesDeleted: lost.length, objectsDeleted: lost.length });
    for (const key of lost) expect(await exists(key), key).toBe(false);
    // The first attempt listed from the start; the retry started after the first batch, the last position heartbeated.
    const fresh = segmentsListed.filter((r) => r.cursor === undefined);
    expect(fresh.map((r) => r.startAfter)).toEqual([undefined, lost[1]]);
  });
});
