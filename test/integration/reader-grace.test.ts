/**
 * A reader's promise holds however late the retiring write lands (spec 6c.2), on MinIO through the S3
 * fault proxy: a publication's root CAS is held longer than T after the refresh whose clock retires
 * the inputs, a reader reads the old root meanwhile, the CAS lands, and a pass runs at a clock inside
 * the reader's promise (`readableUntilMs`).
 *
 * On the code before visibility stamps (commit 4afcdf1, 2026-12-06) the reader grace counted from the
 * retiring writer's clock (`retired_at_ms`, the refresh before the hold): the pass, at a clock still
 * inside the promise, deleted both inputs the reader's snapshot names (`retiredDeleted: 2`).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { referenceCompactor, stagedStore } from '../../src/compactor';
import { resolveTiming } from '../../src/config';
import { familyGroup, leaseKey, namespaceId, newJobId, rootKey } from '../../src/keys';
import { decodeLease } from '../../src/lease';
import { createJobLease, publishCompaction, readRoot } from '../../src/protocol';
import { readableUntilMs, readGroupSnapshot } from '../../src/reader';
import { jsonRootCodec } from '../../src/root';
import { writeInputSegment } from '../../src/writer';
import { passAhead } from '../support/pass';
import { proxiedMinio } from '../support/proxied-minio';
import { s3Requests } from '../support/s3-fault-proxy';
import { uniqueId } from '../support/temporal';

/** T = 1 s, the reader grace 3 s: a CAS held 2 s is later than T after its clock. */
const timing = resolveTiming({
  leaseRefreshIntervalMs: 400,
  operationDeadlineMs: 200,
  publicationBudgetMs: 400,
  clockSafetyMarginMs: 400,
});
const group = familyGroup('inodes');

describe('the reader grace counts from visibility, on MinIO through the fault proxy', () => {
  const minio = proxiedMinio();

  it("a publication landing later than T after its clock leaves every segment of an older snapshot readable until the reader's promise, and they go after it", async () => {
    const ns = namespaceId(uniqueId('grace').toLowerCase());
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

    const held = minio.proxy.hold((r) => s3Requests.compareAndSwap(r) && r.key === rootKey(ns));
    const publication = publishCompaction(
      minio.viaProxy,
      { ...job, group, inputs, outputs: result.outputs, tombstones: result.tombstones ?? [] },
      {
        budgetMs: 60_000,
        maxRootRaces: 3,
        raceBackoff: { firstMs: 10, maxMs: 100 },
        clock: { leaseClockMs: () => Date.now(), elapsedMs: () => 0 },
        codec: jsonRootCodec,
      },
    );
    await held.arrived;
    // The clock the inputs retire at: the heartbeat of the refresh before the held CAS.
    const retiringClockMs = decodeLease(
      (await minio.fixture.store.get(leaseKey(ns, job.jobId))).body,
      job,
    ).heartbeat_at_ms;
    await sleep(timing.gcMinGraceMs + 500);
    const snapshot = await readGroupSnapshot(minio.fixture.store, { namespaceId: ns, group }, jsonRootCodec);
    expect(snapshot.segments).toEqual(inputs);
    const promise = readableUntilMs(snapshot, timing);
    await sleep(500);
    held.release();
    await expect(publication).resolves.toMatchObject({ outcome: 'published' });
    const { root } = await readRoot(minio.fixture.store, ns, jsonRootCodec);
    // The setup: the write that retired the inputs landed more than T after the clock it retired them at.
    expect(root.retired?.map((r) => r.retired_at_ms)).toEqual([retiringClockMs, retiringClockMs]);
    expect(snapshot.readAtMs - retiringClockMs).toBeGreaterThan(timing.gcMinGraceMs);

    // A pass whose clock is past the reader grace since the retiring clock, but inside the reader's promise.
    const passClock = retiringClockMs + timing.readerGraceMs + 100;
    expect(passClock).toBeLessThan(promise);
    const inside = await passAhead(minio.fixture.store, ns, passClock - Date.now(), timing);
    expect(inside.totals.retiredDeleted).toBe(0);
    for (const key of snapshot.segments) await expect(minio.fixture.store.head(key)).resolves.toBeDefined();

    // Past the grace since the retirement was visible (its stamp, the LastModified of the root that showed it), they
    // go.
    const stamped = (await readRoot(minio.fixture.store, ns, jsonRootCodec)).root.retired ?? [];
    expect(
      stamped.every(
        (r) => r.visible_at_ms !== undefined && r.visible_at_ms > snapshot.readAtMs - timing.clockSafetyMarginMs,
      ),
    ).toBe(true);
    const visibleAt = Math.max(...stamped.map((r) => r.visible_at_ms ?? 0));
    const after = await passAhead(minio.fixture.store, ns, visibleAt + timing.readerGraceMs + 100 - Date.now(), timing);
    expect(after.totals.retiredDeleted).toBe(2);
  });
});
