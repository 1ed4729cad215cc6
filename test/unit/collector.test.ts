/** The collector's decisions over the store port, on the embedded store with faults and clocks injected. */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  compactionsPrefix,
  jobPrefix,
  leaseKey,
  namespaceId,
  newJobId,
  newSegmentId,
  rootKey,
  stagedSegmentKey,
  type MetadataCompactionId,
} from '../../src/keys';
import { createLeaseState, decodeLease, encodeLease } from '../../src/lease';
import {
  claimLease,
  ClaimLostError,
  deleteLease,
  refreshClaim,
  surveyLease,
  type ExpiredLease,
} from '../../src/collector/claim';
import { EMPTY_TALLY, reclaimPrefix, type ReclaimPosition } from '../../src/collector/walk';
import { findRootProblem } from '../../src/collector/root-problem';
import { listJobPrefixes } from '../../src/collector/listing';
import type { ReclaimOptions } from '../../src/collector/rules';
import { jsonRootCodec } from '../../src/root';
import { RootMissingError, updateRoot } from '../../src/protocol/root-io';
import {
  AmbiguousError,
  createEmbeddedObjectStore,
  PreconditionFailedError,
  type ListPage,
  type ObjectStore,
} from '../../src/store';
import { dryRunStore, type RecordedWrite } from '../../src/store/dry-run';
import { TEST_PASS_ID } from '../support/pass';

const ns = namespaceId('unit');
const expiry = 1000;
const bytes = (s: string) => new TextEncoder().encode(s);
/** A walk's rules a minute after now, with 1 s graces: every object written by the test is past them. */
const walkOptions = (overrides: Partial<ReclaimOptions> = {}): ReclaimOptions => ({
  nowMs: Date.now() + 60_000,
  stagingGraceMs: 1000,
  readerGraceMs: 1000,
  keysPerFlush: 1000,
  reportLimit: 10,
  passId: TEST_PASS_ID,
  leaseRefreshIntervalMs: 60_000,
  ...overrides,
});

