/**
 * Ids are brand types, erased at run time: a caller may hand a raw string cast to an id. Every
 * exported function that touches the store validates its ids itself and throws InvalidKeyError
 * before its first request (issue 15, item 3), on MinIO through a store that records every call.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  InvalidKeyError,
  newJobId,
  type FamilyGroup,
  type MetadataCompactionId,
  type NamespaceId,
} from '../../src/keys';
import { createLeaseState } from '../../src/lease';
import {
  createJobLease,
  publishCompaction,
  readLease,
  readRoot,
  readRootIfAny,
  refreshJobLease,
  updateRoot,
  type JobRef,
} from '../../src/protocol';
import { claimLease, deleteLease, listJobPrefixes, reclaimPrefix, surveyLease } from '../../src/collector';
import { jsonRootCodec } from '../../src/root';
import type { ObjectStore } from '../../src/store';
import { writeInputSegment } from '../../src/writer';
import { interceptStore, type StoreOperation } from '../support/faults';
import { openTestStore, type TestStore } from '../support/stores';
import { TEST_PASS_ID } from '../support/pass';

const TRAVERSAL_NAMESPACE = '../demo' as NamespaceId;
const TRAVERSAL_JOB = `cmp_${'0'.repeat(32)}/../../root.json` as MetadataCompactionId;
const clock = { nowMs: Date.now(), leaseExpiryMs: 1000, passId: TEST_PASS_ID };

describe('raw ids at the protocol functions', () => {
  let fixture: TestStore;
  let store: ObjectStore;
  const requests: StoreOperation[] = [];

  beforeAll(async () => {
    fixture = await openTestStore('minio');
    store = interceptStore(fixture.store, (operation) => void requests.push(operation));
  });
  afterAll(() => fixture?.store.close());

  const refs: [string, JobRef][] = [
    ['a traversal namespace', { namespaceId: TRAVERSAL_NAMESPACE, jobId: newJobId() }],
    ['a traversal job id', { namespaceId: 'demo' as NamespaceId, jobId: TRAVERSAL_JOB }],
  ];
  const held = (ref: JobRef) => ({ lease: createLeaseState({ ...ref, ownerId: 'raw', nowMs: 1 }), etag: '"x"' });
  const calls: [string, (ref: JobRef) => Promise<unknown>][] = [
    ['readLease', (ref) => readLease(store, ref)],
    ['createJobLease', (ref) => createJobLease(store, { ...ref, ownerId: 'raw', startedAtMs: 1 })],
    ['refreshJobLease', (ref) => refreshJobLease(store, ref, held(ref), () => 2)],
    ['surveyLease', (ref) => surveyLease(store, ref, clock)],
    ['claimLease', (ref) => claimLease(store, ref, clock)],
    ['deleteLease', (ref) => deleteLease(store, ref, TEST_PASS_ID)],
    [
      'reclaimPrefix',
      (ref) =>
        reclaimPrefix(
          store,
          ref,
          {
            ...clock,
            stagingGraceMs: 0,
            readerGraceMs: 0,
            keysPerFlush: 10,
            reportLimit: 10,
            leaseRefreshIntervalMs: 1000,
          },
          { codec: jsonRootCodec },
        ),
    ],
    [
      'publishCompaction',
      (ref) =>
        publishCompaction(
          store,
          { ...ref, group: 'bindings' as FamilyGroup, inputs: [], outputs: [] },
          {
            budgetMs: 1000,
            maxRootRaces: 1,
            raceBackoff: { firstMs: 10, maxMs: 100 },
            clock: { leaseClockMs: () => 2, elapsedMs: () => 0 },
            codec: jsonRootCodec,
          },
        ),
    ],
  ];
  const namespaceCalls: [string, (ns: NamespaceId) => Promise<unknown>][] = [
    ['readRoot', (ns) => readRoot(store, ns, jsonRootCodec)],
    ['readRootIfAny', (ns) => readRootIfAny(store, ns, jsonRootCodec)],
    ['updateRoot', (ns) => updateRoot(store, ns, (root) => root, { codec: jsonRootCodec })],
    ['listJobPrefixes', (ns) => listJobPrefixes(store, ns, undefined, 10)],
    [
      'writeInputSegment',
      (ns) => writeInputSegment(store, { namespaceId: ns, group: 'bindings' }, [{ key: 'a', seq: 1, value: 'v' }]),
    ],
  ];

  it.each(calls.flatMap(([name, call]) => refs.map(([what, ref]) => [name, what, call, ref] as const)))(
    '%s with %s throws InvalidKeyError and sends no request',
    async (_, __, call, ref) => {
      requests.length = 0;
      await expect(call(ref)).rejects.toThrow(InvalidKeyError);
      expect(requests).toEqual([]);
    },
  );

  it.each(namespaceCalls)(
    '%s with a traversal namespace throws InvalidKeyError and sends no request',
    async (_, call) => {
      requests.length = 0;
      await expect(call(TRAVERSAL_NAMESPACE)).rejects.toThrow(InvalidKeyError);
      expect(requests).toEqual([]);
    },
  );

  it('the bucket holds nothing afterwards', async () => {
    expect((await fixture.store.list({ prefix: '' })).objects).toEqual([]);
  });
});
