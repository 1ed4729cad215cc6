/**
 * The soak's auditor on doctored histories in versioned MinIO buckets: it passes a clean one and names each planted
 * violation.
 */
import { PutBucketVersioningCommand, S3Client } from '@aws-sdk/client-s3';
import { afterAll, describe, expect, it } from 'vitest';
import {
  familyGroup,
  jobPrefix,
  leaseKey,
  namespaceId,
  newJobId,
  newSegmentId,
  rootKey,
  stagedSegmentKey,
  type MetadataCompactionId,
  type NamespaceId,
} from '../../src/keys';
import { claimLeaseState, createLeaseState, encodeLease, refreshLeaseState, type LeaseState } from '../../src/lease';
import { addSegments, encodeRoot, emptyRoot, type RootState } from '../../src/root';
import { encodeSegment, SEGMENT_EXTENSION } from '../../src/segments';
import type { ObjectStore } from '../../src/store';
import { auditBucket, type AuditInput, type AuditRule } from '../support/auditor';
import { openTestStore, s3ClientConfig, type TestStore } from '../support/stores';
import { quickExpirySettings } from '../support/temporal';
import { TEST_PASS_ID } from '../support/pass';

const { timing } = quickExpirySettings;
const ns: NamespaceId = namespaceId('audited');
const group = familyGroup('g');
const clients: S3Client[] = [];
const fixtures: TestStore[] = [];
afterAll(async () => {
  for (const c of clients) c.destroy();
  for (const f of fixtures) await f.store.close();
});

/**
 * A fresh versioned bucket with a root, and helpers that write a job's history into it the way the protocol would (or
 * would not).
 */
