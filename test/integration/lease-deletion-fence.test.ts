/**
 * A pass deletes its lease only in the version it read as its own claim (a conditional delete,
 * `If-Match` on DeleteObject): a deletion that lands after another pass took the claim over deletes
 * nothing, and the other claim stays. Shown on the stores that honour the condition; MinIO ignores
 * it (the store check reports `conditionalDelete: ignored`), and the same late deletion there removes
 * the other claim: the window docs/stores.md names.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { leaseKey, namespaceId, newJobId, newPassId } from '../../src/keys';
import { createLeaseState, encodeLease } from '../../src/lease';
import { readLease, type JobRef } from '../../src/protocol';
import { claimLease, deleteLease, type SettledOwner } from '../../src/collector';
import type { ObjectStore } from '../../src/store';
import { openTestStore, type StoreKind, type TestStore } from '../support/stores';
import { uniqueId } from '../support/temporal';

const EXPIRY_MS = 60_000;

/**
 * Pass A claims an expired lease and deletes it, its delete held between the read of its claim and
 * the delete itself; meanwhile pass B, at a clock past A's claim's expiry, takes the claim over.
 */
async function lateDeletion(store: ObjectStore): Promise<{
  readonly deleted: boolean;
  readonly taken: SettledOwner | undefined;
  readonly job: JobRef;
  readonly passB: string;
}> {
  const job: JobRef = { namespaceId: namespaceId(uniqueId('fence').toLowerCase()), jobId: newJobId() };
  const key = leaseKey(job.namespaceId, job.jobId);
  await store.put(
    key,
    encodeLease(createLeaseState({ jobId: job.jobId, namespaceId: job.namespaceId, ownerId: 'dead job', nowMs: 1 })),
  );
  const nowMs = Date.now();
  const passA = { nowMs, leaseExpiryMs: EXPIRY_MS, passId: newPassId(nowMs) };
  const passB = { nowMs: nowMs + 2 * EXPIRY_MS, leaseExpiryMs: EXPIRY_MS, passId: newPassId(nowMs + 2 * EXPIRY_MS) };
  const claimed = await claimLease(store, job, passA);
  expect(claimed).toMatchObject({ owner: 'collector' });
  let taken: SettledOwner | undefined;
  // A's read of its lease answers, then A stalls: B claims before A's delete is sent.
  const stalled = Object.assign(Object.create(store) as ObjectStore, {
    get: async (k: string, options?: { maxBytes?: number }) => {
      const read = await store.get(k, options);
      if (k === key && taken === undefined) taken = await claimLease(store, job, passB);
      return read;
    },
  });
  const deleted = await deleteLease(stalled, job, passA.passId, {
    claim: claimed.owner === 'collector' ? claimed.claim : undefined,
  });
  return { deleted, taken, job, passB: passB.passId };
}

describe.each<StoreKind>(['moto', 'embedded'])('on %s, which honours a conditional delete', (kind) => {
  let fixture: TestStore;
  beforeAll(async () => {
    fixture = await openTestStore(kind);
  });
  afterAll(async () => fixture?.store.close());

  it("a pass's lease deletion that lands after another pass took its claim over deletes nothing, and the other claim stays", async () => {
    const { deleted, taken, job, passB } = await lateDeletion(fixture.store);
    expect(taken, 'the other pass took the claim over between the read and the delete').toMatchObject({
      owner: 'collector',
    });
    expect(deleted, 'the late pass reports its claim lost').toBe(false);
    expect(await readLease(fixture.store, job)).toMatchObject({ lease: { status: 'reaping', owner_id: passB } });
  });
});

describe('on MinIO, which ignores a conditional delete', () => {
  let fixture: TestStore;
  beforeAll(async () => {
    fixture = await openTestStore('minio');
  });
  afterAll(async () => fixture?.store.close());

  it("the same late deletion removes the other pass's claim: the read is the only check there", async () => {
    const { deleted, taken, job } = await lateDeletion(fixture.store);
    expect(taken).toMatchObject({ owner: 'collector' });
    expect(deleted).toBe(true);
    expect(await readLease(fixture.store, job)).toEqual({ missing: true });
  });
});
