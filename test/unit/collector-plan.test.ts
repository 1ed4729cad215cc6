/**
 * The collection of a page by the pass plan's own steps: stopping at a failed command, and resuming where each prefix
 * stood.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it, vi } from 'vitest';
import {
  compactionsPrefix,
  jobPrefix,
  leaseKey,
  namespaceId,
  newJobId,
  newPassId,
  newSegmentId,
  parseManifestPartKey,
  passId,
  stagedSegmentKey,
  type NamespaceId,
} from '../../src/keys';
import { createLeaseState, encodeLease } from '../../src/lease';
import { readRoot, updateRoot } from '../../src/protocol';
import {
  EMPTY_TALLY,
  REPORT_LIMIT,
  collectPrefixes,
  executeOnStore,
  readPassManifest,
  runNamespacePass,
  startNamespacePass,
  type CollectorCommand,
  type CollectorExecutor,
  type CollectorResult,
  type PageCollection,
  type PassRules,
  type SurveyedPrefix,
} from '../../src/collector';
import { createEmbeddedObjectStore, StoreUnavailableError, type ListRequest, type ObjectStore } from '../../src/store';
import { jsonRootCodec } from '../../src/root';
import { TEST_PASS_ID } from '../support/pass';
import { writeRoot } from '../support/roots';

const rules: PassRules = {
  nowMs: 1_000_000,
  leaseExpiryMs: 10_000,
  stagingGraceMs: 1000,
  readerGraceMs: 1000,
  lostWriteGraceMs: 1000,
  dryRun: false,
  prefixesPerPage: 100,
  prefixConcurrency: 2,
  keysPerFlush: 10,
  reportLimit: REPORT_LIMIT,
  passId: TEST_PASS_ID,
  leaseRefreshIntervalMs: 60_000,
  manifests: false,
};
const expired = (): SurveyedPrefix => ({ jobId: newJobId(), owner: { owner: 'expired', etag: '"e"', lease: '{}' } });

/**
 * Answers each command as the store would for an expired lease with one old staged segment; `failing` throws once for
 * its command.
 */
function scripted(failing?: (command: CollectorCommand) => boolean, fence: CollectorResult = { kind: 'rootFenced' }) {
  const commands: string[] = [];
  let failed = false;
  const execute: CollectorExecutor = async (command) => {
    await Promise.resolve();
    const jobId = 'jobId' in command ? command.jobId : '';
    if (!failed && failing?.(command)) {
      failed = true;
      throw new Error(`injected: ${command.kind} ${jobId}`);
    }
    commands.push(`${command.kind} ${jobId}`);
    switch (command.kind) {
      case 'claimLease':
        return {
          kind: 'claimed',
          owner: command.seen.owner === 'none' ? { owner: 'collector', created: true } : { owner: 'collector' },
        };
      case 'reclaimPrefix':
        return { kind: 'reclaimed', tally: { ...EMPTY_TALLY, objectsDeleted: 1, bytesDeleted: 6 } };
      case 'deleteLease':
        return { kind: 'leaseDeleted' };
      case 'fenceRoot':
        return fence;
      default:
        throw new Error(`unexpected ${command.kind}`);
    }
  };
  return { execute, commands };
}

