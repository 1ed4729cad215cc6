/** The walk deletes one batch while it lists the next: overlap, and what a failure in the middle settles. */
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { jobPrefix, namespaceId, newJobId, newSegmentId, stagedSegmentKey, type MetadataCompactionId } from '../../src/keys';
import { EMPTY_TALLY, reclaimPrefix, type ReclaimOptions, type ReclaimPosition } from '../../src/protocol/collector';
import { createEmbeddedObjectStore, StoreUnavailableError, type ListRequest, type ObjectStore } from '../../src/store';
import { gate } from '../support/faults';

const ns = namespaceId('pipeline');
const options: ReclaimOptions = { nowMs: Date.now() + 60_000, stagingGraceMs: 1000, dryRun: false, keysPerFlush: 2, reportLimit: 10 };

describe('reclaim walk', () => {
  let store: ObjectStore;
  let job: MetadataCompactionId;
  let keys: string[];

  beforeEach(async () => {
    store = createEmbeddedObjectStore({ path: ':memory:' });
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
        if (++deletes === 1) await Promise.race([nextListed.wait, sleep(5000).then(() => Promise.reject(new Error('the next page was not listed during the delete')))]);
        return store.deleteMany(batch);
      },
    });
    const tally = await reclaimPrefix(walked, { namespaceId: ns, jobId: job }, options, { after: undefined, tally: EMPTY_TALLY }, () => {});
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
    const walk = reclaimPrefix(walked, { namespaceId: ns, jobId: job }, options, { after: undefined, tally: EMPTY_TALLY }, (p) => positions.push(p));
    await expect(walk).rejects.toBeInstanceOf(StoreUnavailableError);
    expect(deleting).toBe(false);
    expect(positions.at(-1)).toMatchObject({ after: keys[1], tally: { objectsDeleted: 2 } });
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
    const walk = reclaimPrefix(walked, { namespaceId: ns, jobId: job }, options, { after: undefined, tally: EMPTY_TALLY }, (p) => positions.push(p));
    await expect(walk).rejects.toThrow(/1 deletes under .* failed/);
    expect(positions.at(-1)).toMatchObject({ after: keys[1], tally: { objectsDeleted: 3 } });
    expect(await remaining()).toEqual([keys[2], ...keys.slice(4)]);
  });
});