describe('collector', () => {
  let store: ObjectStore;
  let job: MetadataCompactionId;
  const ref = () => ({ namespaceId: ns, jobId: job });
  const writeLease = (heartbeatAtMs: number) =>
    store.put(
      leaseKey(ns, job),
      encodeLease(createLeaseState({ jobId: job, namespaceId: ns, ownerId: 'w', nowMs: heartbeatAtMs })),
    );
  const status = async () => decodeLease((await store.get(leaseKey(ns, job))).body, ref()).status;

  beforeEach(async () => {
    store = createEmbeddedObjectStore({ path: join(mkdtempSync(join(tmpdir(), 'collector-')), 'store.sqlite') });
    // The walk deletes only against a root it has read (spec 6a.5): an empty one references nothing.
    await updateRoot(store, ns, (root) => root, { codec: jsonRootCodec });
    job = newJobId();
  });
  afterEach(() => store.close());

  it('a lease is live at heartbeat + expiry and claimed 1 ms later', async () => {
    await writeLease(5000);
    expect(
      await claimLease(store, ref(), { nowMs: 5000 + expiry, leaseExpiryMs: expiry, passId: TEST_PASS_ID }),
    ).toEqual({ owner: 'job', raced: false });
    expect(await status()).toBe('active');
    expect(
      await claimLease(store, ref(), { nowMs: 5001 + expiry, leaseExpiryMs: expiry, passId: TEST_PASS_ID }),
    ).toMatchObject({ owner: 'collector' });
    expect(await status()).toBe('reaping');
  });

  it('a dry run makes no claim but reports the prefix as the claim would leave it', async () => {
    await writeLease(1);
    const writes: RecordedWrite[] = [];
    expect(
      await claimLease(
        dryRunStore(store, (w) => writes.push(w)),
        ref(),
        { nowMs: 10_000, leaseExpiryMs: expiry, passId: TEST_PASS_ID },
      ),
    ).toMatchObject({ owner: 'collector' });
    expect(await status()).toBe('active');
    expect(writes).toEqual([expect.objectContaining({ kind: 'putIfMatch', key: leaseKey(ns, job) })]);
  });

  it('an ambiguous claim is re-read: a claim that landed is this collector’s, never a guess', async () => {
    await writeLease(1);
    const flaky = Object.assign(Object.create(store) as ObjectStore, {
      async putIfMatch(key: string, body: Uint8Array, etag: string) {
        await store.putIfMatch(key, body, etag);
        throw new AmbiguousError(key, 'response lost (injected)');
      },
    });
    expect(
      await claimLease(flaky, ref(), { nowMs: 10_000, leaseExpiryMs: expiry, passId: TEST_PASS_ID }),
    ).toMatchObject({ owner: 'collector' });
  });

  it('a survey claims nothing; a claim handed its read makes one CAS and no GET, and loses to a refresh made since, which one re-read confirms', async () => {
    await writeLease(1);
    const clock = { nowMs: 10_000, leaseExpiryMs: expiry, passId: TEST_PASS_ID };
    const surveyed = await surveyLease(store, ref(), clock);
    expect(surveyed.owner).toBe('expired');
    expect(await status()).toBe('active');
    const seen = surveyed as ExpiredLease;
    const calls: string[] = [];
    const counting = Object.assign(Object.create(store) as ObjectStore, {
      get: (key: string) => (calls.push(`get ${key}`), store.get(key)),
      putIfMatch: (key: string, body: Uint8Array, etag: string) => (
        calls.push(`cas ${key}`),
        store.putIfMatch(key, body, etag)
      ),
    });

    await writeLease(2); // the job refreshed after the survey: the survey's ETag no longer matches
    expect(await claimLease(counting, ref(), clock, { seen })).toEqual({ owner: 'job', raced: true });
    expect(await status()).toBe('active');
    expect(calls).toEqual([`cas ${leaseKey(ns, job)}`, `get ${leaseKey(ns, job)}`]);

    calls.length = 0;
    const again = (await surveyLease(store, ref(), clock)) as ExpiredLease;
    expect(await claimLease(counting, ref(), clock, { seen: again })).toMatchObject({ owner: 'collector' });
    expect(await status()).toBe('reaping');
    expect(calls).toEqual([`cas ${leaseKey(ns, job)}`]);
  });

  it('a refused claim is re-read: a lease found reaping is this collector’s, as when the reply of its own claim was lost', async () => {
    await writeLease(1);
    const lostReply = Object.assign(Object.create(store) as ObjectStore, {
      async putIfMatch(key: string, body: Uint8Array, etag: string) {
        await store.putIfMatch(key, body, etag);
        // What the SDK's retry of the same CAS meets once the first attempt landed.
        throw new PreconditionFailedError(key);
      },
    });
    expect(
      await claimLease(lostReply, ref(), { nowMs: 10_000, leaseExpiryMs: expiry, passId: TEST_PASS_ID }),
    ).toMatchObject({ owner: 'collector' });
    expect(await status()).toBe('reaping');
  });

  it('a survey settles live, missing, claimed and corrupt leases without a claim', async () => {
    const clock = { nowMs: 10_000, leaseExpiryMs: expiry, passId: TEST_PASS_ID };
    expect(await surveyLease(store, ref(), clock)).toEqual({ owner: 'none' });
    await writeLease(clock.nowMs);
    expect(await surveyLease(store, ref(), clock)).toEqual({ owner: 'job', raced: false });
    await writeLease(1);
    await claimLease(store, ref(), clock);
    expect(await surveyLease(store, ref(), clock)).toMatchObject({ owner: 'collector' });
    await store.put(leaseKey(ns, job), bytes('garbage'));
    expect(await surveyLease(store, ref(), clock)).toMatchObject({ owner: 'corrupt', key: leaseKey(ns, job) });
  });

  it('a prefix with no lease is claimed by creating a reaping lease of this pass; a corrupt one is reported by key', async () => {
    expect(await claimLease(store, ref(), { nowMs: 1, leaseExpiryMs: expiry, passId: TEST_PASS_ID })).toMatchObject({
      owner: 'collector',
      created: true,
    });
    expect(decodeLease((await store.get(leaseKey(ns, job))).body, ref())).toMatchObject({
      status: 'reaping',
      owner_id: TEST_PASS_ID,
    });
    await store.put(leaseKey(ns, job), bytes('garbage'));
    expect(await claimLease(store, ref(), { nowMs: 1, leaseExpiryMs: expiry, passId: TEST_PASS_ID })).toMatchObject({
      owner: 'corrupt',
      key: leaseKey(ns, job),
    });
  });

  it('a missing or future LastModified is young: nothing is deleted on an unknown age', async () => {
    const keys = [stagedSegmentKey(ns, job, newSegmentId(), 'seg'), stagedSegmentKey(ns, job, newSegmentId(), 'seg')];
    for (const k of keys) await store.put(k, bytes(k));
    const [undated, future] = keys.sort();
    const skewed = Object.assign(Object.create(store) as ObjectStore, {
      async list(request: Parameters<ObjectStore['list']>[0]): Promise<ListPage> {
        const page = await store.list(request);
        const objects = page.objects.map((o) => ({
          ...o,
          lastModified:
            o.key === undated ? undefined : o.key === future ? new Date(Date.now() + 3_600_000) : o.lastModified,
        }));
        return { ...page, objects };
      },
    });
    const options = walkOptions();
    const tally = await reclaimPrefix(skewed, ref(), options, { codec: jsonRootCodec });
    expect(tally).toMatchObject({ objectsDeleted: 0, retainedYoung: 2 });
    expect((await store.list({ prefix: jobPrefix(ns, job) })).objects).toHaveLength(2);
  });

  it('a walk whose namespace root is gone deletes nothing: a missing root is no evidence that nothing is referenced', async () => {
    const keys = [stagedSegmentKey(ns, job, newSegmentId(), 'seg'), stagedSegmentKey(ns, job, newSegmentId(), 'seg')];
    for (const k of keys) await store.put(k, bytes(k));
    await store.deleteMany([rootKey(ns)]);
    const options = walkOptions();
    await expect(reclaimPrefix(store, ref(), options, { codec: jsonRootCodec })).rejects.toThrow(RootMissingError);
    expect((await store.list({ prefix: jobPrefix(ns, job) })).objects).toHaveLength(2);
    expect(await findRootProblem(store, ns, jsonRootCodec)).toEqual({
      problem: { key: rootKey(ns), problem: 'missing', reason: expect.stringContaining('does not exist') },
    });
    await store.put(rootKey(ns), bytes('{"kind":"metadata_root"'));
    expect(await findRootProblem(store, ns, jsonRootCodec)).toMatchObject({
      problem: { problem: 'corrupt', reason: expect.stringContaining('not JSON') },
    });
  });

  it('a resumed walk starts after its position and keeps the tally it carried', async () => {
    const keys = Array.from({ length: 5 }, () => stagedSegmentKey(ns, job, newSegmentId(), 'seg')).sort();
    for (const k of keys) await store.put(k, bytes(k));
    const resume: ReclaimPosition = { after: keys[1], tally: { ...EMPTY_TALLY, objectsDeleted: 2 } };
    const positions: ReclaimPosition[] = [];
    const options = walkOptions();
    const tally = await reclaimPrefix(store, ref(), options, {
      codec: jsonRootCodec,
      from: resume,
      onProgress: (p) => positions.push(p),
    });
    expect(tally.objectsDeleted).toBe(5);
    expect((await store.list({ prefix: jobPrefix(ns, job) })).objects.map((o) => o.key)).toEqual(keys.slice(0, 2));
    expect(positions.at(-1)?.after).toBe(keys.at(-1));
  });

  it('a walk holding a claim refreshes it before each batch: it goes on while the claim is its own, ends deleting nothing once the lease is gone, and stops with ClaimLost once another pass holds it', async () => {
    const keys = Array.from({ length: 3 }, () => stagedSegmentKey(ns, job, newSegmentId(), 'seg')).sort();
    const stageAll = () => Promise.all(keys.map((k) => store.put(k, bytes(k))));
    const left = async () =>
      (await store.list({ prefix: jobPrefix(ns, job) })).objects.filter((o) => o.key !== leaseKey(ns, job)).length;
    // Every batch one key, every batch a refresh: a claim is a refresh interval old as soon as it is taken.
    const options = walkOptions({ keysPerFlush: 1, leaseRefreshIntervalMs: 0 });
    const claimNow = async () => {
      await writeLease(1);
      const claimed = await claimLease(store, ref(), { nowMs: 10_000, leaseExpiryMs: expiry, passId: TEST_PASS_ID });
      if (claimed.owner !== 'collector' || !claimed.claim) throw new Error(`no claim: ${claimed.owner}`);
      return claimed.claim;
    };
    let clock = Date.now() + 1000;
    const walkWith = (claim: Awaited<ReturnType<typeof claimNow>>, on: ObjectStore = store) =>
      reclaimPrefix(on, ref(), options, {
        codec: jsonRootCodec,
        why: { rule: 'claimed_prefix', claim },
        clockMs: () => clock++,
      });

    await stageAll();
    const own = await claimNow();
    expect(await walkWith(own)).toMatchObject({ objectsDeleted: 3 });
    expect(decodeLease((await store.get(leaseKey(ns, job))).body, ref())).toMatchObject({
      status: 'reaping',
      owner_id: TEST_PASS_ID,
    });
    expect(decodeLease((await store.get(leaseKey(ns, job))).body, ref()).heartbeat_at_ms).toBeGreaterThan(
      own.heartbeatAtMs,
    );

    // The lease is deleted after the first batch (as its holder does after a finished walk): the walk deletes nothing
    // more.
    await stageAll();
    const ended = await claimNow();
    let batches = 0;
    const deletingLease = Object.assign(Object.create(store) as ObjectStore, {
      // One key a page, so each batch is listed after the one before it settled.
      list: (request: Parameters<ObjectStore['list']>[0]) => store.list({ ...request, maxKeys: 1 }),
      async deleteMany(batch: readonly string[]) {
        const result = await store.deleteMany(batch);
        if (++batches === 1) await store.deleteMany([leaseKey(ns, job)]);
        return result;
      },
    });
    expect(await walkWith(ended, deletingLease)).toMatchObject({ objectsDeleted: 1 });
    expect(batches).toBe(1);
    expect(await left()).toBe(2);

    // Another pass took the claim over: the walk deletes nothing and names the claim it lost.
    await stageAll();
    const lost = await claimNow();
    await store.put(
      leaseKey(ns, job),
      encodeLease({
        ...decodeLease((await store.get(leaseKey(ns, job))).body, ref()),
        owner_id: 'gc_0000000009999_ffffffffffffffff',
      }),
    );
    await expect(walkWith(lost)).rejects.toThrow(ClaimLostError);
    expect(await left()).toBe(3);
  });

  it("a lease's delete refused because this pass's own refresh landed since is settled by a re-read and deletes the newer version; a dry run deletes nothing", async () => {
    await writeLease(1);
    const rules = { nowMs: 10_000, leaseExpiryMs: expiry, passId: TEST_PASS_ID };
    const writes: RecordedWrite[] = [];
    const dryRun = dryRunStore(store, (w) => writes.push(w));
    const wouldClaim = await claimLease(dryRun, ref(), rules);
    expect(
      await deleteLease(dryRun, ref(), TEST_PASS_ID, {
        claim: wouldClaim.owner === 'collector' ? wouldClaim.claim : undefined,
      }),
    ).toBe(true);
    expect(writes.map((w) => w.kind)).toEqual(['putIfMatch', 'delete']);
    expect(await status()).toBe('active');
    const claimed = await claimLease(store, ref(), rules);
    if (claimed.owner !== 'collector' || !claimed.claim) throw new Error('expected a claim');
    const conditions: string[] = [];
    let refreshed = false;
    // The pass's refresh, stuck until after its read of the lease, lands just before its delete.
    const late = Object.assign(Object.create(store) as ObjectStore, {
      async deleteIfMatch(key: string, etag: string) {
        conditions.push(etag);
        if (!refreshed)
          await refreshClaim(store, ref(), claimed.claim!, { passId: TEST_PASS_ID, clockMs: () => 20_000 }).then(
            () => (refreshed = true),
          );
        return store.deleteIfMatch(key, etag);
      },
    });
    expect(await deleteLease(late, ref(), TEST_PASS_ID, { claim: claimed.claim })).toBe(true);
    expect(conditions).toHaveLength(2);
    expect(conditions[0]).toBe(claimed.claim.etag);
    expect(conditions[1]).not.toBe(claimed.claim.etag);
    expect((await store.list({ prefix: jobPrefix(ns, job) })).objects).toEqual([]);
  });

  it('job prefixes are discovered page by page, resuming after a common prefix', async () => {
    const jobs = Array.from({ length: 5 }, () => newJobId()).sort();
    for (const j of jobs) await store.put(stagedSegmentKey(ns, j, newSegmentId(), 'seg'), bytes(j));
    const found: string[] = [];
    for (let after: string | undefined, pages = 0; ; pages++) {
      const page = await listJobPrefixes(store, ns, after, 2);
      found.push(...page.found);
      after = page.next;
      if (after === undefined) break;
      expect(pages).toBeLessThan(5);
    }
    expect(found).toEqual(jobs);
  });

  it('a folder marker at the compactions prefix, last on a page, hides none of the job prefixes after it', async () => {
    const jobs = Array.from({ length: 3 }, () => newJobId()).sort();
    for (const j of jobs) await store.put(stagedSegmentKey(ns, j, newSegmentId(), 'seg'), bytes(j));
    await store.put(compactionsPrefix(ns), bytes(''));
    const found: string[] = [];
    for (let after: string | undefined, pages = 0; pages < 10; pages++) {
      const page = await listJobPrefixes(store, ns, after, 1);
      found.push(...page.found);
      after = page.next;
      if (after === undefined) break;
    }
    expect(found).toEqual(jobs);
  });
});
