/**
 * The invariant checker catches each violation it names, and passes a legal history: a checker that never fails is no
 * evidence.
 */
import { describe, expect, it } from 'vitest';
import { inputSegmentKey, jobId, leaseKey, namespaceId, rootKey, segmentId, stagedSegmentKey } from '../../src/keys';
import { claimLeaseState, createLeaseState, encodeLease, refreshLeaseState } from '../../src/lease';
import { encodeRoot } from '../../src/root';
import { checkInvariants, type StoreEvent } from '../support/invariants';
import { TEST_PASS_ID } from '../support/pass';

const ns = namespaceId('audit');
const job = jobId(`cmp_${'a'.repeat(32)}`);
const lease = leaseKey(ns, job);
const input = inputSegmentKey(ns, segmentId(`seg_${'1'.repeat(32)}`), 'mseg');
const output = stagedSegmentKey(ns, job, segmentId(`seg_${'2'.repeat(32)}`), 'mseg');
const expiry = 1000;
const created = createLeaseState({ jobId: job, namespaceId: ns, ownerId: 'w', nowMs: 0 });
const refreshed = refreshLeaseState(created, 500);
const bytes = (s: string) => new TextEncoder().encode(s);
const put = (
  key: string,
  body: Uint8Array,
  etag: string,
  atMs: number,
  condition: { ifMatch?: string; ifNoneMatch?: string } = {},
): StoreEvent => ({ kind: 'put', key, body, etag, atMs, ...condition });
const del = (key: string, atMs: number): StoreEvent => ({ kind: 'delete', key, atMs });
const root = (generation: number, keys: string[]) =>
  encodeRoot({ namespace_id: ns, generation, groups: { inodes: keys } });

/** Inputs, a job that creates, writes, refreshes and publishes; its lease later expires, is claimed and deleted. */
const legal: StoreEvent[] = [
  put(input, bytes('in'), 'i', 0),
  put(rootKey(ns), root(1, [input]), 'r1', 0, { ifNoneMatch: '*' }),
  put(lease, encodeLease(created), 'l1', 0, { ifNoneMatch: '*' }),
  put(output, bytes('out'), 'o', 100),
  put(lease, encodeLease(refreshed), 'l2', 500, { ifMatch: 'l1' }),
  put(rootKey(ns), root(2, [output]), 'r2', 600, { ifMatch: 'r1' }),
  put(lease, encodeLease(claimLeaseState(refreshed, TEST_PASS_ID, 2000)), 'l3', 2000, { ifMatch: 'l2' }),
  del(lease, 2100),
];
const finalOf = (log: StoreEvent[]) => {
  const objects = new Map<string, Uint8Array>();
  for (const e of log) {
    if (e.kind === 'put') objects.set(e.key, e.body!);
    else objects.delete(e.key);
  }
  return objects;
};
const audit = (log: StoreEvent[], liveness?: 'claimed-leases-deleted' | 'everything-reclaimed') =>
  checkInvariants(log, finalOf(log), { leaseExpiryMs: expiry, liveness });
const properties = (log: StoreEvent[], liveness?: 'claimed-leases-deleted' | 'everything-reclaimed') => [
  ...new Set(audit(log, liveness).violations.map((v) => v.property)),
];

describe('invariant checker', () => {
  it('passes a legal history and counts what it saw', () => {
    const result = audit(legal, 'everything-reclaimed');
    expect(result.violations).toEqual([]);
    expect(result.tally).toEqual({
      leasesCreated: 1,
      refreshes: 1,
      claims: 1,
      leasesDeleted: 1,
      publications: 1,
      objectsDeleted: 1,
    });
  });

  it('catches a broken collector that deletes a referenced key', () => {
    expect(properties([...legal, del(output, 2200)])).toContain('referencedDeleted');
  });

  it('catches two owners of one lease version: a claim and a refresh both from the same ETag', () => {
    const log = [
      ...legal.slice(0, 5),
      put(lease, encodeLease(claimLeaseState(refreshed, TEST_PASS_ID, 2000)), 'l3', 2000, { ifMatch: 'l2' }),
      put(lease, encodeLease(refreshLeaseState(refreshed, 2001)), 'l4', 2001, { ifMatch: 'l2' }),
    ];
    expect(properties(log)).toContain('oneOwner');
  });

  it('catches a claim of a live lease and a job writing active over reaping', () => {
    expect(
      properties([
        ...legal.slice(0, 5),
        put(lease, encodeLease(claimLeaseState(refreshed, TEST_PASS_ID, 2000)), 'l3', 900, { ifMatch: 'l2' }),
      ]),
    ).toEqual(['oneOwner']);
    const overReaping = [
      ...legal.slice(0, 5),
      put(lease, encodeLease(claimLeaseState(refreshed, TEST_PASS_ID, 2000)), 'l3', 2000, { ifMatch: 'l2' }),
    ];
    expect(
      properties([
        ...overReaping,
        put(lease, encodeLease(refreshLeaseState(refreshed, 2001)), 'l4', 2001, { ifMatch: 'l3' }),
      ]),
    ).toEqual(['oneOwner']);
  });

  it('catches a fenced job that published', () => {
    const log = [
      ...legal.slice(0, 5),
      put(lease, encodeLease(claimLeaseState(refreshed, TEST_PASS_ID, 2000)), 'l3', 2000, { ifMatch: 'l2' }),
      put(rootKey(ns), root(2, [output]), 'r2', 2100, { ifMatch: 'r1' }),
    ];
    expect(properties(log)).toEqual(['fencedPublished']);
  });

  it('catches a deleted object of a live job, and a deleted key outside any job prefix', () => {
    expect(properties([...legal.slice(0, 4), del(output, 200)])).toEqual(['liveDeleted']);
    expect(properties([...legal, del(rootKey(ns), 3000)])).toContain('outsideDeleted');
  });

  it('catches a bucket the log does not account for, a stranded claim, and an orphan never reclaimed', () => {
    const final = finalOf(legal);
    final.set('namespaces/audit/stray', bytes('?'));
    expect(checkInvariants(legal, final, { leaseExpiryMs: expiry }).violations.map((v) => v.property)).toEqual([
      'logMatchesBucket',
    ]);
    expect(properties(legal.slice(0, 7), 'claimed-leases-deleted')).toEqual(['claimedDeleted']);
    const orphan = stagedSegmentKey(ns, job, segmentId(`seg_${'3'.repeat(32)}`), 'mseg');
    expect(properties([...legal, put(orphan, bytes('x'), 'x', 150)], 'everything-reclaimed')).toEqual([
      'orphansReclaimed',
    ]);
  });
});
