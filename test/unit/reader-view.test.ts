/**
 * A compaction is invisible to readers (issue 33, item 1): the reader's view of a group (per key
 * the newest record, tombstones applied) is the same just before and just after its publication,
 * whatever was registered while the job ran. On the embedded store, with the package's compactor,
 * lease and publication.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  ProgressMismatchError,
  referenceCompactor,
  stagedStore,
  type CompactionOutputs,
  type CompactionProgress,
  type MergeLimits,
} from '../../src/compactor';
import { familyGroup, namespaceId, newJobId, rootKey } from '../../src/keys';
import {
  EmptyCompactionError,
  readRoot,
  SequenceFloorError,
  type JobRef,
  type PublicationOutcome,
} from '../../src/protocol';
import { groupSegments, jsonRootCodec } from '../../src/root';
import type { SegmentRecord } from '../../src/segments';
import { AmbiguousError, createEmbeddedObjectStore, type ObjectStore } from '../../src/store';
import { writeInputSegment } from '../../src/writer';
import { compactWithKills, Killed, publishJob, type Kill } from '../support/compact';
import { wrapStore } from '../support/faults';
import { readGroupView } from '../support/records';

const ns = namespaceId('readers');
const group = familyGroup('inodes');
const limits: MergeLimits = { targetSegmentBytes: 1 << 20, maxFanIn: 16 };

const compact = (
  store: ObjectStore,
  job: JobRef,
  inputs: readonly string[],
  mergeLimits: MergeLimits,
  kills: readonly Kill[] = [],
): Promise<CompactionOutputs> => compactWithKills(store, { ...job, group }, inputs, mergeLimits, kills);
const publish = (
  store: ObjectStore,
  job: JobRef,
  inputs: readonly string[],
  result: CompactionOutputs,
): Promise<PublicationOutcome> => publishJob(store, { ...job, group }, inputs, result);

/** The issue's group, compacted: `inode/1` written, then deleted; `inode/2` live. */
async function compactIssueGroup() {
  const store = createEmbeddedObjectStore({ path: ':memory:' });
  const inputs = [
    await writeInputSegment(store, { namespaceId: ns, group }, [{ key: 'inode/1', seq: 5, value: 'live' }]),
    await writeInputSegment(store, { namespaceId: ns, group }, [
      { key: 'inode/1', seq: 7, tombstone: true },
      { key: 'inode/2', seq: 8, value: 'x' },
    ]),
  ];
  const job = { namespaceId: ns, jobId: newJobId() };
  return { store, job, inputs, result: await compact(store, job, inputs, limits) };
}

const groupKeys = async (store: ObjectStore): Promise<readonly string[]> =>
  groupSegments((await readRoot(store, ns, jsonRootCodec)).root, group);

describe('a publication leaves the reader view of its group unchanged', () => {
  it('a key the inputs deleted stays deleted when a segment registered during the job holds an older version of it', async () => {
    const { store, job, inputs, result } = await compactIssueGroup();
    // Written while the job ran, by a writer that was slow to register an older version.
    await writeInputSegment(store, { namespaceId: ns, group }, [{ key: 'inode/1', seq: 1, value: 'stale' }]);
    const before = await readGroupView(store, ns, group);
    expect(before).toEqual({ 'inode/2': 'x' });

    await expect(publish(store, job, inputs, result)).resolves.toMatchObject({ outcome: 'published' });
    expect(await readGroupView(store, ns, group)).toEqual(before);
  });

  it('with nothing registered during the job the group is the outputs alone: no tombstone is published', async () => {
    const { store, job, inputs, result } = await compactIssueGroup();
    expect(result.tombstones).toHaveLength(1);

    await expect(publish(store, job, inputs, result)).resolves.toMatchObject({ outcome: 'published' });
    expect(await groupKeys(store)).toEqual(result.outputs);
    expect(await readGroupView(store, ns, group)).toEqual({ 'inode/2': 'x' });
    // The dropped tombstone of inode/1 (seq 7) is the group's floor: an older version of it registered later is
    // refused.
    expect((await readRoot(store, ns, jsonRootCodec)).root.seq_floors).toEqual({ [group]: 7 });
    await expect(
      writeInputSegment(store, { namespaceId: ns, group }, [{ key: 'inode/1', seq: 6, value: 'stale' }]),
    ).rejects.toThrow(SequenceFloorError);
    expect(await readGroupView(store, ns, group)).toEqual({ 'inode/2': 'x' });
  });

  it("progress without a count of tombstone segments is not this version's: refused as ProgressMismatch before anything is written, never resumed past tombstones no segment holds", async () => {
    const store = createEmbeddedObjectStore({ path: ':memory:' });
    const records = (n: number, s: number): SegmentRecord[] =>
      Array.from({ length: n }, (_, i) =>
        (i + s) % 3 === 0
          ? { key: `inode/${i}`, seq: s * 100 + i, tombstone: true }
          : { key: `inode/${i}`, seq: s * 100 + i, value: 'v'.repeat(50) },
      );
    const inputs = [
      await writeInputSegment(store, { namespaceId: ns, group }, records(40, 1)),
      await writeInputSegment(store, { namespaceId: ns, group }, records(40, 2)),
    ];
    const small = { targetSegmentBytes: 256, maxFanIn: 16 };
    const job = { namespaceId: ns, jobId: newJobId() };
    let older: Omit<CompactionProgress, 'tombstoneSegmentsFinished'> | undefined;
    await expect(
      referenceCompactor.compact({
        job: { ...job, group },
        inputs,
        store: stagedStore(store, job),
        limits: small,
        resume: undefined,
        heartbeat: (progress) => {
          if (progress === undefined) return;
          older = Object.fromEntries(
            Object.entries(progress as CompactionProgress).filter(([field]) => field !== 'tombstoneSegmentsFinished'),
          ) as typeof older;
          throw new Killed();
        },
      }),
    ).rejects.toBeInstanceOf(Killed);
    expect(older?.lastKey).not.toBeNull();
    const staged = async () =>
      (await store.list({ prefix: `namespaces/${ns}/metadata/compactions/${job.jobId}/` })).objects.length;
    const before = await staged();
    await expect(
      referenceCompactor.compact({
        job: { ...job, group },
        inputs,
        store: stagedStore(store, job),
        limits: small,
        resume: older,
        heartbeat: () => {},
      }),
    ).rejects.toBeInstanceOf(ProgressMismatchError);
    expect(await staged()).toBe(before);
    await store.close();
  });

  it('a publication whose compactor returned neither outputs nor tombstones for inputs that exist is refused, and the group is left as it was', async () => {
    const store = createEmbeddedObjectStore({ path: ':memory:' });
    const inputs = [
      await writeInputSegment(store, { namespaceId: ns, group }, [{ key: 'inode/1', seq: 1, value: 'live' }]),
    ];
    const before = await store.get(rootKey(ns));
    const job = { namespaceId: ns, jobId: newJobId() };
    await expect(
      publish(store, job, inputs, { outputs: [], tombstones: [], recordsOut: 0, bytesOut: 0 }),
    ).rejects.toBeInstanceOf(EmptyCompactionError);
    expect((await store.get(rootKey(ns))).etag).toBe(before.etag);
  });
});

