/**
 * Every deletion fenced by the root (spec 6c), on MinIO through the S3 fault proxy where a write held
 * past its budget or a lost reply is the point. Each test is a way a writer, a publication or two
 * collector passes lost data, brought deleted data back or wedged a group on the code before the
 * fences; each "Before:" comment says what that code did when the way was found. Run against that
 * code (commit 4afcdf1), the lost registration reply failed here naming the segment twice and the
 * two passes' claim failed naming no pass; the other tests need the fences' API to run at all.
 */
import { describe, expect, it } from 'vitest';
import { referenceCompactor, stagedStore } from '../../src/compactor';
import { resolveTiming } from '../../src/config';
import {
  familyGroup,
  inputSegmentsPrefix,
  judgedRootKey,
  leaseKey,
  namespaceId,
  newJobId,
  rootKey,
  type NamespaceId,
} from '../../src/keys';
import { createLeaseState, decodeLease, encodeLease } from '../../src/lease';
import {
  createJobLease,
  publishCompaction,
  readRoot,
  RootLostError,
  SegmentLostError,
  SequenceFloorError,
  settlePublication,
  updateRoot,
} from '../../src/protocol';
import { claimLease, restoreJudgedRoot } from '../../src/collector';
import { addSegments, groupSegments, jsonRootCodec, MAX_COLLECTED_ROOT_BYTES, referencedKeys } from '../../src/root';
import { NotFoundError } from '../../src/store';
import { writeInputSegment } from '../../src/writer';
import { passAhead, TEST_PASS_ID } from '../support/pass';
import { readGroupView } from '../support/records';
import { writeRoot } from '../support/roots';
import { proxiedMinio } from '../support/proxied-minio';
import { s3Requests, type S3Exchange } from '../support/s3-fault-proxy';
import { uniqueId } from '../support/temporal';

const timing = resolveTiming();
const group = familyGroup('inodes');

