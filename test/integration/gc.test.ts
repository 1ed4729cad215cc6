/**
 * The collector pass against the real Temporal dev server and MinIO, at timings shrunk to seconds.
 * The tests that depend on the format (a compaction's published outputs, a publication landing
 * during a pass) run on both test formats (support/formats.ts), one worker each; the rest concern
 * leases and job prefixes only and run on the reference worker.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { setImmediate, setTimeout as sleep } from 'node:timers/promises';
import { WorkflowFailedError, type Client } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { Worker } from '@temporalio/worker';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { describeGcSchedule, ensureGcSchedule, startCompaction, triggerGcPass } from '../../src/client';
import {
  compactionsPrefix,
  familyGroup,
  jobId,
  jobPrefix,
  leaseKey,
  namespaceId,
  namespacePrefix,
  newJobId,
  newSegmentId,
  rootKey,
  stagedSegmentKey,
  STORE_PROBE_PREFIX,
  type MetadataCompactionId,
  type NamespaceId,
} from '../../src/keys';
import { createLeaseState, decodeLease, encodeLease } from '../../src/lease';
import {
  createJobLease,
  LeaseLostError,
  publishCompaction,
  readRoot,
  refreshJobLease,
  updateRoot,
} from '../../src/protocol';
import { claimLease } from '../../src/collector/claim';
import { jsonRootCodec, referencedKeys } from '../../src/root';
import { inBatches } from '../../src/store/batches';
import {
  StoreConfigError,
  StoreUnavailableError,
  type DeleteResult,
  type ListPage,
  type ListRequest,
  type ObjectStore,
} from '../../src/store';
import type { GcInput, GcPassReport, GcReport } from '../../src/workflows/gc';
import { LAST_MODIFIED_RESOLUTION_MS } from '../../src/store/clock-skew';
import { gate } from '../support/faults';
import { TEST_FORMATS } from '../support/formats';
import { openTestStore, type TestStore } from '../support/stores';
import {
  connectClient,
  expectReplays,
  quickExpirySettings,
  startTestWorker,
  uniqueId,
  workflowBundle,
  type RunningWorker,
} from '../support/temporal';
import { TEST_PASS_ID } from '../support/pass';

const settings = quickExpirySettings;
const { leaseExpiryMs, stagingGraceMs } = settings.timing;

/** What the worker's store does besides forwarding: faults injected by a test, and the calls it saw. */
interface Faults {
  failDeleteCall?: { call: number; error: () => Error };
  /** May wait, or throw instead of the delete. */
  beforeDelete?: (keys: readonly string[]) => Promise<void>;
  beforeLeaseCas?: (key: string) => Promise<void>;
  /** Listings under this prefix come in pages of `maxKeys`, so a short walk saves positions. */
  smallPages?: { prefix: string; maxKeys: number };
}

/**
 * The worker's view of the store: forwards to MinIO, records lists and deletes, and injects the current test's faults.
 * The
 * pass's clock check (an object of its own under store-probe/, written, read and deleted) is neither recorded nor
 * faulted.
 */
function faultyStore(
  inner: ObjectStore,
  faults: () => Faults,
  seen: { lists: ListRequest[]; deletes: string[][]; gets: string[]; cas: string[]; claims: string[] },
): ObjectStore {
  const isProbe = (key: string | undefined) => key?.startsWith(STORE_PROBE_PREFIX) === true;
  /** Records a delete request (a batch, or a lease's conditional delete) and runs the test's delete faults on it. */
  const deleting = async (keys: readonly string[]): Promise<void> => {
    seen.deletes.push([...keys]);
    const fail = faults().failDeleteCall;
    if (fail && seen.deletes.length === fail.call) throw fail.error();
    await faults().beforeDelete?.(keys);
  };
  return Object.assign(Object.create(inner) as ObjectStore, {
    get(key: string, options?: Parameters<ObjectStore['get']>[1]) {
      if (isProbe(key)) return inner.get(key, options);
      seen.gets.push(key);
      return inner.get(key, options);
    },
    async list(request: ListRequest): Promise<ListPage> {
      seen.lists.push(request);
      const small = faults().smallPages;
      return inner.list(small && request.prefix === small.prefix ? { ...request, maxKeys: small.maxKeys } : request);
    },
    async deleteMany(keys: readonly string[]): Promise<DeleteResult> {
      if (keys.every(isProbe)) return inner.deleteMany(keys);
      await deleting(keys);
      return inner.deleteMany(keys);
    },
    async deleteIfMatch(key: string, etag: string): Promise<void> {
      await deleting([key]);
      return inner.deleteIfMatch(key, etag);
    },
    async putIfMatch(key: string, body: Uint8Array, etag: string) {
      seen.cas.push(key);
      if (key.endsWith('/lease.json')) {
        await faults().beforeLeaseCas?.(key);
        // A claim replaces an active lease (or another pass's claim); a pass refreshing its own claim replaces its own.
        const owner = (lease: Uint8Array) =>
          (JSON.parse(new TextDecoder().decode(lease)) as { payload: { status: string; owner_id: string } }).payload;
        const stored = await inner.get(key).then(
          (o) => owner(o.body),
          () => undefined,
        );
        if (stored && !(stored.status === 'reaping' && stored.owner_id === owner(body).owner_id)) seen.claims.push(key);
      }
      return inner.putIfMatch(key, body, etag);
    },
    async putIfAbsent(key: string, body: Uint8Array) {
      // A pass claims a prefix without a lease by creating one.
      if (key.endsWith('/lease.json')) seen.claims.push(key);
      return inner.putIfAbsent(key, body);
    },
  });
}