/** A segment's records: unique keys over a small key space, so versions of a key meet across segments. */
const segment = fc
  .uniqueArray(
    fc.record({
      key: fc.integer({ min: 0, max: 7 }).map((k) => `inode/${k}`),
      seq: fc.integer({ min: 1, max: 30 }),
      tombstone: fc.boolean(),
    }),
    { minLength: 1, maxLength: 6, selector: (r) => r.key },
  )
  .map((records) =>
    records.map(({ key, seq, tombstone }): SegmentRecord =>
      tombstone ? { key, seq, tombstone: true } : { key, seq, value: `v${seq}` },
    ),
  );

/**
 * When a late segment is registered: before the job's compaction ends, before publication, or between publication's
 * root read and its CAS.
 */
const lateWhen = fc.constantFrom('during compaction', 'before publication', 'racing the root CAS');

const scenario = fc.record({
  inputs: fc.array(segment, { minLength: 1, maxLength: 5 }),
  late: fc.array(fc.record({ records: segment, when: lateWhen }), { maxLength: 3 }),
  targetSegmentBytes: fc.integer({ min: 40, max: 400 }),
  maxFanIn: fc.integer({ min: 2, max: 4 }),
  kills: fc.array(fc.record({ after: fc.integer({ min: 1, max: 4 }), lostBeat: fc.boolean() }), { maxLength: 3 }),
  /** The first root CAS lands but its answer is lost: the publication must recognise its own write. */
  lostCasResponse: fc.boolean(),
});

describe('the reader view, model-based', () => {
  it('for random groups with tombstones, late registrations of older and newer seqs, killed and resumed attempts, the view after publication is the view before it', async () => {
    let runs = 0;
    await fc.assert(
      fc.asyncProperty(scenario, async (s) => {
        runs++;
        const inner = createEmbeddedObjectStore({ path: ':memory:' });
        const inputs: string[] = [];
        for (const records of s.inputs)
          inputs.push(await writeInputSegment(inner, { namespaceId: ns, group }, records));
        const registerLate = async (when: string) => {
          for (const late of s.late)
            if (late.when === when) await writeInputSegment(inner, { namespaceId: ns, group }, late.records);
        };
        let raced = false;
        // The view just before each root CAS that landed: only the publication's may.
        const landedOn: Record<string, string>[] = [];
        const store = wrapStore(inner, async (operation, args, call) => {
          if (operation !== 'putIfMatch' || args[0] !== rootKey(ns)) return call();
          if (!raced) {
            raced = true;
            // Registered after publication read the root: this CAS loses its race, the next round decides again.
            await registerLate('racing the root CAS');
          }
          const view = await readGroupView(inner, ns, group);
          const landed = await call();
          landedOn.push(view);
          if (s.lostCasResponse && landedOn.length === 1)
            throw new AmbiguousError(rootKey(ns), 'the response was lost after the write');
          return landed;
        });
        const job = { namespaceId: ns, jobId: newJobId() };
        await registerLate('during compaction');
        const result = await compact(
          inner,
          job,
          inputs,
          { targetSegmentBytes: s.targetSegmentBytes, maxFanIn: s.maxFanIn },
          s.kills,
        );
        await registerLate('before publication');
        const before = await readGroupView(inner, ns, group);

        const outcome = await publish(store, job, inputs, result);
        expect(outcome.outcome).toBe('published');
        expect(landedOn).toHaveLength(1);
        const after = await readGroupView(inner, ns, group);
        expect(after).toEqual(landedOn[0]);
        if (!s.late.some((l) => l.when === 'racing the root CAS')) expect(after).toEqual(before);
        await inner.close();
      }),
      { numRuns: 4000 },
    );
    expect(runs).toBe(4000);
  }, 240_000);
});
