/**
 * Publication at the protocol level, on MinIO: the budget, the fence, and lost root races; with the reference root.json
 * and the test's plug-in text root (issue 20).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { familyGroup, leaseKey, namespaceId, newJobId, newSegmentId, rootKey, stagedSegmentKey } from '../../src/keys';
import { claimLeaseState, encodeLease } from '../../src/lease';
import {
  createJobLease,
  publishCompaction,
  PublicationBudgetExceededError,
  readRoot,
  updateRoot,
} from '../../src/protocol';
import type { ObjectStore } from '../../src/store';
import { interceptStore } from '../support/faults';
import { TEST_FORMATS } from '../support/formats';
import { openTestStore, type TestStore } from '../support/stores';
import { uniqueId } from '../support/temporal';
import { TEST_PASS_ID } from '../support/pass';

const group = familyGroup('attributes');
const limits = { budgetMs: 1000, maxRootRaces: 3, raceBackoff: { firstMs: 10, maxMs: 100 } };

describe.each(TEST_FORMATS)('publication, $name format', (format) => {
  const codec = format.plugins.rootCodec;
  let fixture: TestStore;
  beforeAll(async () => {
    fixture = await openTestStore('minio');
  });
  afterAll(async () => fixture?.store.close());

  /** A namespace with two input segments and a job holding a fresh lease. */
  async function prepare() {
    const ns = namespaceId(uniqueId('pub').toLowerCase());
    const { keys: inputs } = await format.writeInputs(fixture.store, ns, group, 2, 20);
    const job = newJobId();
    const held = await createJobLease(fixture.store, {
      namespaceId: ns,
      jobId: job,
      ownerId: 'test',
      startedAtMs: Date.now(),
    });
    const outputs = [stagedSegmentKey(ns, job, newSegmentId(), format.extension)];
    return { ns, job, held, request: { namespaceId: ns, jobId: job, group, inputs, outputs } };
  }
  const realClock = () => {
    const start = performance.now();
    return { leaseClockMs: () => Date.now(), elapsedMs: () => performance.now() - start };
  };

  it('a root read slower than the budget, before the refresh, costs the attempt nothing: the budget runs from the refresh, and the order fences the CAS', async () => {
    const { ns, request } = await prepare();
    const order: string[] = [];
    const slow: ObjectStore = interceptStore(fixture.store, async (operation, key) => {
      if (key === rootKey(ns) || key === leaseKey(ns, request.jobId))
        order.push(`${operation} ${key === rootKey(ns) ? 'root' : 'lease'}`);
      if (key === rootKey(ns) && operation === 'get') await new Promise((r) => setTimeout(r, limits.budgetMs + 200));
    });
    await expect(publishCompaction(slow, request, { ...limits, clock: realClock(), codec })).resolves.toMatchObject({
      outcome: 'published',
    });
    // The root the CAS rests on is read before the lease is refreshed: a claim after the refresh, and its fence, come
    // after that read.
    expect(order).toEqual(['get root', 'get lease', 'putIfMatch lease', 'putIfMatch root']);
  });

  it('a slow refresh at the top of an attempt counts against the publication budget: that attempt publishes nothing', async () => {
    const { ns, request } = await prepare();
    const before = await fixture.store.get(rootKey(ns));
    // The heartbeat is read off the clock before the refresh is sent; the refresh then takes longer than the whole
    // budget.
    const slowRefresh: ObjectStore = interceptStore(fixture.store, async (operation, key) => {
      if (operation === 'putIfMatch' && key === leaseKey(ns, request.jobId))
        await new Promise((r) => setTimeout(r, limits.budgetMs + 200));
    });
    await expect(
      publishCompaction(slowRefresh, request, { ...limits, clock: realClock(), codec }),
    ).rejects.toBeInstanceOf(PublicationBudgetExceededError);
    expect((await fixture.store.get(rootKey(ns))).etag).toBe(before.etag);
  });

  it('a job whose lease was claimed is fenced at the top of the attempt and publishes nothing', async () => {
    const { ns, held, request } = await prepare();
    await fixture.store.putIfMatch(
      leaseKey(ns, request.jobId),
      encodeLease(claimLeaseState(held.lease, TEST_PASS_ID, Date.now())),
      held.etag,
    );
    const before = await fixture.store.get(rootKey(ns));
    await expect(
      publishCompaction(fixture.store, request, { ...limits, clock: realClock(), codec }),
    ).resolves.toMatchObject({
      outcome: 'fenced',
    });
    expect((await fixture.store.get(rootKey(ns))).etag).toBe(before.etag);
  });

  it('a root that changes under every attempt is a bounded number of lost races, then superseded', async () => {
    const { ns, request } = await prepare();
    const racing = interceptStore(fixture.store, async (operation, key) => {
      // Another writer slips a harmless change in between our read and our CAS, every time.
      if (operation === 'putIfMatch' && key === rootKey(ns))
        await updateRoot(fixture.store, ns, (root) => ({ ...root, generation: root.generation + 1 }), { codec });
    });
    await expect(publishCompaction(racing, request, { ...limits, clock: realClock(), codec })).resolves.toEqual({
      outcome: 'superseded',
      lostRaces: 3,
    });
    const { root } = await readRoot(fixture.store, ns, codec);
    expect(root.groups[group]).toEqual(request.inputs);
  });
});