describe('collector pass', () => {
  let fixture: TestStore;
  let store: ObjectStore;
  let worker: RunningWorker;
  let client: Client;
  let closeClient: () => Promise<void>;
  let faults: Faults = {};
  const seen = {
    lists: [] as ListRequest[],
    deletes: [] as string[][],
    gets: [] as string[],
    cas: [] as string[],
    claims: [] as string[],
  };

  beforeAll(async () => {
    fixture = await openTestStore('minio');
    store = fixture.store;
    worker = await startTestWorker(
      faultyStore(store, () => faults, seen),
      settings,
    );
    ({ client, close: closeClient } = await connectClient());
  });
  afterEach(() => {
    faults = {};
    seen.lists.length = 0;
    seen.deletes.length = 0;
    seen.gets.length = 0;
    seen.cas.length = 0;
    seen.claims.length = 0;
  });
  afterAll(async () => {
    await worker?.stop();
    await closeClient?.();
    await store?.close();
  });

  const newNamespace = () => namespaceId(uniqueId('gc').toLowerCase());
  const pass = (input: GcInput, workflowId = uniqueId('gc-pass'), taskQueue = worker.taskQueue): Promise<GcReport> =>
    client.workflow.execute('gcWorkflow', { taskQueue, workflowId, args: [input] });
  /** A pass a namespace's own problem left incomplete: it succeeds, and its report says `complete: false`. */
  const incompletePass = async (input: GcInput): Promise<GcReport> => {
    const report = (await pass(input)) as GcPassReport;
    expect(report.complete).toBe(false);
    return report;
  };
  /** A pass expected to fail (a walk or a namespace failed): its report travels in the failure's details. */
  const failingPass = async (input: GcInput): Promise<GcReport> => {
    const err: unknown = await pass(input).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(WorkflowFailedError);
    const cause = (err as WorkflowFailedError).cause;
    expect(cause).toBeInstanceOf(ApplicationFailure);
    expect((cause as ApplicationFailure).type).toBe('GcPassIncomplete');
    return (cause as ApplicationFailure).details?.[0] as GcReport;
  };

  /**
   * A namespace with job prefixes needs a root to be collected at all (spec 6a.5); the helpers below give it an empty
   * one.
   */
  const rooted = new Set<NamespaceId>();
  const ensureRoot = async (ns: NamespaceId) => {
    if (rooted.has(ns)) return;
    rooted.add(ns);
    await updateRoot(store, ns, (root) => root, { codec: jsonRootCodec });
  };
  const writeLease = async (ns: NamespaceId, job: MetadataCompactionId, heartbeatAtMs: number) => {
    await ensureRoot(ns);
    return store.put(
      leaseKey(ns, job),
      encodeLease(createLeaseState({ jobId: job, namespaceId: ns, ownerId: 'test-job', nowMs: heartbeatAtMs })),
    );
  };
  /** `count` staged objects of the job, under a root of the namespace (an empty one unless it has one). */
  const stage = async (ns: NamespaceId, job: MetadataCompactionId, count: number): Promise<string[]> => {
    await ensureRoot(ns);
    return stageObjects(ns, job, count);
  };
  const stageObjects = async (ns: NamespaceId, job: MetadataCompactionId, count: number): Promise<string[]> => {
    const keys = Array.from({ length: count }, () => stagedSegmentKey(ns, job, newSegmentId(), 'seg'));
    await inBatches(keys, 1, 32, (batch) =>
      Promise.all(batch.map((k) => store.put(k, new TextEncoder().encode(`staged ${k}`)))),
    );
    return keys;
  };
  const keysUnder = async (prefix: string): Promise<string[]> => {
    const keys: string[] = [];
    for (let after: string | undefined; ;) {
      const page = await store.list({ prefix, startAfter: after });
      keys.push(...page.objects.map((o) => o.key));
      after = page.objects.at(-1)?.key;
      if (!page.nextCursor) return keys;
    }
  };
  const exists = async (key: string) => (await keysUnder(key)).includes(key);
  /** The activity types a run scheduled, in order. */
  const scheduledActivities = async (workflowId: string): Promise<string[]> =>
    ((await client.workflow.getHandle(workflowId).fetchHistory()).events ?? []).flatMap(
      (e) => e.activityTaskScheduledEventAttributes?.activityType?.name ?? [],
    );
  /** Waits until objects written before this call are older than the staging grace by the store's clock. */
  const ageBeyondStagingGrace = () => sleep(stagingGraceMs + 500);

  it("a live job's staged output survives however old it is", async () => {
    const ns = newNamespace();
    const job = newJobId();
    const staged = await stage(ns, job, 5);
    await ageBeyondStagingGrace();
    await writeLease(ns, job, Date.now());

    const report = await pass({ namespaces: [ns] });

    expect(report.totals).toMatchObject({ prefixesSeen: 1, live: 1, claimed: 0, objectsDeleted: 0, leasesDeleted: 0 });
    expect(await keysUnder(jobPrefix(ns, job))).toEqual([leaseKey(ns, job), ...staged.sort()]);
    expect(decodeLease((await store.get(leaseKey(ns, job))).body, { namespaceId: ns, jobId: job }).status).toBe(
      'active',
    );
  });

  it("a dead job's output is kept at expiry + 1 ms and reclaimed once older than the staging grace; its lease is deleted last", async () => {
    const ns = newNamespace();
    const job = newJobId();
    const older = await stage(ns, job, 3);
    await ageBeyondStagingGrace();
    const heartbeatAtMs = Date.now();
    await writeLease(ns, job, heartbeatAtMs);
    const younger = await stage(ns, job, 4);
    await sleep(leaseExpiryMs + 100);

    const atExpiry = await pass({ namespaces: [ns], nowMs: heartbeatAtMs + leaseExpiryMs });
    expect(atExpiry.totals).toMatchObject({ live: 1, claimed: 0, objectsDeleted: 0 });

    const justExpired = await pass({ namespaces: [ns], nowMs: heartbeatAtMs + leaseExpiryMs + 1 });
    expect(justExpired.totals).toMatchObject({
      claimed: 1,
      objectsDeleted: older.length,
      retainedYoung: younger.length,
      leasesDeleted: 1,
    });
    expect(seen.deletes.map((d) => d.sort())).toEqual([older.sort(), [leaseKey(ns, job)]]);
    expect(await keysUnder(jobPrefix(ns, job))).toEqual(younger.sort());

    await ageBeyondStagingGrace();
    const later = await pass({ namespaces: [ns] });
    expect(later.totals).toMatchObject({ orphaned: 1, objectsDeleted: younger.length, retainedYoung: 0 });
    expect(await keysUnder(jobPrefix(ns, job))).toEqual([]);
  });

  it('staged output with no lease at all is reclaimed after the staging grace', async () => {
    const ns = newNamespace();
    const job = newJobId();
    const staged = await stage(ns, job, 6);
    const early = await pass({ namespaces: [ns] });
    expect(early.totals).toMatchObject({ orphaned: 1, objectsDeleted: 0, retainedYoung: staged.length });

    await ageBeyondStagingGrace();
    const report = await pass({ namespaces: [ns] });
    expect(report.totals).toMatchObject({
      orphaned: 1,
      objectsDeleted: staged.length,
      bytesDeleted: expect.any(Number),
    });
    expect(report.totals.bytesDeleted).toBeGreaterThan(0);
    expect(await keysUnder(jobPrefix(ns, job))).toEqual([]);
  });

  it('a lease that does not decode, or names another job or namespace than its key, fails that namespace and deletes nothing there; other namespaces are still collected', async () => {
    const [undecodable, otherJob, otherNamespace, healthy] = [
      newNamespace(),
      newNamespace(),
      newNamespace(),
      newNamespace(),
    ];
    const badJob = (ns: NamespaceId) => ({ ns, job: newJobId() });
    const a = badJob(undecodable);
    const b = badJob(otherJob);
    const c = badJob(otherNamespace);
    await store.put(leaseKey(a.ns, a.job), new TextEncoder().encode('{"kind":"compaction_lease", truncated'));
    await store.put(
      leaseKey(b.ns, b.job),
      encodeLease(createLeaseState({ jobId: newJobId(), namespaceId: b.ns, ownerId: 'x', nowMs: 1 })),
    );
    await store.put(
      leaseKey(c.ns, c.job),
      encodeLease(createLeaseState({ jobId: c.job, namespaceId: healthy, ownerId: 'x', nowMs: 1 })),
    );
    // Beside each corrupt lease, an expired job and an orphan that a healthy namespace would lose.
    const untouchable: string[] = [];
    const expiredJobs = [a, b, c].map(({ ns }) => ({ ns, job: newJobId() }));
    for (const { ns, job } of expiredJobs) await writeLease(ns, job, 1);
    for (const { ns, job } of [a, b, c, ...expiredJobs])
      untouchable.push(leaseKey(ns, job), ...(await stage(ns, job, 2)));
    for (const { ns } of [a, b, c]) untouchable.push(...(await stage(ns, newJobId(), 2)));
    const orphan = newJobId();
    await stage(healthy, orphan, 3);
    await ageBeyondStagingGrace();

    const report = await incompletePass({
      namespaces: [undecodable, otherJob, otherNamespace, healthy],
      namespaceConcurrency: 2,
    });

    expect([...report.corruptNamespaces].sort()).toEqual([undecodable, otherJob, otherNamespace].sort());
    expect(report.corruptLeases.map((l) => l.key).sort()).toEqual(
      [a, b, c].map(({ ns, job }) => leaseKey(ns, job)).sort(),
    );
    expect(report.corruptLeases.map((l) => l.reason).join('\n')).toMatch(
      /names job[\s\S]*names namespace|names namespace[\s\S]*names job/,
    );
    expect(report.totals).toMatchObject({ namespaces: 4, corrupt: 3, claimed: 0, orphaned: 1, objectsDeleted: 3 });
    for (const key of untouchable) expect(await exists(key), key).toBe(true);
    for (const { ns, job } of expiredJobs) {
      expect(decodeLease((await store.get(leaseKey(ns, job))).body, { namespaceId: ns, jobId: job }).status).toBe(
        'active',
      );
    }
    expect(await keysUnder(jobPrefix(healthy, orphan))).toEqual([]);
  });

  it('a live lease with a second, unchecksummed payload saying reaping is corrupt: nothing is claimed and the live job keeps its output', async () => {
    const ns = newNamespace();
    const job = newJobId();
    const staged = await stage(ns, job, 3);
    await ageBeyondStagingGrace();
    const live = new TextDecoder().decode(
      encodeLease(createLeaseState({ jobId: job, namespaceId: ns, ownerId: 'test-job', nowMs: Date.now() })),
    );
    // JSON.parse keeps the last `payload`; the checksum covers the first.
    const reaping = { ...(JSON.parse(live) as { payload: object }).payload, status: 'reaping' };
    await store.put(
      leaseKey(ns, job),
      new TextEncoder().encode(`${live.slice(0, -1)},"payload":${JSON.stringify(reaping)}}`),
    );

    const report = await incompletePass({ namespaces: [ns] });

    expect(report.totals).toMatchObject({ corrupt: 1, claimed: 0, live: 0, objectsDeleted: 0, leasesDeleted: 0 });
    expect(report.corruptLeases).toEqual([
      { key: leaseKey(ns, job), reason: expect.stringMatching(/member "payload" appears twice/) },
    ]);
    expect(report.corruptNamespaces).toEqual([ns]);
    expect(seen.deletes).toEqual([]);
    expect(seen.cas).toEqual([]);
    expect(await keysUnder(jobPrefix(ns, job))).toEqual([leaseKey(ns, job), ...staged.sort()]);
  });

  it('an error in the middle of a prefix walk still deletes the claimed lease, and a later pass finishes the leftovers', async () => {
    const ns = newNamespace();
    const job = newJobId();
    // Pages of 1000 with the lease first, and batches of at least 999 keys: the first delete batch is the first page's
    // 999 keys.
    const staged = await stage(ns, job, 2100);
    await ageBeyondStagingGrace();
    await writeLease(ns, job, Date.now() - leaseExpiryMs - 1000);
    // Delete permission revoked after the first batch: a non-retryable failure, the walk stops there.
    faults.failDeleteCall = {
      call: 2,
      error: () => new StoreConfigError('IAM policy', 'access denied to DeleteObjects (injected)'),
    };

    const report = await failingPass({ namespaces: [ns], keysPerFlush: 999 });

    expect(report.totals).toMatchObject({ claimed: 1, failedPrefixes: 1, leasesDeleted: 1 });
    expect(report.failures[0]?.key).toBe(jobPrefix(ns, job));
    expect(report.failures[0]?.message).toMatch(/access denied/);
    expect(await exists(leaseKey(ns, job))).toBe(false);
    const leftovers = await keysUnder(jobPrefix(ns, job));
    // The first page's batch settled before the failure; the failed batch and the pages after it are left, and
    // the report counts exactly what went.
    expect(
      staged
        .sort()
        .slice(0, 999)
        .some((k) => leftovers.includes(k)),
    ).toBe(false);
    expect(leftovers.length).toBeGreaterThan(0);
    expect(report.totals.objectsDeleted).toBe(staged.length - leftovers.length);

    faults = {};
    const later = await pass({ namespaces: [ns] });
    expect(later.totals).toMatchObject({ orphaned: 1, objectsDeleted: leftovers.length });
    expect(await keysUnder(jobPrefix(ns, job))).toEqual([]);
  });

  it('a job refresh and a collector claim racing on one lease: exactly one wins, 30 rounds', async () => {
    const ns = newNamespace();
    const winners = { job: 0, collector: 0 };
    for (let round = 0; round < 30; round++) {
      const job = newJobId();
      const held = await createJobLease(store, {
        namespaceId: ns,
        jobId: job,
        ownerId: 'racer',
        startedAtMs: Date.now() - leaseExpiryMs - 1000,
      });
      const [refresh, claim] = await Promise.allSettled([
        refreshJobLease(store, { namespaceId: ns, jobId: job }, held, () => Date.now()),
        claimLease(store, { namespaceId: ns, jobId: job }, { nowMs: Date.now(), leaseExpiryMs, passId: TEST_PASS_ID }),
      ]);
      if (claim.status === 'rejected') throw claim.reason;
      const final = decodeLease((await store.get(leaseKey(ns, job))).body, { namespaceId: ns, jobId: job });
      if (claim.value.owner === 'collector') {
        expect(refresh.status === 'rejected' && refresh.reason).toBeInstanceOf(LeaseLostError);
        expect(final.status).toBe('reaping');
        winners.collector++;
      } else {
        expect(claim.value.owner).toBe('job');
        expect(refresh.status).toBe('fulfilled');
        expect(final).toMatchObject({
          status: 'active',
          heartbeat_at_ms: refresh.status === 'fulfilled' ? refresh.value.lease.heartbeat_at_ms : -1,
        });
        winners.job++;
      }
    }
    expect(winners.job + winners.collector).toBe(30);
  });

  it('keys under the compactions prefix that match no grammar are retained and reported', async () => {
    const ns = newNamespace();
    const job = newJobId();
    const base = compactionsPrefix(ns);
    const strays = [
      `${base}README.txt`,
      `${base}tmp/upload-1`,
      `${base}cmp_NOTHEX/segments/seg_x.seg`,
      `${jobPrefix(ns, job)}notes.txt`,
      `${jobPrefix(ns, job)}segments/seg_short.seg`,
      `${jobPrefix(ns, job)}segments/nested/${newSegmentId()}.seg`,
    ];
    for (const key of strays) await store.put(key, new TextEncoder().encode('stray'));
    const staged = await stage(ns, job, 2);
    await ageBeyondStagingGrace();

    const report = await pass({ namespaces: [ns] });

    expect(report.totals).toMatchObject({
      orphaned: 1,
      objectsDeleted: staged.length,
      retainedUnrecognised: strays.length,
    });
    expect([...report.unrecognisedKeys].sort()).toEqual(
      [`${base}README.txt`, `${base}tmp/`, `${base}cmp_NOTHEX/`, ...strays.slice(3)].sort(),
    );
    for (const key of strays) expect(await exists(key), key).toBe(true);
  });

  it('a prefix of 2,500+ objects is reclaimed in batches, and a retried walk resumes from its heartbeat', async () => {
    const ns = newNamespace();
    const job = newJobId();
    const staged = (await stage(ns, job, 2600)).sort();
    await ageBeyondStagingGrace();
    // The second batch fails as a lost connection would: retryable, so Temporal runs the walk again.
    faults.failDeleteCall = {
      call: 2,
      error: () => new StoreUnavailableError(jobPrefix(ns, job), 'connection reset (injected)'),
    };

    // Pages of 1000 with the lease (the pass's own claim) first, and batches of 999 keys: each batch is a page's staged
    // keys.
    const report = await pass({ namespaces: [ns], keysPerFlush: 999 });

    expect(report.totals).toMatchObject({ orphaned: 1, objectsDeleted: staged.length, failedPrefixes: 0 });
    expect(await keysUnder(jobPrefix(ns, job))).toEqual([]);
    expect(seen.deletes.every((batch) => batch.length <= 1000)).toBe(true);
    expect(seen.deletes.length).toBeGreaterThanOrEqual(4);
    // The first attempt deletes the first page's batch and fails at the second; the retried attempt resumes after the
    // position its predecessor heartbeated instead of listing the prefix from its start, and the deletions before the
    // failure are counted once (the tally travels in the heartbeat too). Every other page continues a listing by
    // cursor.
    const walks = seen.lists.filter((l) => l.prefix === jobPrefix(ns, job));
    expect(walks.filter((l) => l.startAfter === undefined && l.cursor === undefined)).toHaveLength(1);
    expect(walks.filter((l) => l.startAfter === staged[998]).length).toBeGreaterThanOrEqual(1);
    expect(walks.every((l) => l.startAfter === undefined || l.cursor === undefined)).toBe(true);
  });

  it('a page of job prefixes is collected concurrently, at most prefixConcurrency at a time, each claimed, reclaimed, then released', async () => {
    const ns = newNamespace();
    const jobs = Array.from({ length: 10 }, () => newJobId());
    const staged = new Map<string, string[]>();
    for (const job of jobs) staged.set(job, await stage(ns, job, 2));
    await ageBeyondStagingGrace();
    for (const job of jobs) await writeLease(ns, job, Date.now() - leaseExpiryMs - 1000);
    const held = gate();
    let claims = 0;
    faults.beforeLeaseCas = async () => {
      claims++;
      await held.wait;
    };
    const workflowId = uniqueId('gc-pass');
    const run = pass({ namespaces: [ns], prefixConcurrency: 4 }, workflowId);

    // Four claims are held at once; a fifth, while they are held, would break the bound.
    await expect.poll(() => claims, { timeout: 30_000, interval: 100 }).toBe(4);
    await sleep(1000);
    expect(claims).toBe(4);
    held.open();
    const report = await run;

    expect(report.totals).toMatchObject({
      prefixesSeen: 10,
      claimed: 10,
      objectsDeleted: 20,
      leasesDeleted: 10,
      failedPrefixes: 0,
    });
    for (const job of jobs) {
      const segmentsDeleted = seen.deletes.findIndex((keys) => keys.includes(staged.get(job)?.[0] ?? ''));
      expect(segmentsDeleted, job).toBeGreaterThanOrEqual(0);
      expect(
        seen.deletes.findIndex((keys) => keys.includes(leaseKey(ns, job))),
        job,
      ).toBeGreaterThan(segmentsDeleted);
    }
    expect(await keysUnder(compactionsPrefix(ns))).toEqual([]);
    await expectReplays(client, `${workflowId}/${ns}`);
  });

  it('a page is collected in one activity, and its retried attempt resumes each prefix where it stood: no lease is claimed twice', async () => {
    const ns = newNamespace();
    const jobs = Array.from({ length: 6 }, () => newJobId());
    for (const job of jobs) await stage(ns, job, 1);
    await ageBeyondStagingGrace();
    for (const job of jobs) await writeLease(ns, job, Date.now() - leaseExpiryMs - 1000);
    // A walk's or a lease's delete fails mid-page as a lost connection would: retryable, so Temporal runs the page
    // again.
    faults.failDeleteCall = {
      call: 4,
      error: () => new StoreUnavailableError(compactionsPrefix(ns), 'connection reset (injected)'),
    };
    const workflowId = uniqueId('gc-pass');

    const report = await pass({ namespaces: [ns], prefixConcurrency: 2 }, workflowId);

    expect(report.totals).toMatchObject({
      prefixesSeen: 6,
      claimed: 6,
      live: 0,
      objectsDeleted: 6,
      leasesDeleted: 6,
      failedPrefixes: 0,
    });
    // A retry that started the page afresh would claim again with the survey's ETag, meet 412 and keep the prefix as
    // live.
    expect(seen.claims.sort()).toEqual(jobs.map((job) => leaseKey(ns, job)).sort());
    // The page's one root fence, after its claims: its retried attempt goes on from it and does not fence again.
    expect(seen.cas.filter((key) => key === rootKey(ns))).toHaveLength(1);
    expect(await keysUnder(compactionsPrefix(ns))).toEqual([]);
    const activities = await scheduledActivities(`${workflowId}/${ns}`);
    expect(activities.filter((name) => name === 'runPage')).toHaveLength(1);
    expect(
      activities.filter((name) => ['collectPrefixes', 'claimLease', 'reclaimPrefix', 'deleteLease'].includes(name)),
    ).toEqual([]);
    await expectReplays(client, `${workflowId}/${ns}`);
  });

  it("a page's commands run in one activity, and an attempt that fails half-way through goes on from its heartbeat: only the command in flight runs again", async () => {
    const ns = newNamespace();
    const jobs = Array.from({ length: 4 }, () => newJobId()).sort();
    for (const job of jobs) await stage(ns, job, 1);
    await ageBeyondStagingGrace();
    for (const job of jobs) await writeLease(ns, job, Date.now() - leaseExpiryMs - 1000);
    // The first walk's delete fails as a lost connection would (retryable): by then the page has listed, read the
    // root, surveyed, claimed all four and fenced the root, one command after the other in one attempt.
    let fired = 0;
    faults.beforeDelete = async (keys) => {
      if (fired > 0 || !keys.some((key) => key.startsWith(jobPrefix(ns, jobs[0]!)))) return;
      fired++;
      throw new StoreUnavailableError(jobPrefix(ns, jobs[0]!), 'connection reset (injected)');
    };
    const workflowId = uniqueId('gc-pass');

    const report = await pass({ namespaces: [ns], prefixConcurrency: 1 }, workflowId);

    expect(fired).toBe(1);
    expect(report.totals).toMatchObject({ prefixesSeen: 4, claimed: 4, objectsDeleted: 4, leasesDeleted: 4 });
    expect(report.totals.failedPrefixes).toBe(0);
    expect(await keysUnder(compactionsPrefix(ns))).toEqual([]);
    // Ran once: the listing, the survey (a lease's second GET is its release's), each claim and the fence.
    expect(seen.lists.filter((l) => l.prefix === compactionsPrefix(ns))).toHaveLength(1);
    for (const job of jobs)
      expect(
        seen.gets.filter((key) => key === leaseKey(ns, job)),
        job,
      ).toHaveLength(2);
    expect(seen.claims.sort()).toEqual(jobs.map((job) => leaseKey(ns, job)).sort());
    expect(seen.cas.filter((key) => key === rootKey(ns))).toHaveLength(1);
    // Ran twice: the walk in flight, and no other.
    const walks = (job: string) => seen.lists.filter((l) => l.prefix === jobPrefix(ns, jobId(job))).length;
    expect(jobs.map(walks)).toEqual([2, 1, 1, 1]);
    expect(await scheduledActivities(`${workflowId}/${ns}`)).toEqual(['runPage']);
    const { events } = await client.workflow.getHandle(`${workflowId}/${ns}`).fetchHistory();
    expect((events ?? []).flatMap((e) => e.activityTaskStartedEventAttributes?.attempt ?? [])).toEqual([2]);
    await expectReplays(client, `${workflowId}/${ns}`);
  });

  it("a page whose activity fails for good goes on command by command from where each prefix stood: each walk from its saved position, each lease claimed once and released, the report an uninterrupted pass's", async () => {
    const base = newNamespace();
    const [faulty, clean] = [namespaceId(`${base}-f`), namespaceId(`${base}-c`)];
    /**
     * Four expired leases; the first job prefix in listing order holds six old staged segments, the others one each.
     */
    const seed = async (ns: NamespaceId) => {
      const jobs = Array.from({ length: 4 }, () => newJobId()).sort();
      const walked = (await stage(ns, jobs[0] as MetadataCompactionId, 6)).sort();
      for (const job of jobs.slice(1)) await stage(ns, job, 1);
      return { jobs, walked };
    };
    const { jobs, walked } = await seed(faulty);
    const [walker, claimer] = jobs as [MetadataCompactionId, MetadataCompactionId];
    const { jobs: cleanJobs } = await seed(clean);
    await ageBeyondStagingGrace();
    for (const job of jobs) await writeLease(faulty, job, Date.now() - leaseExpiryMs - 1000);
    for (const job of cleanJobs) await writeLease(clean, job, Date.now() - leaseExpiryMs - 1000);
    const options = { prefixConcurrency: 2, keysPerFlush: 2 };
    const uninterrupted = await pass({ namespaces: [clean], ...options });

    // The page claims all four and fences the root first. The walker's prefix is listed two keys a page, so its walk
    // saves a position after its first batch (walked[0..2]). Then the second prefix's lease deletion is refused as a
    // missing IAM permission is (StoreConfig: non-retryable), so the page activity fails for good, as it does once its
    // retries are spent; and the walk's second batch fails (a lost connection).
    const midway = gate();
    const refused = gate();
    let failures = 0;
    faults = {
      smallPages: { prefix: jobPrefix(faulty, walker), maxKeys: 2 },
      beforeDelete: async (keys) => {
        if (keys.includes(leaseKey(faulty, claimer)) && failures === 0) {
          await midway.wait;
          failures++;
          refused.open();
          throw new StoreConfigError('IAM policy', `${leaseKey(faulty, claimer)}: access denied (injected)`);
        }
        if (!keys.includes(walked[3] ?? '') || failures > 1) return;
        midway.open();
        await refused.wait;
        // The refused deletion reaches the page first (microtasks, no I/O in between): the page's failure is the
        // non-retryable one.
        await setImmediate();
        failures++;
        throw new StoreUnavailableError(jobPrefix(faulty, walker), 'connection reset (injected)');
      },
    };
    const workflowId = uniqueId('gc-pass');

    const report = await pass({ namespaces: [faulty], ...options }, workflowId);

    expect(failures).toBe(2);
    expect(report.totals).toEqual(uninterrupted.totals);
    expect(report.totals).toMatchObject({
      prefixesSeen: 4,
      claimed: 4,
      live: 0,
      objectsDeleted: 9,
      leasesDeleted: 4,
      failedPrefixes: 0,
    });
    expect(await keysUnder(compactionsPrefix(faulty))).toEqual([]);
    // Each lease is claimed once, all in the page (a second claim with the survey's ETag would meet 412), and the root
    // fenced once.
    const claims = seen.claims.filter((key) => key.startsWith(compactionsPrefix(faulty)));
    expect(claims.sort()).toEqual(jobs.map((job) => leaseKey(faulty, job)).sort());
    expect(seen.cas.filter((key) => key === rootKey(faulty))).toHaveLength(1);
    // The walk is listed from its start once, in the page; the fallback's walk goes on after its saved position.
    const walks = seen.lists.filter((l) => l.prefix === jobPrefix(faulty, walker));
    expect(walks.filter((l) => l.startAfter === undefined && l.cursor === undefined)).toHaveLength(1);
    expect(walks.filter((l) => l.startAfter === walked[2])).toHaveLength(1);
    const activities = await scheduledActivities(`${workflowId}/${faulty}`);
    const scheduled = (name: string) => activities.filter((n) => n === name).length;
    // The page's one activity, then the fallback's from where each prefix stood: no claim and no second fence (the page
    // made
    // them), the walker's walk resumed and any walk the page had not finished, and a release for each of those and for
    // the
    // claimer's lease. (How many walks the page finished varies: a walk gives up its lane while its manifest part is
    // written.)
    expect(
      Object.fromEntries(
        ['runPage', 'collectPrefixes', 'claimLease', 'fenceRoot'].map((name) => [name, scheduled(name)]),
      ),
    ).toEqual({ runPage: 1, collectPrefixes: 0, claimLease: 0, fenceRoot: 0 });
    expect(scheduled('reclaimPrefix')).toBeGreaterThanOrEqual(1);
    expect(scheduled('deleteLease')).toBe(scheduled('reclaimPrefix') + 1);
    await expectReplays(client, `${workflowId}/${faulty}`);
  });

  it('a namespace that fits in one page reads each lease once to decide, and a claimed one once more before its release: a live lease costs one GET, a claim a GET, a CAS and a GET', async () => {
    const ns = newNamespace();
    const [live, expired, orphans] = [0, 1, 2].map(() => Array.from({ length: 3 }, () => newJobId()));
    for (const job of [...(expired ?? []), ...(orphans ?? [])]) await stage(ns, job, 1);
    await ageBeyondStagingGrace();
    for (const job of expired ?? []) await writeLease(ns, job, Date.now() - leaseExpiryMs - 1000);
    for (const job of live ?? []) await writeLease(ns, job, Date.now() + 60_000);
    const workflowId = uniqueId('gc-pass');

    const report = await pass({ namespaces: [ns] }, workflowId);

    // The orphans' leases too: the pass claimed each prefix by creating one, and released it.
    expect(report.totals).toMatchObject({
      prefixesSeen: 9,
      live: 3,
      claimed: 3,
      orphaned: 3,
      objectsDeleted: 6,
      leasesDeleted: 6,
    });
    const claimed = [...(expired ?? []), ...(orphans ?? [])].map((job) => leaseKey(ns, job));
    const leaseReads = seen.gets.filter((key) => key.endsWith('/lease.json'));
    expect(leaseReads.sort()).toEqual([...(live ?? []).map((job) => leaseKey(ns, job)), ...claimed, ...claimed].sort());
    expect(seen.claims.sort()).toEqual(claimed.sort());
    // And one root fence (spec 6b) for the page's claims of leases jobs wrote.
    expect(seen.cas.filter((key) => key === rootKey(ns))).toHaveLength(1);
    await expectReplays(client, `${workflowId}/${ns}`);
  });

  it('a namespace of several pages reads each lease twice (the corruption scan, then the owners) and claims each expired lease once', async () => {
    const ns = newNamespace();
    const jobs = Array.from({ length: 7 }, () => newJobId()).sort();
    for (const job of jobs) await stage(ns, job, 1);
    await ageBeyondStagingGrace();
    const expired = jobs.filter((_, i) => i % 2 === 0);
    for (const job of jobs)
      await writeLease(ns, job, expired.includes(job) ? Date.now() - leaseExpiryMs - 1000 : Date.now() + 60_000);

    const report = await pass({ namespaces: [ns], prefixesPerPage: 3 });

    expect(report.totals).toMatchObject({
      prefixesSeen: 7,
      live: 3,
      claimed: 4,
      orphaned: 0,
      objectsDeleted: 4,
      leasesDeleted: 4,
    });
    // Twice each to decide, and each claimed lease once more before its release.
    const leaseReads = seen.gets.filter((key) => key.endsWith('/lease.json')).sort();
    expect(leaseReads).toEqual(
      [
        ...jobs.flatMap((job) => [leaseKey(ns, job), leaseKey(ns, job)]),
        ...expired.map((job) => leaseKey(ns, job)),
      ].sort(),
    );
    expect(seen.claims.sort()).toEqual(expired.map((job) => leaseKey(ns, job)).sort());
    // One root fence per page that claimed (each of the three pages holds an expired lease).
    expect(seen.cas.filter((key) => key === rootKey(ns))).toHaveLength(3);
  });

  it('a corrupt lease in a page collected concurrently fails its namespace, which loses nothing; another namespace is collected', async () => {
    const [ns, healthy] = [newNamespace(), newNamespace()];
    const jobs = Array.from({ length: 12 }, () => newJobId()).sort();
    const corrupt = jobs[5] as MetadataCompactionId;
    for (const job of jobs) await stage(ns, job, 2);
    const orphan = newJobId();
    await stage(healthy, orphan, 2);
    await ageBeyondStagingGrace();
    // Around the corrupt lease, in the same page: expired leases and orphans that a healthy namespace would lose.
    for (const [i, job] of jobs.entries())
      if (job !== corrupt && i % 2 === 0) await writeLease(ns, job, Date.now() - leaseExpiryMs - 1000);
    await store.put(leaseKey(ns, corrupt), new TextEncoder().encode('{"kind":"compaction_lease", truncated'));
    const before = await keysUnder(compactionsPrefix(ns));

    const report = await incompletePass({
      namespaces: [ns, healthy],
      prefixConcurrency: 8,
      prefixesPerPage: jobs.length,
    });

    expect(report.corruptNamespaces).toEqual([ns]);
    expect(report.totals).toMatchObject({ corrupt: 1, claimed: 0, orphaned: 1, objectsDeleted: 2 });
    expect(seen.deletes.flat().filter((key) => key.startsWith(compactionsPrefix(ns)))).toEqual([]);
    expect(await keysUnder(compactionsPrefix(ns))).toEqual(before);
    expect(await keysUnder(jobPrefix(healthy, orphan))).toEqual([]);
  });

  it.each([
    ['a pass', 'gc-pass-history.json', 'gc-golden'],
    ['a namespace pass', 'gc-namespace-history.json', 'gc-golden/golden-gc'],
  ])(
    "%s recorded from today's code replays (pages of 2, 2 at a time: two expired leases, a live one, two orphans)",
    async (_, file, workflowId) => {
      // Recorded by `npm run golden` (scripts/write-golden.ts), under the workflow ids given here: a child's id is its
      // parent's and its namespace.
      // Runs of earlier versions are not replayed: upgrades drain (docs/operations.md).
      const history: unknown = JSON.parse(readFileSync(join(__dirname, '..', 'golden', file), 'utf8'));
      await Worker.runReplayHistory({ workflowBundle: await workflowBundle() }, history, workflowId);
    },
  );

  it.each([0, 101, 2.5])(
    'a prefixConcurrency of %s fails the pass as InvalidInput naming the option',
    async (prefixConcurrency) => {
      const err: unknown = await pass({ namespaces: [newNamespace()], prefixConcurrency }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(WorkflowFailedError);
      const cause = (err as WorkflowFailedError).cause;
      expect(cause).toBeInstanceOf(ApplicationFailure);
      expect((cause as ApplicationFailure).type).toBe('InvalidInput');
      expect((cause as ApplicationFailure).message).toMatch(/prefixConcurrency must be a whole number from 1 to 100/);
    },
  );

  it('a dry run deletes nothing and reports exactly what the following real pass deletes', async () => {
    const ns = newNamespace();
    const [dead, live, orphan] = [newJobId(), newJobId(), newJobId()];
    await stage(ns, dead, 4);
    await stage(ns, orphan, 3);
    await stage(ns, live, 2);
    await ageBeyondStagingGrace();
    await writeLease(ns, dead, Date.now() - leaseExpiryMs - 1000);
    await stage(ns, dead, 2);
    await writeLease(ns, live, Date.now());
    const before = await Promise.all(
      (await keysUnder(compactionsPrefix(ns))).map(async (k) => [k, (await store.head(k)).etag]),
    );
    const nowMs = Date.now();

    const dry = await pass({ namespaces: [ns], nowMs, dryRun: true });
    const after = await Promise.all(
      (await keysUnder(compactionsPrefix(ns))).map(async (k) => [k, (await store.head(k)).etag]),
    );
    expect(after).toEqual(before);
    expect(seen.deletes).toEqual([]);
    const real = await pass({ namespaces: [ns], nowMs });

    expect(dry.dryRun).toBe(true);
    expect(dry.totals).toEqual(real.totals);
    // Two leases: the dead job's, and the one the pass created to claim the orphan prefix.
    expect(real.totals).toMatchObject({
      live: 1,
      claimed: 1,
      orphaned: 1,
      objectsDeleted: 7,
      retainedYoung: 2,
      leasesDeleted: 2,
    });
    // The orphan's lease did not exist before: the pass created it to claim the prefix, then deleted it.
    expect(before.length - (await keysUnder(compactionsPrefix(ns))).length).toBe(
      real.totals.objectsDeleted + real.totals.leasesDeleted - real.totals.orphaned,
    );
  });

  it("ensureGcSchedule twice gives one schedule; a namespace's corrupt lease leaves it running, a failing pass pauses it", async () => {
    const scheduleId = uniqueId('gc-schedule');
    const ns = newNamespace();
    await ensureRoot(ns);
    await store.put(leaseKey(ns, newJobId()), new TextEncoder().encode('not a lease'));
    // No namespace list: the scheduled pass discovers every namespace of the bucket, two per page, and meets the
    // corrupt one.
    const options = { scheduleId, taskQueue: worker.taskQueue, pass: { prefixesPerPage: 2 } };
    await ensureGcSchedule(client, { ...options, cron: '*/15 * * * *' });
    const handle = await ensureGcSchedule(client, { ...options, every: '1 hour' });
    const passes = async () =>
      (await describeGcSchedule(client, { scheduleId })).info.recentActions.map((a) => a.action.workflow.workflowId);
    try {
      const ids: string[] = [];
      for await (const s of client.schedule.list()) if (s.scheduleId === scheduleId) ids.push(s.scheduleId);
      expect(ids).toEqual([scheduleId]);
      const described = await describeGcSchedule(client, { scheduleId });
      expect(described.spec.intervals?.map((i) => i.every)).toEqual([3_600_000]);
      expect(described.policies).toMatchObject({ overlap: 'SKIP', pauseOnFailure: true });

      await triggerGcPass(client, { scheduleId });
      await expect.poll(passes, { timeout: 30_000, interval: 250 }).toHaveLength(1);
      const incomplete = (await client.workflow.getHandle((await passes())[0]!).result()) as GcPassReport;
      expect(incomplete.complete).toBe(false);
      expect(incomplete.corruptNamespaces).toContain(ns);
      expect((await describeGcSchedule(client, { scheduleId })).state.paused).toBe(false);

      // A walk that fails for good (delete permission revoked in one namespace) fails the pass itself.
      const failing = newNamespace();
      await stage(failing, newJobId(), 1);
      await ageBeyondStagingGrace();
      faults.beforeDelete = async (keys) => {
        if (keys.some((k) => k.startsWith(namespacePrefix(failing))))
          throw new StoreConfigError('IAM policy', 'access denied to DeleteObjects (injected)');
      };
      await triggerGcPass(client, { scheduleId });
      await expect
        .poll(async () => (await describeGcSchedule(client, { scheduleId })).state.paused, {
          timeout: 60_000,
          interval: 250,
        })
        .toBe(true);
    } finally {
      await handle.delete();
    }
  });

  describe.each(TEST_FORMATS)('over compactions in the $name format', (format) => {
    let formatWorker: RunningWorker;
    beforeAll(async () => {
      formatWorker = await startTestWorker(
        faultyStore(store, () => faults, seen),
        settings,
        undefined,
        undefined,
        format.plugins,
      );
    });
    afterAll(() => formatWorker?.stop());

    it('a published job: its lease expires, the pass removes the lease and the tombstone segments publication left unnamed, its referenced segments stay', async () => {
      const ns = newNamespace();
      await format.writeInputs(store, ns, 'bindings', 3, 200);
      const result = await startCompaction(client, {
        namespaceId: ns,
        group: 'bindings',
        taskQueue: formatWorker.taskQueue,
      }).then((h) => h.result());
      expect(result.outcome).toBe('published');
      await sleep(Math.max(leaseExpiryMs, stagingGraceMs) + 500);

      const report = await pass({ namespaces: [ns] }, undefined, formatWorker.taskQueue);

      // Of the job prefix the lease goes, and the tombstone segments the root does not name (nothing was
      // registered during the job) and its input list. The three inputs the job superseded stay: this pass
      // is the first to see them retired, and stamps when (spec 6c.2).
      expect(result.tombstones.length).toBeGreaterThan(0);
      expect(report.totals).toMatchObject({
        claimed: 1,
        objectsDeleted: result.tombstones.length + 1,
        retiredDeleted: 0,
        retainedInGrace: 3,
        retainedReferenced: result.outputs.length,
        leasesDeleted: 1,
      });
      const job = jobId(result.jobId);
      expect(await keysUnder(jobPrefix(namespaceId(ns), job))).toEqual([...result.outputs].sort());
      expect((await readRoot(store, namespaceId(ns), format.plugins.rootCodec)).root.groups.bindings).toEqual(
        result.outputs,
      );
      // Past the reader grace since that stamp (the root's LastModified, to the second), the next pass deletes them
      // (spec 6a).
      await sleep(settings.timing.readerGraceMs + LAST_MODIFIED_RESOLUTION_MS + 500);
      const later = await pass({ namespaces: [ns] }, undefined, formatWorker.taskQueue);
      expect(later.totals).toMatchObject({ retiredDeleted: 3, retainedInGrace: 0 });
    });

    it('a publication that lands during a pass (after the pass read the lease and the root) never costs the job its segments', async () => {
      const ns = newNamespace();
      const group = familyGroup('bindings');
      const { keys: inputs } = await format.writeInputs(store, ns, group, 2, 50);
      const job = newJobId();
      await createJobLease(store, {
        namespaceId: ns,
        jobId: job,
        ownerId: 'slow-job',
        startedAtMs: Date.now() - leaseExpiryMs - 1000,
      });
      const outputs = await stageObjects(ns, job, 3);
      await ageBeyondStagingGrace();
      let published: string | undefined;
      faults.beforeLeaseCas = async (key) => {
        if (key !== leaseKey(ns, job) || published) return;
        const startedAt = performance.now();
        // The job wakes up and publishes between the collector's read of its (expired) lease and the claim CAS.
        const outcome = await publishCompaction(
          store,
          { namespaceId: ns, jobId: job, group, inputs, outputs },
          {
            budgetMs: settings.timing.publicationBudgetMs,
            maxRootRaces: 3,
            raceBackoff: { firstMs: 10, maxMs: 100 },
            clock: { leaseClockMs: () => Date.now(), elapsedMs: () => performance.now() - startedAt },
            codec: format.plugins.rootCodec,
          },
        );
        published = outcome.outcome;
      };

      const report = await pass({ namespaces: [ns] }, undefined, formatWorker.taskQueue);

      expect(published).toBe('published');
      expect(report.totals).toMatchObject({ live: 1, claimed: 0, objectsDeleted: 0 });
      expect(await keysUnder(jobPrefix(ns, job))).toEqual([leaseKey(ns, job), ...outputs.sort()]);
      expect([...referencedKeys((await readRoot(store, ns, format.plugins.rootCodec)).root)].sort()).toEqual(
        [...outputs].sort(),
      );
    });
  });
});