describe('collecting a page by the pass plan', () => {
  it('a failed command starts no further prefix, lets those in flight release their leases, and a resume from where it stood redoes only that command', async () => {
    const prefixes = Array.from({ length: 5 }, expired);
    const victim = prefixes[0]!.jobId;
    const { execute, commands } = scripted((c) => c.kind === 'reclaimPrefix' && c.jobId === victim);
    let at: PageCollection | undefined;

    await expect(
      collectPrefixes(
        { kind: 'collectPrefixes', prefixes },
        { namespaceId: 'ns', rules, execute, onProgress: (p) => (at = p) },
      ),
    ).rejects.toThrow(/injected: reclaimPrefix/);

    // Every claim came first (then the fence); the second prefix, in flight beside the first, finished; none after them
    // started its walk.
    expect(at?.prefixes.map((p) => (p === null || p === 'done' ? p : p.command.kind))).toEqual([
      'reclaimPrefix',
      'done',
      'reclaimPrefix',
      'reclaimPrefix',
      'reclaimPrefix',
    ]);
    expect(at?.fenced).toBe(true);
    expect(commands.filter((c) => c.startsWith('deleteLease'))).toEqual([`deleteLease ${prefixes[1]!.jobId}`]);

    commands.length = 0;
    const report = await collectPrefixes(
      { kind: 'collectPrefixes', prefixes, ...(at && { from: at }) },
      { namespaceId: 'ns', rules, execute },
    );

    expect(report.totals).toMatchObject({ claimed: 5, objectsDeleted: 5, leasesDeleted: 5, failedPrefixes: 0 });
    // No prefix is claimed twice, and the page is not fenced twice: the first resumes at its walk, the second is done.
    expect(commands.filter((c) => c.startsWith('claimLease') || c.startsWith('fenceRoot'))).toEqual([]);
    expect(commands).toContain(`reclaimPrefix ${victim}`);
    expect(commands).toContain(`deleteLease ${victim}`);
  });

  it("a page resumed after a failed walk goes on from the walk's saved position, and its report equals an uninterrupted pass's", async () => {
    const store = createEmbeddedObjectStore({ path: ':memory:' });
    // A clock a minute ahead: the segments written now are older than the staging grace.
    const walkRules = { ...rules, nowMs: Date.now() + 60_000, prefixConcurrency: 1, keysPerFlush: 2 };
    /**
     * Listing pages of two keys, so a walk saves its position after each page; `failDelete` may fail a delete batch.
     */
    const lists: ListRequest[] = [];
    let failDelete: (keys: readonly string[]) => boolean = () => false;
    const paged = Object.assign(Object.create(store) as ObjectStore, {
      list: (request: ListRequest) => {
        lists.push(request);
        return store.list({ ...request, maxKeys: 2 });
      },
      deleteMany: (keys: readonly string[]) =>
        failDelete(keys)
          ? Promise.reject(new StoreUnavailableError(keys[0] ?? '', 'connection reset (injected)'))
          : store.deleteMany(keys),
    });
    const onStore =
      (ns: NamespaceId): CollectorExecutor =>
      (command, progress) =>
        executeOnStore({ store: paged, namespaceId: ns, rules: walkRules, codec: jsonRootCodec }, command, progress);
    /**
     * Three expired leases; the first prefix in listing order holds six old staged segments, the others one each.
     * Returns the page's survey.
     */
    const seed = async (ns: NamespaceId) => {
      await updateRoot(store, ns, (root) => root, { codec: jsonRootCodec });
      const jobs = Array.from({ length: 3 }, () => newJobId()).sort();
      const staged = jobs.map((job, i) =>
        Array.from({ length: i === 0 ? 6 : 1 }, () => stagedSegmentKey(ns, job, newSegmentId(), 'seg')).sort(),
      );
      for (const key of staged.flat()) await store.put(key, new Uint8Array(100));
      const heartbeatAtMs = walkRules.nowMs - walkRules.leaseExpiryMs - 1000;
      for (const job of jobs)
        await store.put(
          leaseKey(ns, job),
          encodeLease(createLeaseState({ jobId: job, namespaceId: ns, ownerId: 'test-job', nowMs: heartbeatAtMs })),
        );
      const surveyed = await onStore(ns)({ kind: 'surveyLeases', jobIds: jobs });
      if (surveyed.kind !== 'surveyed') throw new Error(`a survey answered ${surveyed.kind}`);
      return { walker: jobs[0] ?? newJobId(), walked: staged[0] ?? [], prefixes: surveyed.prefixes };
    };
    try {
      const clean = namespaceId('uninterrupted');
      const uninterrupted = await collectPrefixes(
        { kind: 'collectPrefixes', prefixes: (await seed(clean)).prefixes },
        { namespaceId: clean, rules: walkRules, execute: onStore(clean) },
      );

      const ns = namespaceId('resumed');
      const { walker, walked, prefixes } = await seed(ns);
      // The walk's second batch fails (as a lost connection would) after its first was deleted and its position saved.
      let failed = false;
      failDelete = (keys) => !failed && keys.includes(walked[3] ?? '') && (failed = true);
      let at: PageCollection | undefined;
      await expect(
        collectPrefixes(
          { kind: 'collectPrefixes', prefixes },
          { namespaceId: ns, rules: walkRules, execute: onStore(ns), onProgress: (p) => (at = p) },
        ),
      ).rejects.toThrow(/connection reset \(injected\)/);
      const stood = at?.prefixes[0];
      expect(stood !== null && stood !== 'done' ? stood?.position : undefined).toMatchObject({
        after: walked[2],
        tally: { objectsDeleted: 3 },
      });

      lists.length = 0;
      const resumed = await collectPrefixes(
        { kind: 'collectPrefixes', prefixes, ...(at && { from: at }) },
        { namespaceId: ns, rules: walkRules, execute: onStore(ns) },
      );

      expect(resumed.totals).toEqual(uninterrupted.totals);
      expect(resumed.totals).toMatchObject({
        claimed: 3,
        objectsDeleted: 8,
        bytesDeleted: 800,
        leasesDeleted: 3,
        failedPrefixes: 0,
      });
      // The walk goes on after its saved position: its prefix is not listed from the start again.
      const walks = lists.filter((l) => l.prefix === jobPrefix(ns, walker));
      expect(walks[0]).toMatchObject({ startAfter: walked[2] });
      expect(walks.filter((l) => l.startAfter === undefined && l.cursor === undefined)).toEqual([]);
      expect((await store.list({ prefix: compactionsPrefix(ns) })).objects).toEqual([]);
    } finally {
      await store.close();
    }
  });
});

