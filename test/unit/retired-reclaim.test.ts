/**
 * The reclaim of retired segments streams like the walk: batches as it lists, one listing per job prefix, and a
 * retry resumes from its position.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  inputSegmentKey,
  inputSegmentsPrefix,
  jobPrefix,
  namespaceId,
  newJobId,
  newSegmentId,
  stagedSegmentKey,
} from '../../src/keys';
import { readRoot, updateRoot } from '../../src/protocol';
import { reclaimRetiredSegments, type RetiredPosition } from '../../src/collector/retired-reclaim';
import type { RetiredReclaimOptions } from '../../src/collector/rules';
import { jsonRootCodec } from '../../src/root';
import { createEmbeddedObjectStore, StoreUnavailableError, type ListRequest, type ObjectStore } from '../../src/store';

const ns = namespaceId('retiredstream');
const nowMs = Date.now() + 60_000;
const options: RetiredReclaimOptions = {
  nowMs,
  readerGraceMs: 1000,
  lostWriteGraceMs: 1000,
  keysPerFlush: 2,
  reportLimit: 10,
};
const bytes = (s: string) => new TextEncoder().encode(s);

describe('reclaim of retired segments: streaming', () => {
  let store: ObjectStore;
  /** Retired inputs (two never written: gone already), lost writes, and retired outputs of two jobs (one gone). */
  let retiredInputs: string[];
  let lostWrites: string[];
  let retiredOutputs: string[];
  const jobs = [newJobId(), newJobId()];

  beforeEach(async () => {
    store = createEmbeddedObjectStore({ path: ':memory:' });
    retiredInputs = Array.from({ length: 6 }, () => inputSegmentKey(ns, newSegmentId(), 'mseg'));
    lostWrites = Array.from({ length: 4 }, () => inputSegmentKey(ns, newSegmentId(), 'mseg'));
    retiredOutputs = jobs.flatMap((job) =>
      Array.from({ length: 3 }, () => stagedSegmentKey(ns, job, newSegmentId(), 'mseg')),
    );
    const written = [...retiredInputs.slice(2), ...lostWrites, ...retiredOutputs.slice(1)];
    for (const k of written) await store.put(k, bytes(k));
    const retired = [...retiredInputs, ...retiredOutputs].map((key) => ({ key, retired_at_ms: 1 }));
    await updateRoot(store, ns, (root) => ({ ...root, retired }), { codec: jsonRootCodec });
  });
  afterEach(() => store.close());

  /** Pages of two keys; `onList` sees each request. */
  const pagedStore = (hooks: {
    onList?: (request: ListRequest) => void;
    deleteMany?: ObjectStore['deleteMany'];
  }): ObjectStore =>
    Object.assign(Object.create(store) as ObjectStore, {
      async list(request: ListRequest) {
        hooks.onList?.(request);
        return store.list({ ...request, maxKeys: 2 });
      },
      ...(hooks.deleteMany && { deleteMany: hooks.deleteMany }),
    });
  const left = async (prefix: string) => (await store.list({ prefix })).objects.map((o) => o.key);
  const expectAllReclaimed = async () => {
    expect(await left(inputSegmentsPrefix(ns))).toEqual([]);
    for (const job of jobs) expect(await left(jobPrefix(ns, job))).toEqual([]);
    expect((await readRoot(store, ns, jsonRootCodec)).root.retired ?? []).toEqual([]);
  };

  it('deletes its first batch before the listing of metadata/segments/ has ended', async () => {
    let listed = 0;
    let listedAtFirstDelete: number | undefined;
    const streamed = pagedStore({
      onList: (r) => void (r.prefix === inputSegmentsPrefix(ns) && listed++),
      deleteMany: (keys) => {
        listedAtFirstDelete ??= listed;
        return store.deleteMany(keys);
      },
    });
    await reclaimRetiredSegments(streamed, ns, options, { codec: jsonRootCodec });
    expect(listed).toBe(4);
    expect(listedAtFirstDelete).toBe(1);
    await expectAllReclaimed();
  });

  it('looks up the due retired outputs with one listing per job prefix, not one per output', async () => {
    const listings: string[] = [];
    await reclaimRetiredSegments(
      pagedStore({ onList: (r) => listings.push(r.prefix ?? '') }),
      ns,
      { ...options, keysPerFlush: 100 },
      { codec: jsonRootCodec },
    );
    // Two keys a page: a prefix of three objects (the lease-less job's outputs) is two pages of one listing.
    for (const job of jobs) expect(listings.filter((p) => p === jobPrefix(ns, job)).length).toBeLessThanOrEqual(2);
    expect(listings.filter((p) => p.startsWith(jobPrefix(ns, jobs[0]!)) && p !== jobPrefix(ns, jobs[0]!))).toEqual([]);
    await expectAllReclaimed();
  });

  it('counts the deleted, the lost writes and the records of segments already gone, and leaves nothing', async () => {
    const outcome = await reclaimRetiredSegments(store, ns, options, { codec: jsonRootCodec });
    expect('tally' in outcome && outcome.tally).toMatchObject({
      retiredDeleted: 9,
      lostWritesDeleted: 4,
      retiredRecordsDropped: 12,
    });
    await expectAllReclaimed();
  });

  it('a retried reclaim resumes from its saved position: nothing settled is listed again, and its tally counts on to the whole', async () => {
    const positions: RetiredPosition[] = [];
    let deletes = 0;
    const failing = pagedStore({
      deleteMany: (keys) => {
        if (++deletes === 3) throw new StoreUnavailableError(keys[0] ?? '', 'connection reset (injected)');
        return store.deleteMany(keys);
      },
    });
    await expect(
      reclaimRetiredSegments(failing, ns, options, { codec: jsonRootCodec, onProgress: (p) => positions.push(p) }),
    ).rejects.toBeInstanceOf(StoreUnavailableError);
    const saved = positions.at(-1) as RetiredPosition;
    expect(saved.after).toBeDefined();
    expect(saved.tally.retiredDeleted + saved.tally.lostWritesDeleted).toBeGreaterThan(0);

    const requests: ListRequest[] = [];
    const outcome = await reclaimRetiredSegments(pagedStore({ onList: (r) => requests.push(r) }), ns, options, {
      codec: jsonRootCodec,
      from: JSON.parse(JSON.stringify(saved)) as RetiredPosition,
    });
    expect(requests[0]).toMatchObject({ prefix: inputSegmentsPrefix(ns), startAfter: saved.after });
    expect('tally' in outcome && outcome.tally).toMatchObject({
      retiredDeleted: 9,
      lostWritesDeleted: 4,
      retiredRecordsDropped: 12,
    });
    await expectAllReclaimed();
  });
});
