/** The walk deletes one batch while it lists the next: overlap, and what a failure in the middle settles. */
import { setTimeout as sleep } from 'node:timers/promises';
import fc from 'fast-check';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  jobPrefix,
  namespaceId,
  newJobId,
  newSegmentId,
  stagedSegmentKey,
  type MetadataCompactionId,
} from '../../src/keys';
import { updateRoot } from '../../src/protocol';
import { jsonRootCodec } from '../../src/root';
import { EMPTY_TALLY, reclaimPrefix, START_OF_WALK, type ReclaimPosition } from '../../src/collector/walk';
import type { ReclaimOptions } from '../../src/collector/rules';
import { createEmbeddedObjectStore, StoreUnavailableError, type ListRequest, type ObjectStore } from '../../src/store';
import { gate } from '../support/faults';
import { TEST_PASS_ID } from '../support/pass';

const ns = namespaceId('pipeline');
const options: ReclaimOptions = {
  nowMs: Date.now() + 60_000,
  stagingGraceMs: 1000,
  readerGraceMs: 1000,
  keysPerFlush: 2,
  reportLimit: 10,
  passId: TEST_PASS_ID,
  leaseRefreshIntervalMs: 60_000,
};

describe('reclaim walk: pipeline', () => {
  let store: ObjectStore;
  let job: MetadataCompactionId;
  let keys: string[];

  beforeEach(async () => {
    store = createEmbeddedObjectStore({ path: ':memory:' });
    // The walk deletes only against a root it has read (spec 6a.5): an empty one references nothing.
    await updateRoot(store, ns, (root) => root, { codec: jsonRootCodec });
    job = newJobId();
    keys = Array.from({ length: 6 }, () => stagedSegmentKey(ns, job, newSegmentId(), 'seg')).sort();
    for (const k of keys) await store.put(k, new TextEncoder().encode(k));
  });
  afterEach(() => store.close());

  /** Pages of two keys; `onList` sees the number of each listing. */
  const pagedStore = (hooks: { onList?: (n: number) => void; deleteMany?: ObjectStore['deleteMany'] }): ObjectStore => {
    let lists = 0;
    return Object.assign(Object.create(store) as ObjectStore, {
      async list(request: ListRequest) {
        hooks.onList?.(++lists);
        return store.list({ ...request, maxKeys: 2 });
      },
      ...(hooks.deleteMany && { deleteMany: hooks.deleteMany }),
    });
  };
  const remaining = async () => (await store.list({ prefix: jobPrefix(ns, job) })).objects.map((o) => o.key);

  it('deletes a batch while the next page is listed', async () => {
    const nextListed = gate();
    let deletes = 0;
    const walked = pagedStore({
      onList: (n) => n === 2 && nextListed.open(),
      async deleteMany(batch) {
        // The first batch waits for the second listing: a walk that listed only after deleting would stall here.
        if (++deletes === 1)
          await Promise.race([
            nextListed.wait,
            sleep(5000).then(() => Promise.reject(new Error('the next page was not listed during the delete'))),
          ]);
        return store.deleteMany(batch);
      },
    });
    const tally = await reclaimPrefix(walked, { namespaceId: ns, jobId: job }, options, { codec: jsonRootCodec });
    expect(tally.objectsDeleted).toBe(keys.length);
    expect(await remaining()).toEqual([]);
  });

  it('a listing that fails while a batch is deleted settles the batch first: counted, position past it, no delete after the failure', async () => {
    const listFailed = gate();
    let deleting = false;
    const positions: ReclaimPosition[] = [];
    const walked = pagedStore({
      onList: (n) => {
        if (n !== 2) return;
        listFailed.open();
        throw new StoreUnavailableError(jobPrefix(ns, job), 'connection reset (injected)');
      },
      async deleteMany(batch) {
        deleting = true;
        await listFailed.wait;
        const result = await store.deleteMany(batch);
        deleting = false;
        return result;
      },
    });
    const walk = reclaimPrefix(walked, { namespaceId: ns, jobId: job }, options, {
      codec: jsonRootCodec,
      onProgress: (p) => positions.push(p),
    });
    await expect(walk).rejects.toBeInstanceOf(StoreUnavailableError);
    expect(deleting).toBe(false);
    expect(positions.at(-1)?.after).toBe(keys[1]);
    expect(positions.at(-1)?.tally.objectsDeleted).toBe(2);
    expect(await remaining()).toEqual(keys.slice(2));
  });

  it('a batch with per-key failures fails the walk after the batch before it settled; its deletions are counted, its position is not passed', async () => {
    let deletes = 0;
    const positions: ReclaimPosition[] = [];
    const walked = pagedStore({
      async deleteMany(batch) {
        if (++deletes !== 2) return store.deleteMany(batch);
        const [refused, ...rest] = batch;
        const result = await store.deleteMany(rest);
        return { deleted: result.deleted, failed: [{ key: refused ?? '', code: 'AccessDenied', message: 'injected' }] };
      },
    });
    const walk = reclaimPrefix(walked, { namespaceId: ns, jobId: job }, options, {
      codec: jsonRootCodec,
      onProgress: (p) => positions.push(p),
    });
    await expect(walk).rejects.toThrow(/1 deletes under .* failed/);
    expect(positions.at(-1)?.after).toBe(keys[1]);
    expect(positions.at(-1)?.tally.objectsDeleted).toBe(3);
    expect(await remaining()).toEqual([keys[2], ...keys.slice(4)]);
  });
});