async function history() {
  const fixture = await openTestStore('minio');
  fixtures.push(fixture);
  const client = new S3Client(s3ClientConfig(fixture.endpoint!));
  clients.push(client);
  await client.send(
    new PutBucketVersioningCommand({ Bucket: fixture.bucket, VersioningConfiguration: { Status: 'Enabled' } }),
  );
  const store: ObjectStore = fixture.store;
  let root: RootState = emptyRoot(ns);
  let rootEtag: string | undefined;
  const setRoot = async (next: RootState) => {
    root = next;
    rootEtag =
      rootEtag === undefined
        ? (await store.putIfAbsent(rootKey(ns), encodeRoot(next))).etag
        : (await store.putIfMatch(rootKey(ns), encodeRoot(next), rootEtag)).etag;
  };
  await setRoot(addSegments(root, group, []));

  const job = (startedAtMs: number) => {
    const id: MetadataCompactionId = newJobId();
    let lease: LeaseState = createLeaseState({
      jobId: id,
      namespaceId: ns,
      ownerId: 'auditor-test',
      nowMs: startedAtMs,
    });
    const key = leaseKey(ns, id);
    return {
      id,
      prefix: jobPrefix(ns, id),
      create: () => store.put(key, encodeLease(lease)),
      refresh: (heartbeatMs: number) => store.put(key, encodeLease((lease = refreshLeaseState(lease, heartbeatMs)))),
      claim: () => store.put(key, encodeLease((lease = claimLeaseState(lease, TEST_PASS_ID, Date.now())))),
      /** Writes over whatever is there: what a broken job would do after losing its lease. */
      reactivate: (heartbeatMs: number) =>
        store.put(key, encodeLease((lease = { ...lease, status: 'active', heartbeat_at_ms: heartbeatMs }))),
      deleteLease: () => store.deleteMany([key]),
      stage: async () => {
        const segment = stagedSegmentKey(ns, id, newSegmentId(), SEGMENT_EXTENSION);
        await store.put(segment, encodeSegment([{ key: 'k', seq: 1, value: 'v' }]));
        return segment;
      },
      publish: (outputs: string[]) => setRoot(addSegments(root, group, outputs)),
    };
  };
  const audit = (extra: Partial<AuditInput> = {}) => auditBucket({ client, bucket: fixture.bucket!, timing, ...extra });
  const rules = async (extra: Partial<AuditInput> = {}): Promise<AuditRule[]> =>
    [...new Set((await audit(extra)).violations.map((v) => v.rule))].sort();
  const supersede = (keys: string[], retiredAtMs?: number) =>
    setRoot({
      ...root,
      generation: root.generation + 1,
      groups: { g: (root.groups.g ?? []).filter((k) => !keys.includes(k)) },
      // As a publication does since spec 6a: the replaced segments listed as retired, in the same write.
      ...(retiredAtMs !== undefined && {
        retired: [...(root.retired ?? []), ...keys.map((key) => ({ key, retired_at_ms: retiredAtMs }))],
      }),
    });
  return { store, job, audit, rules, supersede };
}

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('soak auditor', () => {
  it('finds nothing wrong in a history that follows the protocol: create, refresh, publish, supersede, claim after expiry, reclaim, delete the lease', async () => {
    const h = await history();
    const past = Date.now() - 60_000;
    const j = h.job(past);
    await j.create();
    const out = await j.stage();
    await j.refresh(Date.now());
    await j.publish([out]);
    await h.supersede([out]);
    await pause(timing.leaseExpiryMs + 50);
    await j.claim();
    await h.store.deleteMany([out]);
    await j.deleteLease();
    const report = await h.audit({
      published: [{ namespaceId: ns, jobId: j.id, outputs: [out] }],
      settledPassClockMs: Date.now() + 1,
    });
    expect(report.violations).toEqual([]);
    expect(report).toMatchObject({ leases: 1, claims: 1, deletedObjects: 2 });
  });

  it('reports a referenced object that was deleted', async () => {
    const h = await history();
    const j = h.job(Date.now() - 60_000);
    await j.create();
    const out = await j.stage();
    await j.publish([out]);
    await j.claim();
    await pause(5);
    await h.store.deleteMany([out]);
    const report = await h.audit();
    expect(report.violations).toContainEqual(expect.objectContaining({ rule: 'referenced object deleted', key: out }));
  });

  it('accepts a claimed lease deleted twice: a retried delete adds a second delete marker (found by the full soak)', async () => {
    const h = await history();
    const j = h.job(Date.now() - 60_000);
    await j.create();
    await pause(5);
    await j.claim();
    await pause(5);
    await j.deleteLease();
    await pause(5);
    await j.deleteLease();
    expect((await h.audit()).violations).toEqual([]);
  });

  it('reports a delete outside a job prefix (an input segment) and a lease deleted without a claim', async () => {
    const h = await history();
    const j = h.job(Date.now());
    await j.create();
    await pause(5);
    await j.deleteLease();
    await h.store.deleteMany([rootKey(ns)]);
    expect(await h.rules()).toEqual(['deleted outside a job prefix', 'lease ownership']);
  });

  it('reports a lease written active again after a claim: two owners of one prefix', async () => {
    const h = await history();
    const past = Date.now() - 60_000;
    const j = h.job(past);
    await j.create();
    await pause(5);
    await j.claim();
    await pause(5);
    await j.reactivate(Date.now());
    const report = await h.audit();
    expect(report.violations).toContainEqual(
      expect.objectContaining({ rule: 'lease ownership', detail: expect.stringContaining('two owners') }),
    );
  });

  it('reports a claim of a live lease', async () => {
    const h = await history();
    const j = h.job(Date.now());
    await j.create();
    await pause(5);
    await j.claim();
    expect((await h.audit()).violations).toContainEqual(
      expect.objectContaining({ rule: 'lease ownership', detail: expect.stringContaining('while live') }),
    );
  });

  it('reports a job that published after its lease was claimed', async () => {
    const h = await history();
    const j = h.job(Date.now() - 60_000);
    await j.create();
    const out = await j.stage();
    await j.claim();
    await pause(5);
    await j.publish([out]);
    expect(await h.rules()).toEqual(['fenced job published', 'published with an expired lease']);
  });

  it('reports a deleted object of a job whose lease was active', async () => {
    const h = await history();
    const j = h.job(Date.now());
    await j.create();
    const out = await j.stage();
    await pause(5);
    await h.store.deleteMany([out]);
    expect(await h.rules()).toEqual(['live job object deleted']);
  });

  it("accepts a retired output deleted after its reader grace while its job's expired lease is still unclaimed: retirement needs no claim (found by the CI soak)", async () => {
    const h = await history();
    const j = h.job(Date.now() - 60_000);
    await j.create();
    const out = await j.stage();
    // Refreshed so that it publishes 200 ms before its lease expires; the retirement is dated a grace back.
    await j.refresh(Date.now() - timing.leaseExpiryMs + 200);
    await j.publish([out]);
    await pause(250);
    await h.supersede([out], Date.now() - timing.readerGraceMs - 1000);
    await pause(5);
    await h.store.deleteMany([out]);
    expect((await h.audit()).violations).toEqual([]);
  });

  it("reports a retired output deleted within its reader grace while its job's lease was unexpired", async () => {
    const h = await history();
    const j = h.job(Date.now());
    await j.create();
    const out = await j.stage();
    await j.publish([out]);
    await h.supersede([out], Date.now());
    await pause(5);
    await h.store.deleteMany([out]);
    expect(await h.rules()).toEqual(['live job object deleted', 'retired segment deleted within its reader grace']);
  });

  it('after a settled pass, reports a claimed lease left behind, an expired lease not claimed and an unowned staged object not reclaimed', async () => {
    const h = await history();
    const claimed = h.job(Date.now() - 60_000);
    await claimed.create();
    await claimed.claim();
    const expired = h.job(Date.now() - 60_000);
    await expired.create();
    await expired.stage();
    await pause(5);
    const passMs = Date.now() + timing.stagingGraceMs;
    expect(await h.rules()).toEqual([]);
    expect(await h.rules({ settledPassClockMs: passMs })).toEqual([
      'claimed lease remains',
      'expired lease remains',
      'unowned staged object remains',
    ]);
  });

  it('reports a job said to be published whose outputs no root version references', async () => {
    const h = await history();
    const j = h.job(Date.now());
    await j.create();
    const out = await j.stage();
    expect(await h.rules({ published: [{ namespaceId: ns, jobId: j.id, outputs: [out] }] })).toEqual([
      'published result not in root history',
    ]);
  });
});