describe('every deletion fenced by the root, on MinIO through the fault proxy', () => {
  const minio = proxiedMinio();
  const newNamespace = () => namespaceId(uniqueId('fenced').toLowerCase());

  /** Root PUTs the proxy forwarded to MinIO for `ns`, with MinIO's answers, from now on. */
  const watchRootWrites = (ns: NamespaceId) => {
    const writes: S3Exchange[] = [];
    const stop = minio.proxy.observe((e) => {
      if (e.request.method === 'PUT' && e.request.key === rootKey(ns)) writes.push(e);
    });
    return { writes, stop };
  };
  const inputKeys = async (ns: NamespaceId) =>
    (await minio.fixture.store.list({ prefix: inputSegmentsPrefix(ns) })).objects.map((o) => o.key);
  const rootOf = async (ns: NamespaceId) => (await readRoot(minio.fixture.store, ns, jsonRootCodec)).root;
  /** Every key the root names is in the store. */
  const expectRootWhole = async (ns: NamespaceId) => {
    for (const key of referencedKeys(await rootOf(ns)))
      await expect(minio.fixture.store.head(key)).resolves.toBeDefined();
  };

  /** Compacts the group's current segments with the reference compactor and publishes them, as a job would. */
  async function compactAndPublish(ns: NamespaceId) {
    const inputs = [...groupSegments(await rootOf(ns), group)];
    const job = { namespaceId: ns, jobId: newJobId() };
    const result = await referenceCompactor.compact({
      job: { ...job, group },
      inputs,
      store: stagedStore(minio.fixture.store, job),
      limits: { targetSegmentBytes: 1 << 20, maxFanIn: 16 },
      resume: undefined,
      heartbeat: () => {},
    });
    await createJobLease(minio.fixture.store, { ...job, ownerId: 'test', startedAtMs: Date.now() });
    const published = await publishCompaction(
      minio.fixture.store,
      {
        ...job,
        group,
        inputs,
        outputs: result.outputs,
        tombstones: result.tombstones ?? [],
        ...(result.tombstoneSeqFloor !== undefined && { tombstoneSeqFloor: result.tombstoneSeqFloor }),
      },
      {
        budgetMs: 60_000,
        maxRootRaces: 3,
        raceBackoff: { firstMs: 10, maxMs: 100 },
        clock: { leaseClockMs: () => Date.now(), elapsedMs: () => 0 },
        codec: jsonRootCodec,
      },
    );
    expect(published.outcome).toBe('published');
    return { job, inputs, result };
  }

  it("a writer's root CAS held until a pass deleted its segment as a lost write is refused: the pass condemned it in the root first, and the writer is told to write again", async () => {
    // Before: the pass deleted the segment without a root write, the released CAS answered 200, and the
    // root named a missing object (every later compaction of the group failed InputMissing).
    const ns = newNamespace();
    const first = await writeInputSegment(minio.fixture.store, { namespaceId: ns, group }, [
      { key: 'a', seq: 1, value: 'x' },
    ]);
    const held = minio.proxy.hold((r) => s3Requests.compareAndSwap(r) && r.key === rootKey(ns));
    const late = writeInputSegment(minio.viaProxy, { namespaceId: ns, group }, [{ key: 'b', seq: 2, value: 'y' }], {
      writerBudgetMs: 60_000,
    });
    late.catch(() => undefined);
    await held.arrived;
    const [segment] = (await inputKeys(ns)).filter((k) => k !== first);

    const report = await passAhead(minio.fixture.store, ns, timing.lostWriteGraceMs + 60_000);
    expect(report.totals.lostWritesDeleted).toBe(1);
    await expect(minio.fixture.store.head(segment!)).rejects.toBeInstanceOf(NotFoundError);
    expect((await rootOf(ns)).lost_write_cutoff_ms).toBeGreaterThan(0);

    const { writes, stop } = watchRootWrites(ns);
    held.release();
    await expect(late).rejects.toBeInstanceOf(SegmentLostError);
    stop();
    // The late CAS reached MinIO and was refused on the ETag the condemnation changed; the writer read the root again
    // and sent nothing more.
    expect(writes.map((w) => w.status)).toEqual([412]);
    expect(groupSegments(await rootOf(ns), group)).toEqual([first]);
    await expectRootWhole(ns);
  });

  it('an older write registered after a publication dropped the tombstones of its group is refused: the floor is in the root, and the deleted key stays deleted', async () => {
    // Before: the late write registered after the publication (its CAS re-read on 412 and appended),
    // and `inode/1`, deleted at seq 7, read "stale" (seq 5) again.
    const ns = newNamespace();
    await writeInputSegment(minio.fixture.store, { namespaceId: ns, group }, [
      { key: 'inode/1', seq: 1, value: 'first' },
    ]);
    await writeInputSegment(minio.fixture.store, { namespaceId: ns, group }, [
      { key: 'inode/1', seq: 7, tombstone: true },
      { key: 'inode/2', seq: 8, value: 'x' },
    ]);
    // The older write's PUT is done and its root CAS held: its write began before the delete, it lands after the
    // compaction.
    const held = minio.proxy.hold((r) => s3Requests.compareAndSwap(r) && r.key === rootKey(ns));
    const late = writeInputSegment(
      minio.viaProxy,
      { namespaceId: ns, group },
      [{ key: 'inode/1', seq: 5, value: 'stale' }],
      { writerBudgetMs: 60_000 },
    );
    late.catch(() => undefined);
    await held.arrived;

    const { result } = await compactAndPublish(ns);
    expect(result.tombstones).toHaveLength(1);
    expect((await rootOf(ns)).seq_floors).toEqual({ [group]: 7 });
    expect(await readGroupView(minio.fixture.store, ns, group)).toEqual({ 'inode/2': 'x' });

    held.release();
    await expect(late).rejects.toBeInstanceOf(SequenceFloorError);
    await expect(late).rejects.toThrow(/seq 5, at or below the group's floor 7/);
    expect(await readGroupView(minio.fixture.store, ns, group)).toEqual({ 'inode/2': 'x' });
    await expectRootWhole(ns);
  });

  it('a registration whose reply was lost is found landed, not made twice: the group names the segment once and compacts', async () => {
    // Before: the SDK's retry of the landed CAS met 412, updateRoot took it for a lost race and appended
    // again, and the group named the segment twice; readGroup refused the group for good (InvalidInput).
    const ns = newNamespace();
    await writeInputSegment(minio.fixture.store, { namespaceId: ns, group }, [{ key: 'a', seq: 1, value: 'x' }]);
    const before = minio.proxy.injected.lostResponse;
    minio.proxy.script('lostResponse', (r) => s3Requests.compareAndSwap(r) && r.key === rootKey(ns));
    const key = await writeInputSegment(minio.viaProxy, { namespaceId: ns, group }, [{ key: 'b', seq: 2, value: 'y' }]);
    expect(minio.proxy.injected.lostResponse).toBe(before + 1);
    expect(groupSegments(await rootOf(ns), group).filter((k) => k === key)).toHaveLength(1);
    await compactAndPublish(ns);
    expect(await readGroupView(minio.fixture.store, ns, group)).toEqual({ a: 'x', b: 'y' });
  });

  it('a lost root is not a new namespace: writers refuse to create it, passes delete nothing, and restoring the judged copy brings every segment back', async () => {
    // Before: the next writeInputSegment created a root of generation 1 naming only its own segment, and
    // the next pass deleted the published output (and, past the lost-write grace, the inputs).
    const ns = newNamespace();
    await writeInputSegment(minio.fixture.store, { namespaceId: ns, group }, [{ key: 'a', seq: 1, value: 'x' }]);
    await writeInputSegment(minio.fixture.store, { namespaceId: ns, group }, [{ key: 'b', seq: 2, value: 'y' }]);
    const { result } = await compactAndPublish(ns);
    // The root the pass judges (it then stamps the retired inputs visible, one generation more).
    const published = await rootOf(ns);
    const judging = await passAhead(minio.fixture.store, ns, 1000);
    expect(judging.rootProblems).toEqual([]);
    await expect(minio.fixture.store.head(judgedRootKey(ns))).resolves.toBeDefined();

    await minio.fixture.store.deleteMany([rootKey(ns)]);
    await expect(
      writeInputSegment(minio.fixture.store, { namespaceId: ns, group }, [{ key: 'c', seq: 3, value: 'z' }]),
    ).rejects.toBeInstanceOf(RootLostError);
    await expect(minio.fixture.store.head(rootKey(ns))).rejects.toBeInstanceOf(NotFoundError);
    const blind = await passAhead(minio.fixture.store, ns, timing.lostWriteGraceMs + timing.readerGraceMs + 60_000);
    expect(blind.totals.objectsDeleted).toBe(0);
    expect(blind.rootProblems).toEqual([
      expect.objectContaining({ problem: 'missing', reason: expect.stringMatching(/root restore/) }),
    ]);
    for (const key of result.outputs) await expect(minio.fixture.store.head(key)).resolves.toBeDefined();

    const plan = await restoreJudgedRoot(minio.fixture.store, ns, jsonRootCodec, {
      apply: false,
      maxBytes: MAX_COLLECTED_ROOT_BYTES,
    });
    expect(plan).toMatchObject({
      currentGeneration: undefined,
      judgedGeneration: published.generation,
      applied: false,
    });
    await expect(minio.fixture.store.head(rootKey(ns))).rejects.toBeInstanceOf(NotFoundError);
    await restoreJudgedRoot(minio.fixture.store, ns, jsonRootCodec, {
      apply: true,
      maxBytes: MAX_COLLECTED_ROOT_BYTES,
    });
    expect((await rootOf(ns)).groups).toEqual(published.groups);
    expect(await readGroupView(minio.fixture.store, ns, group)).toEqual({ a: 'x', b: 'y' });
  });

  it('a root that went back (an older copy put over it) deletes nothing until the judged one is restored', async () => {
    const ns = newNamespace();
    await writeInputSegment(minio.fixture.store, { namespaceId: ns, group }, [{ key: 'a', seq: 1, value: 'x' }]);
    const old = await minio.fixture.store.get(rootKey(ns));
    await writeInputSegment(minio.fixture.store, { namespaceId: ns, group }, [{ key: 'b', seq: 2, value: 'y' }]);
    await compactAndPublish(ns);
    await passAhead(minio.fixture.store, ns, 1000);
    // An operator's restore from a backup taken before the compaction: generation 1, naming the first input only.
    await minio.fixture.store.put(rootKey(ns), old.body);
    const report = await passAhead(minio.fixture.store, ns, timing.lostWriteGraceMs + timing.readerGraceMs + 60_000);
    expect(report.totals.objectsDeleted).toBe(0);
    expect(report.rootProblems).toEqual([expect.objectContaining({ problem: 'went_back' })]);
    await restoreJudgedRoot(minio.fixture.store, ns, jsonRootCodec, {
      apply: true,
      maxBytes: MAX_COLLECTED_ROOT_BYTES,
    });
    expect(await readGroupView(minio.fixture.store, ns, group)).toEqual({ a: 'x', b: 'y' });
  });

  it('two passes racing for one expired lease: the loser sees the winner named in the claim and leaves the prefix alone', async () => {
    // Before: a claim wrote the same bytes whoever claimed, the loser's re-read found `reaping` and took it
    // for its own: both passes reported `collector` (here 30 of 30 rounds) and both walked the prefix.
    const ns = newNamespace();
    // Each pass's clock is now, as a pass's is: the job's lease expired long ago, the winner's claim is fresh.
    const rules = (passId: string) => ({ nowMs: Date.now(), leaseExpiryMs: timing.leaseExpiryMs, passId });
    const passes = [TEST_PASS_ID, 'gc_0000000000002_00000000000000bb'];
    let both = 0;
    for (let round = 0; round < 30; round++) {
      const job = { namespaceId: ns, jobId: newJobId() };
      await minio.fixture.store.putIfAbsent(
        leaseKey(ns, job.jobId),
        encodeLease(
          createLeaseState({ ...job, ownerId: 'dead job', nowMs: Date.now() - timing.leaseExpiryMs - 60_000 }),
        ),
      );
      const owners = await Promise.all(passes.map((pass) => claimLease(minio.viaProxy, job, rules(pass))));
      const lease = decodeLease((await minio.fixture.store.get(leaseKey(ns, job.jobId))).body, job);
      const winner = owners.findIndex((o) => o.owner === 'collector');
      expect(lease.owner_id).toBe(passes[winner]);
      expect(owners[1 - winner]).toEqual({ owner: 'another_pass', passId: passes[winner] });
      if (owners.every((o) => o.owner === 'collector')) both++;
    }
    expect(both).toBe(0);
  });

  it('a publication whose attempts were spent is settled: a CAS still held is fenced by the settling write and never lands; one that landed is reported published', async () => {
    const ns = newNamespace();
    const inputs = [
      await writeInputSegment(minio.fixture.store, { namespaceId: ns, group }, [{ key: 'a', seq: 1, value: 'x' }]),
      await writeInputSegment(minio.fixture.store, { namespaceId: ns, group }, [{ key: 'a', seq: 2, value: 'y' }]),
    ];
    const job = { namespaceId: ns, jobId: newJobId() };
    const result = await referenceCompactor.compact({
      job: { ...job, group },
      inputs,
      store: stagedStore(minio.fixture.store, job),
      limits: { targetSegmentBytes: 1 << 20, maxFanIn: 16 },
      resume: undefined,
      heartbeat: () => {},
    });
    await createJobLease(minio.fixture.store, { ...job, ownerId: 'test', startedAtMs: Date.now() });
    const request = { ...job, group, inputs, outputs: result.outputs, tombstones: result.tombstones ?? [] };
    const held = minio.proxy.hold((r) => s3Requests.compareAndSwap(r) && r.key === rootKey(ns));
    const stuck = publishCompaction(minio.viaProxy, request, {
      budgetMs: 60_000,
      maxRootRaces: 1,
      raceBackoff: { firstMs: 10, maxMs: 100 },
      clock: { leaseClockMs: () => Date.now(), elapsedMs: () => 0 },
      codec: jsonRootCodec,
    });
    stuck.catch(() => undefined);
    await held.arrived;

    // The workflow gave up on the attempt; the settling write lands first.
    await expect(settlePublication(minio.fixture.store, request, jsonRootCodec)).resolves.toMatchObject({
      outcome: 'unpublished',
    });
    held.release();
    await expect(stuck).resolves.toMatchObject({ outcome: 'superseded' });
    expect(groupSegments(await rootOf(ns), group)).toEqual(inputs);

    // A publication whose CAS landed though its answer was lost: settled as published.
    minio.proxy.script('lostResponse', (r) => s3Requests.compareAndSwap(r) && r.key === rootKey(ns));
    await expect(
      publishCompaction(minio.viaProxy, request, {
        budgetMs: 60_000,
        maxRootRaces: 3,
        raceBackoff: { firstMs: 10, maxMs: 100 },
        clock: { leaseClockMs: () => Date.now(), elapsedMs: () => 0 },
        codec: jsonRootCodec,
      }),
    ).resolves.toMatchObject({ outcome: 'published' });
    await expect(settlePublication(minio.fixture.store, request, jsonRootCodec)).resolves.toMatchObject({
      outcome: 'published',
    });
    await expectRootWhole(ns);
  });

  it("a foreign or late registration of a retired, missing or staged segment is refused by the package's root writer", async () => {
    const ns = newNamespace();
    const first = await writeInputSegment(minio.fixture.store, { namespaceId: ns, group }, [
      { key: 'a', seq: 1, value: 'x' },
    ]);
    await writeInputSegment(minio.fixture.store, { namespaceId: ns, group }, [{ key: 'b', seq: 2, value: 'y' }]);
    const { job } = await compactAndPublish(ns);
    await expect(
      updateRoot(minio.fixture.store, ns, (root) => addSegments(root, group, [first]), { codec: jsonRootCodec }),
    ).resolves.toBeDefined();
    // `first` is retired: addSegments leaves it alone (an earlier registration of it), nothing is written.
    expect(groupSegments(await rootOf(ns), group)).not.toContain(first);
    const retiredAgain = (root: Parameters<typeof addSegments>[0]) => ({
      ...root,
      groups: { ...root.groups, [group]: [...groupSegments(root, group), first] },
    });
    await expect(updateRoot(minio.fixture.store, ns, retiredAgain, { codec: jsonRootCodec })).rejects.toBeInstanceOf(
      SegmentLostError,
    );
    const neverWritten = `${inputSegmentsPrefix(ns)}seg_${'0'.repeat(32)}.mseg`;
    await expect(
      updateRoot(minio.fixture.store, ns, (root) => addSegments(root, group, [neverWritten]), { codec: jsonRootCodec }),
    ).rejects.toThrow(/not in the store/);
    const staged = `namespaces/${ns}/metadata/compactions/${job.jobId}/segments/seg_${'1'.repeat(32)}.mseg`;
    await expect(
      updateRoot(minio.fixture.store, ns, (root) => addSegments(root, group, [staged]), { codec: jsonRootCodec }),
    ).rejects.toThrow(/only by its job's publication/);
    // A test minio.fixture may still write any root, as a foreign writer would.
    await expect(writeRoot(minio.fixture.store, ns, (root) => root)).resolves.toBeDefined();
  });
});
