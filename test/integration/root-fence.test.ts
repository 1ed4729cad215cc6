/**
 * Fencing by the root (issue 27 item 2, spec 6b), on MinIO through the S3 fault proxy: a job's root
 * CAS, sent within its publication budget, is held in the proxy while a collector pass (the pass
 * plan run against the store, its clock past the lease expiry and the staging grace) claims the job,
 * fences the root and deletes the job's unreferenced staged output; then the CAS is released.
 *
 * On the code before the fence (commit 3078ac8; this test and its proxy run there once, 2026-12-04),
 * the pass wrote no root, the released CAS answered 200, the publication returned
 * `{ outcome: 'published', rootGeneration: 3 }` and the root named the output the pass had just
 * deleted (`InputMissing` for every later compaction of the group, NotFound for readers). With the fence, MinIO refuses
 * the CAS (412: the root's ETag changed) and the
 * publication's next attempt finds the lease gone: `fenced`.
 *
 * The same holds where the job's live lease was deleted under it while its CAS was in flight, and the
 * pass took the lease-less prefix as an orphan's: on the code that fenced only claims taken from a
 * lease (`claimfence` at 6a603c0, 2026-12-07) the pass wrote no root and the released CAS published
 * generation 3 naming the deleted output; the claim the pass creates is fenced now too.
 */
import { describe, expect, it } from 'vitest';
import { resolveTiming } from '../../src/config';
import {
  familyGroup,
  leaseKey,
  namespaceId,
  newJobId,
  newSegmentId,
  rootKey,
  stagedSegmentKey,
  type NamespaceId,
} from '../../src/keys';
import { createJobLease, publishCompaction, readRoot, type PublicationRequest } from '../../src/protocol';
import { jsonRootCodec, referencedKeys } from '../../src/root';
import { NotFoundError } from '../../src/store';
import { writeInputSegment } from '../../src/writer';
import { passAhead } from '../support/pass';
import { proxiedMinio } from '../support/proxied-minio';
import { s3Requests, type S3Exchange } from '../support/s3-fault-proxy';
import { uniqueId } from '../support/temporal';

const timing = resolveTiming();
const group = familyGroup('inodes');

describe('fencing by the root, on MinIO through the fault proxy', () => {
  const minio = proxiedMinio();

  /** A namespace of two inputs, a job with a fresh lease and one staged output, not yet published. */
  async function prepare() {
    const ns = namespaceId(uniqueId('fence').toLowerCase());
    const inputs = [
      await writeInputSegment(minio.fixture.store, { namespaceId: ns, group }, [{ key: 'a', seq: 1, value: 'x' }]),
      await writeInputSegment(minio.fixture.store, { namespaceId: ns, group }, [{ key: 'a', seq: 2, value: 'y' }]),
    ];
    const job = newJobId();
    await createJobLease(minio.viaProxy, { namespaceId: ns, jobId: job, ownerId: 'test', startedAtMs: Date.now() });
    const output = stagedSegmentKey(ns, job, newSegmentId(), 'mseg');
    await minio.fixture.store.put(output, new TextEncoder().encode('the merged segment'));
    return { ns, inputs, output, request: { namespaceId: ns, jobId: job, group, inputs, outputs: [output] } };
  }

  /**
   * Starts the job's publication through the proxy and resolves once its root CAS, sent within the budget, is held
   * there.
   */
  async function publishHeld(request: PublicationRequest) {
    const held = minio.proxy.hold((r) => s3Requests.compareAndSwap(r) && r.key === rootKey(request.namespaceId));
    const start = performance.now();
    const publication = publishCompaction(minio.viaProxy, request, {
      budgetMs: timing.publicationBudgetMs,
      maxRootRaces: 3,
      raceBackoff: { firstMs: 10, maxMs: 100 },
      clock: { leaseClockMs: () => Date.now(), elapsedMs: () => performance.now() - start },
      codec: jsonRootCodec,
    });
    await held.arrived;
    return { publication, release: held.release };
  }

  /** A pass through the proxy, its clock past the job's lease expiry and its output's staging grace. */
  const lateIn = (ns: NamespaceId) => passAhead(minio.viaProxy, ns, timing.stagingGraceMs + 60_000);

  it.each<[string, (request: PublicationRequest) => Promise<unknown>, { claimed: number; orphaned: number }]>([
    ['the collector claimed the job', async () => {}, { claimed: 1, orphaned: 0 }],
    // The lease goes while the job's CAS, resting on the refresh before it, is in flight: the pass finds the prefix
    // lease-less.
    [
      "its live lease was deleted under it (by hand, or a late delete on a store that ignores If-Match), the collector took the prefix as an orphan's",
      (request) => minio.fixture.store.deleteMany([leaseKey(request.namespaceId, request.jobId)]),
      { claimed: 0, orphaned: 1 },
    ],
  ])(
    'a root CAS held until %s and deleted its staged output is refused; the job ends fenced and no root ever names a deleted object',
    async (_, before, totals) => {
      const { ns, inputs, output, request } = await prepare();
      const rootWrites: S3Exchange[] = [];
      const unobserve = minio.proxy.observe((exchange) => {
        if (exchange.request.method === 'PUT' && exchange.request.key === rootKey(ns)) rootWrites.push(exchange);
      });
      const held = await publishHeld(request);
      await before(request);

      const report = await lateIn(ns);
      expect(report.totals).toMatchObject({ ...totals, objectsDeleted: 1, leasesDeleted: 1, failedPrefixes: 0 });
      await expect(minio.fixture.store.head(output)).rejects.toBeInstanceOf(NotFoundError);
      // The pass wrote one root: its fence, while the job's CAS was held (a claim it created is fenced as a claimed
      // lease
      // is).
      expect(rootWrites.map((w) => w.status)).toEqual([200]);

      held.release();
      await expect(held.publication).resolves.toEqual({ outcome: 'fenced', reason: 'the lease is gone' });
      unobserve();

      // The released CAS reached MinIO and was refused on its ETag.
      expect(rootWrites.map((w) => w.status)).toEqual([200, 412]);
      const { root } = await readRoot(minio.fixture.store, ns, jsonRootCodec);
      expect(root.groups[group]).toEqual(inputs);
      for (const written of rootWrites.filter((w) => w.status === 200)) {
        expect(referencedKeys(jsonRootCodec.decode(written.requestBody!, ns)).has(output)).toBe(false);
      }
    },
  );

  it("a held CAS released while the claimed lease is still reaping is refused, and the publication's next attempt finds the lease reaping: fenced", async () => {
    const { ns, output, request } = await prepare();
    const held = await publishHeld(request);
    // The walk's delete batch goes through; the pass's DeleteObject of its lease, last, waits in the proxy.
    const leaseDelete = minio.proxy.hold((r) => s3Requests.deleteObject(r) && r.key === leaseKey(ns, request.jobId));
    const pass = lateIn(ns);
    await leaseDelete.arrived;
    await expect(minio.fixture.store.head(output)).rejects.toBeInstanceOf(NotFoundError);

    held.release();
    await expect(held.publication).resolves.toEqual({ outcome: 'fenced', reason: 'a collector claimed the lease' });
    expect(referencedKeys((await readRoot(minio.fixture.store, ns, jsonRootCodec)).root).has(output)).toBe(false);
    leaseDelete.release();
    expect((await pass).totals).toMatchObject({ claimed: 1, objectsDeleted: 1, leasesDeleted: 1 });
  });
});