describe('a page with a manifest', () => {
  it('a walk whose last batch waits for its part gives up its lane: other walks go on and share the next part, no more prefixes than the concurrency send requests at once, and those out hold no more than a batch per lane', async () => {
    const store = createEmbeddedObjectStore({ path: ':memory:' });
    const ns = namespaceId('laned');
    const walkRules: PassRules = {
      ...rules,
      nowMs: Date.now() + 60_000,
      prefixConcurrency: 2,
      keysPerFlush: 2,
      passId: newPassId(Date.now()),
      manifests: true,
    };
    const [log, listedPrefixes]: [string[], string[]] = [[], []];
    /** Prefixes with a listing or a delete in flight, and the most at once. */
    const busy = { now: new Map<string, number>(), most: 0 };
    let releasePart = () => {};
    const partHeld = new Promise<void>((resolve) => (releasePart = resolve));
    const jobOf = (key: string) => /cmp_[0-9a-f]+/.exec(key)?.[0] ?? key;
    const counted = async <R>(name: string, key: string, call: () => Promise<R>): Promise<R> => {
      log.push(name);
      const job = jobOf(key);
      busy.now.set(job, (busy.now.get(job) ?? 0) + 1);
      busy.most = Math.max(busy.most, busy.now.size);
      try {
        return await call();
      } finally {
        const left = (busy.now.get(job) ?? 1) - 1;
        if (left) busy.now.set(job, left);
        else busy.now.delete(job);
      }
    };
    const watched = Object.assign(Object.create(store) as ObjectStore, {
      // Two keys a listing page, so the big prefix's walk lists on while its earlier batches wait for their parts; each
      // listing takes a few milliseconds, so listings of prefixes in lanes at once are in flight at once.
      list: (request: ListRequest) => (
        listedPrefixes.push(jobOf(request.prefix)),
        counted('list', request.prefix, () => sleep(5).then(() => store.list({ ...request, maxKeys: 2 })))
      ),
      deleteMany: (keys: readonly string[]) => counted('delete', keys[0] ?? '', () => store.deleteMany(keys)),
      put: async (key: string, body: Uint8Array) => {
        if (parseManifestPartKey(key)) {
          log.push('part');
          if (log.filter((l) => l === 'part').length === 1) await partHeld;
        }
        return store.put(key, body);
      },
    });
    try {
      await updateRoot(store, ns, (root) => root, { codec: jsonRootCodec });
      const jobs = Array.from({ length: 7 }, () => newJobId()).sort();
      // The first prefix in listing order holds six old staged segments (three batches), the others one each.
      for (const [i, job] of jobs.entries())
        for (let n = i === 0 ? 6 : 1; n > 0; n--)
          await store.put(stagedSegmentKey(ns, job, newSegmentId(), 'seg'), new Uint8Array(10));
      log.length = 0;
      const collecting = executeOnStore(
        { store: watched, namespaceId: ns, rules: walkRules, codec: jsonRootCodec },
        { kind: 'collectPrefixes', prefixes: jobs.map((jobId) => ({ jobId, owner: { owner: 'none' } })) },
      );
      // The first part is held: other prefixes are still listed and handed to the next part meanwhile, until the
      // batches
      // out of their lanes hold a batch's keys per lane (2 × 2, one key each): the big walk waits in its lane (its
      // batch
      // is not its last), four small ones wait out of theirs, a fifth in the other lane, and no more begin.
      await vi.waitFor(() => expect(new Set(listedPrefixes).size).toBe(6));
      await sleep(50);
      expect(new Set(listedPrefixes).size).toBe(6);
      expect(log.filter((l) => l === 'delete')).toEqual([]);
      releasePart();
      const result = await collecting;
      expect(result.kind === 'collected' && result.report.totals).toMatchObject({ orphaned: 7, objectsDeleted: 12 });
      expect(busy.most).toBeLessThanOrEqual(2);
      const manifest = await readPassManifest(store, ns, passId(walkRules.passId ?? ''));
      // Twelve segments, and the seven leases the pass created to claim the prefixes, each recorded with its walk's
      // last batch.
      expect(manifest.flatMap((part) => part.lines)).toHaveLength(19);
      // Fewer parts than batches (nine): the walks that came while the first part was held shared the next.
      expect(manifest.length).toBeLessThan(9);
      expect((await store.list({ prefix: compactionsPrefix(ns) })).objects).toEqual([]);
    } finally {
      await store.close();
    }
  });
});