describe('reclaim walk: listing', () => {
  const walkOptions: ReclaimOptions = { ...options, keysPerFlush: 3 };
  let store: ObjectStore;
  afterEach(() => store.close());

  /** A prefix of `segments` staged segments (random ids) and `junk` unrecognised keys, in pages of `pageSize`. */
  async function seeded(segments: number, junk: number) {
    store = createEmbeddedObjectStore({ path: ':memory:' });
    await updateRoot(store, ns, (root) => root, { codec: jsonRootCodec });
    const job = newJobId();
    const segmentKeys = Array.from({ length: segments }, () => stagedSegmentKey(ns, job, newSegmentId(), 'seg'));
    const junkKeys = Array.from({ length: junk }, (_, i) => `${jobPrefix(ns, job)}segments/seg_${i.toString(16)}`);
    for (const k of [...segmentKeys, ...junkKeys]) await store.put(k, new TextEncoder().encode(k));
    return { job, segmentKeys, junkKeys };
  }
  const counting = (pageSize: number, fail?: { atCall: number }) => {
    const stats = { listsInFlight: 0, maxListsInFlight: 0, calls: 0, requests: [] as ListRequest[] };
    const maybeFail = () => {
      if (++stats.calls === fail?.atCall) throw new StoreUnavailableError('bucket', 'connection reset (injected)');
    };
    const walked = Object.assign(Object.create(store) as ObjectStore, {
      async list(request: ListRequest) {
        maybeFail();
        stats.requests.push(request);
        stats.maxListsInFlight = Math.max(stats.maxListsInFlight, ++stats.listsInFlight);
        try {
          await sleep(1);
          return await store.list({ ...request, maxKeys: pageSize });
        } finally {
          stats.listsInFlight--;
        }
      },
      async deleteMany(batch: readonly string[]) {
        maybeFail();
        return store.deleteMany(batch);
      },
    });
    return { walked, stats };
  };

  it('a prefix whose first page is its whole listing costs one LIST', async () => {
    const { job, segmentKeys } = await seeded(5, 0);
    const { walked, stats } = counting(1000);
    const tally = await reclaimPrefix(walked, { namespaceId: ns, jobId: job }, walkOptions, { codec: jsonRootCodec });
    expect(tally.objectsDeleted).toBe(segmentKeys.length);
    expect(stats.requests).toHaveLength(1);
  });

  it('a longer prefix is one listing: each page after the first continues the one before by its cursor, one at a time', async () => {
    const { job, segmentKeys, junkKeys } = await seeded(60, 3);
    const { walked, stats } = counting(4);
    const tally = await reclaimPrefix(walked, { namespaceId: ns, jobId: job }, walkOptions, { codec: jsonRootCodec });
    expect(tally).toMatchObject({ objectsDeleted: segmentKeys.length, retainedUnrecognised: junkKeys.length });
    expect((await store.list({ prefix: jobPrefix(ns, job) })).objects.map((o) => o.key).sort()).toEqual(
      [...junkKeys].sort(),
    );
    expect(stats.requests).toHaveLength(Math.ceil((segmentKeys.length + junkKeys.length) / 4));
    expect(stats.maxListsInFlight).toBe(1);
    expect([stats.requests[0]?.startAfter, stats.requests[0]?.cursor]).toEqual([undefined, undefined]);
    expect(stats.requests.slice(1).every((r) => r.cursor !== undefined && r.startAfter === undefined)).toBe(true);
  });

  it('a resumed walk lists from its position with StartAfter, then by cursor', async () => {
    const { job, segmentKeys } = await seeded(12, 0);
    const sorted = [...segmentKeys].sort();
    const { walked, stats } = counting(4);
    const tally = await reclaimPrefix(walked, { namespaceId: ns, jobId: job }, walkOptions, {
      codec: jsonRootCodec,
      from: { after: sorted[3], tally: EMPTY_TALLY },
    });
    expect(tally.objectsDeleted).toBe(8);
    expect([stats.requests[0]?.startAfter, stats.requests[0]?.cursor]).toEqual([sorted[3], undefined]);
    expect(stats.requests.slice(1).every((r) => r.cursor !== undefined)).toBe(true);
  });

  it('a walk failing at any store call and resumed from its last position deletes every old segment once, retains the rest, and counts each key once', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 0, max: 80 }),
        fc.integer({ min: 0, max: 4 }),
        fc.integer({ min: 1, max: 60 }),
        fc.integer({ min: 1, max: 5 }),
        async (segments, junk, atCall, pageSize) => {
          const { job, segmentKeys, junkKeys } = await seeded(segments, junk);
          let position = START_OF_WALK;
          const { walked } = counting(pageSize, { atCall });
          const first = reclaimPrefix(walked, { namespaceId: ns, jobId: job }, walkOptions, {
            codec: jsonRootCodec,
            from: position,
            onProgress: (p) => (position = p),
          });
          const failed = await first.then(
            () => false,
            (err: unknown) => (expect(err).toBeInstanceOf(StoreUnavailableError), true),
          );
          if (failed) {
            // The retried attempt resumes from the last heartbeat, as the activity does.
            const retried = counting(pageSize);
            await reclaimPrefix(retried.walked, { namespaceId: ns, jobId: job }, walkOptions, {
              codec: jsonRootCodec,
              from: position,
              onProgress: (p) => (position = p),
            });
          }
          expect(position.tally).toMatchObject({
            objectsDeleted: segmentKeys.length,
            retainedUnrecognised: junkKeys.length,
            retainedYoung: 0,
          });
          expect((await store.list({ prefix: jobPrefix(ns, job) })).objects.map((o) => o.key).sort()).toEqual(
            [...junkKeys].sort(),
          );
          await store.close();
        },
      ),
      { numRuns: 150 },
    );
    store = createEmbeddedObjectStore({ path: ':memory:' });
    // The timeout: pages as small as one key, each listing 1 ms and one after another, up to 150 × 85 listings.
  }, 60_000);
});
