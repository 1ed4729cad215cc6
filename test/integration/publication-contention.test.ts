/**
 * Many publications of one namespace at once, on MinIO, at the worker's default limits: they lose
 * root races to each other, wait between them, and every one publishes.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setTimeout as sleep } from 'node:timers/promises';
import { resolveSettings } from '../../src/config';
import {
  familyGroup,
  inputSegmentKey,
  namespaceId,
  newJobId,
  newSegmentId,
  rootKey,
  stagedSegmentKey,
} from '../../src/keys';
import { createJobLease, publicationLimits, publishCompaction, readRoot, updateRoot } from '../../src/protocol';
import { addSegments, jsonRootCodec as codec } from '../../src/root';
import { PreconditionFailedError } from '../../src/store';
import { wrapStore } from '../support/faults';
import { openTestStore, type TestStore } from '../support/stores';
import { uniqueId } from '../support/temporal';

const GROUPS = 40;
const settings = resolveSettings();

describe('publications contending for one root', () => {
  let fixture: TestStore;
  beforeAll(async () => {
    fixture = await openTestStore('minio');
  });
  afterAll(async () => fixture?.store.close());

  it(`${GROUPS} groups of one namespace publishing at once all publish, each wait between races within the cap`, async () => {
    const { store } = fixture;
    const ns = namespaceId(uniqueId('contend').toLowerCase());
    const groups = Array.from({ length: GROUPS }, (_, i) => familyGroup(`g${i}`));
    const inputs = groups.map(() => [0, 1].map(() => inputSegmentKey(ns, newSegmentId(), 'mseg')));
    await Promise.all(inputs.flat().map((key) => store.put(key, new Uint8Array())));
    await updateRoot(store, ns, (root) => groups.reduce((r, g, i) => addSegments(r, g, inputs[i]!), root), { codec });
    const requests = await Promise.all(
      groups.map(async (group, i) => {
        const job = { namespaceId: ns, jobId: newJobId() };
        await createJobLease(store, { ...job, ownerId: 'test', startedAtMs: Date.now() });
        return {
          ...job,
          group,
          inputs: inputs[i]!,
          outputs: [stagedSegmentKey(ns, job.jobId, newSegmentId(), 'mseg')],
        };
      }),
    );
    let lostCas = 0;
    const counting = wrapStore(store, async (operation, args, call) => {
      try {
        return await call();
      } catch (err) {
        if (operation === 'putIfMatch' && args[0] === rootKey(ns) && err instanceof PreconditionFailedError) lostCas++;
        throw err;
      }
    });
    const waits: number[] = [];
    const start = performance.now();
    const clock = {
      leaseClockMs: Date.now,
      elapsedMs: () => performance.now() - start,
      sleep: (ms: number) => (waits.push(ms), sleep(ms)),
    };
    const outcomes = await Promise.all(
      requests.map((request) => publishCompaction(counting, request, { ...publicationLimits(settings), clock, codec })),
    );
    expect(outcomes.map((o) => o.outcome)).toEqual(groups.map(() => 'published'));
    // The race happened: CASes failed on a root another publication had changed, and each loser waited.
    expect(lostCas).toBeGreaterThan(0);
    expect(waits.length).toBeGreaterThan(0);
    expect(Math.max(...waits)).toBeLessThanOrEqual(settings.rootRaceBackoffMaxMs);
    const { root } = await readRoot(store, ns, codec);
    expect(groups.map((g) => root.groups[g])).toEqual(requests.map((r) => r.outputs));
  }, 180_000);
});