describe('the root fence of a page (spec 6b)', () => {
  const kinds = (commands: readonly string[]) => commands.map((c) => c.split(' ')[0]);

  it('a page makes all its claims, then writes one root fence, then walks: no delete under a claimed prefix precedes the fence', async () => {
    const prefixes = Array.from({ length: 5 }, expired);
    const { execute, commands } = scripted();
    const report = await collectPrefixes({ kind: 'collectPrefixes', prefixes }, { namespaceId: 'ns', rules, execute });
    expect(report.totals).toMatchObject({ claimed: 5, objectsDeleted: 5, leasesDeleted: 5 });
    const fence = kinds(commands).indexOf('fenceRoot');
    expect(kinds(commands).filter((k) => k === 'fenceRoot')).toHaveLength(1);
    expect(kinds(commands).slice(0, fence)).toEqual(Array(5).fill('claimLease'));
    expect(
      kinds(commands)
        .slice(fence + 1)
        .filter((k) => k === 'claimLease'),
    ).toEqual([]);
  });

  it('a prefix found reaping (an earlier pass claimed it) is fenced before it is walked too', async () => {
    const { execute, commands } = scripted();
    await collectPrefixes(
      { kind: 'collectPrefixes', prefixes: [{ jobId: newJobId(), owner: { owner: 'collector' } }] },
      { namespaceId: 'ns', rules, execute },
    );
    expect(kinds(commands)).toEqual(['fenceRoot', 'reclaimPrefix', 'deleteLease']);
  });

  it('a page whose prefixes had no lease claims each by creating one, then fences the root once before it walks: a lease deleted under a live job leaves a publication in flight', async () => {
    const { execute, commands } = scripted();
    const prefixes: SurveyedPrefix[] = [
      { jobId: newJobId(), owner: { owner: 'none' } },
      { jobId: newJobId(), owner: { owner: 'none' } },
    ];
    const report = await collectPrefixes({ kind: 'collectPrefixes', prefixes }, { namespaceId: 'ns', rules, execute });
    expect(kinds(commands)).toEqual([
      'claimLease',
      'claimLease',
      'fenceRoot',
      'reclaimPrefix',
      'reclaimPrefix',
      'deleteLease',
      'deleteLease',
    ]);
    expect(report.totals).toMatchObject({ orphaned: 2, claimed: 0, leasesDeleted: 2 });
  });

  it('a dry run plans exactly the commands of a real pass (its store, not its plan, leaves the bucket alone)', async () => {
    const [dry, real] = [scripted(), scripted()];
    const prefixes = [expired(), expired()];
    const report = await collectPrefixes(
      { kind: 'collectPrefixes', prefixes },
      { namespaceId: 'ns', rules: { ...rules, dryRun: true }, execute: dry.execute },
    );
    await collectPrefixes({ kind: 'collectPrefixes', prefixes }, { namespaceId: 'ns', rules, execute: real.execute });
    expect(report.totals).toMatchObject({ claimed: 2, leasesDeleted: 2 });
    expect(dry.commands).toEqual(real.commands);
  });

  it('a dry run on the store writes and deletes nothing, fence and leases included', async () => {
    const store = createEmbeddedObjectStore({ path: ':memory:' });
    try {
      const ns = namespaceId('dry');
      const job = newJobId();
      await updateRoot(store, ns, (root) => root, { codec: jsonRootCodec });
      await store.putIfAbsent(
        leaseKey(ns, job),
        encodeLease(createLeaseState({ jobId: job, namespaceId: ns, ownerId: 'w', nowMs: 1 })),
      );
      const staged = stagedSegmentKey(ns, job, newSegmentId(), 'seg');
      await store.put(staged, new Uint8Array([1]));
      const before = await store.list({ prefix: 'namespaces/' });
      const dry = { ...rules, nowMs: Date.now() + 60_000, dryRun: true };
      const report = await runNamespacePass(
        startNamespacePass(ns, dry),
        (command, progress) =>
          executeOnStore({ store, namespaceId: ns, rules: dry, codec: jsonRootCodec }, command, progress),
        async () => {},
      );
      expect(report.totals).toMatchObject({ claimed: 1, objectsDeleted: 1, leasesDeleted: 1 });
      expect(await store.list({ prefix: 'namespaces/' })).toEqual(before);
    } finally {
      await store.close();
    }
  });

  it('a fence that could not be written walks no claimed prefix and deletes no lease: each is a failed prefix whose lease stays reaping', async () => {
    const [claimed, orphan] = [expired(), { jobId: newJobId(), owner: { owner: 'none' as const } }];
    const { execute, commands } = scripted(undefined, { kind: 'fenceFailed', message: 'root corrupt' });
    const report = await collectPrefixes(
      { kind: 'collectPrefixes', prefixes: [claimed, orphan] },
      { namespaceId: 'ns', rules, execute },
    );
    // The orphan's created claim waits for the fence too: neither prefix is walked, both leases stay reaping.
    expect(report.totals).toMatchObject({ claimed: 1, orphaned: 1, failedPrefixes: 2, leasesDeleted: 0 });
    expect(report.failures.map((f) => f.message)).toEqual([
      expect.stringMatching(/the root fence was not written \(root corrupt\)/),
      expect.stringMatching(/the root fence was not written/),
    ]);
    expect(commands).toEqual([`claimLease ${claimed.jobId}`, `claimLease ${orphan.jobId}`, 'fenceRoot ']);
  });

  it('on the store, the fence is the root with its generation + 1 and nothing else changed', async () => {
    const store = createEmbeddedObjectStore({ path: ':memory:' });
    try {
      const ns = namespaceId('fenced');
      const segment = stagedSegmentKey(ns, newJobId(), newSegmentId(), 'seg');
      const before = await writeRoot(store, ns, (root) => ({
        ...root,
        generation: 7,
        groups: { inodes: [segment] },
        retired: [],
      }));
      const result = await executeOnStore(
        { store, namespaceId: ns, rules, codec: jsonRootCodec },
        { kind: 'fenceRoot' },
      );
      expect(result).toEqual({ kind: 'rootFenced' });
      expect((await readRoot(store, ns, jsonRootCodec)).root).toEqual({ ...before, generation: 8 });
      const missing = await executeOnStore(
        { store, namespaceId: namespaceId('rootless'), rules, codec: jsonRootCodec },
        { kind: 'fenceRoot' },
      );
      expect(missing).toMatchObject({ kind: 'fenceFailed', message: expect.stringMatching(/does not exist/) });
    } finally {
      await store.close();
    }
  });
});
