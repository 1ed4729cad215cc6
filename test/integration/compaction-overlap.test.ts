/**
 * The final merge stores a cut while it fills the next, on MinIO: outputs are still stored in
 * order, a heartbeated position names only outputs already stored, and a failed store fails the
 * attempt only once none of its writes is in flight.
 */
import { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  compactGroup,
  NO_PROGRESS,
  outputSegmentKey,
  outputSegmentKeys,
  type CompactionProgress,
} from '../../src/compactor';
import { namespaceId, newJobId } from '../../src/keys';
import { readSegmentBatches, SEGMENT_FORMAT_VERSIONS } from '../../src/segments';
import type { JobRef } from '../../src/protocol';
import type { ObjectStore } from '../../src/store';
import { makeInputs, readRecords, referenceMerge, writeInputs } from '../support/records';
import { openTestStore, type TestStore } from '../support/stores';
import { uniqueId } from '../support/temporal';

/**
 * `store` whose put of `job`'s output segment i waits for `held(i, bytes)` (failing output `failAt`), logging when each
 * starts and ends.
 */
function slowOutputs(
  store: ObjectStore,
  job: JobRef,
  held: (output: number, bytes: Uint8Array) => Promise<unknown>,
  failAt?: number,
  onStored: (output: number) => void = () => {},
) {
  const log: string[] = [];
  let inFlight = 0;
  const outputs = new Map(Array.from({ length: 1000 }, (_, i) => [outputSegmentKey(job, i), i]));
  const put = async (key: string, body: Uint8Array) => {
    if (!outputs.has(key)) return store.put(key, body);
    inFlight++;
    log.push(`start ${key}`);
    try {
      await held(outputs.get(key)!, body);
      if (outputs.get(key) === failAt) throw new Error(`injected failure storing ${key}`);
      const stored = await store.put(key, body);
      onStored(outputs.get(key)!);
      return stored;
    } finally {
      inFlight--;
      log.push(`end ${key}`);
    }
  };
  const observed = new Proxy(store, {
    get: (target, property) => {
      if (property === 'put') return put;
      const value: unknown = Reflect.get(target, property);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
  return { store: observed, log, inFlight: () => inFlight };
}

describe.each(SEGMENT_FORMAT_VERSIONS)('the final merge, writing segment format v%i', (segmentFormat) => {
  let fixture: TestStore;
  beforeAll(async () => {
    fixture = await openTestStore('minio');
  });
  afterAll(async () => {
    await fixture?.store.close();
  });
  it('merges on while a cut is stored, stores outputs in order, and heartbeats only stored outputs', async () => {
    const ns = uniqueId('overlap');
    const inputs = makeInputs(4, 40_000);
    const keys = await writeInputs(fixture.store, ns, 'g', inputs, [1, 2]);
    const job = { namespaceId: namespaceId(ns), jobId: newJobId() };
    /** The merged records up to `key`: the distinct keys of the inputs up to it. */
    const mergedUpTo = (key: string) =>
      new Set(
        inputs
          .flat()
          .filter((r) => r.key <= key)
          .map((r) => r.key),
      ).size;
    // Cuts of several thousand records, each longer than the merge's batches (4,096 records), so the merge
    // reports records (after each batch) while filling the cut after the one being stored.
    const limits = { targetSegmentBytes: 512 * 1024, maxFanIn: 16, segmentFormat };
    let reported = 0;
    let reportedWhenFirstStored = 0;
    /**
     * The first cut's put ends only once the merge has reported more records than that cut holds (it
     * is then past the cut; the count comes from the cut's own last key), or after 30 s, when the
     * assertion below fails: a merge that waited for the put would never get there.
     */
    const mergedPast = async (bytes: Uint8Array) => {
      let lastKey = '';
      for await (const batch of readSegmentBatches('first cut', Readable.from([bytes])))
        lastKey = batch.at(-1)?.key ?? lastKey;
      const cut = mergedUpTo(lastKey);
      for (const deadline = Date.now() + 30_000; reported <= cut && Date.now() < deadline;) await sleep(10);
    };
    const { store, log } = slowOutputs(
      fixture.store,
      job,
      (output, bytes) => (output === 0 ? mergedPast(bytes) : sleep(20)),
      undefined,
      (output) => {
        if (output === 0) reportedWhenFirstStored = reported;
      },
    );
    const heartbeats: CompactionProgress[] = [];
    const progress = await compactGroup({
      store,
      job,
      inputs: keys,
      limits,
      resume: NO_PROGRESS,
      hooks: {
        onRecords: (records) => {
          reported = records;
        },
        onSegmentFinished: (p) => heartbeats.push(p),
      },
    });

    expect(progress.segmentsFinished).toBeGreaterThan(3);
    // The merge went on while the first output was being stored: it had merged records (keys) past that cut's last key.
    expect(reportedWhenFirstStored).toBeGreaterThan(mergedUpTo(heartbeats[0]!.lastKey!));
    // One output stored at a time, in the order of the outputs.
    expect(log).toEqual(outputSegmentKeys(job, progress).flatMap((key) => [`start ${key}`, `end ${key}`]));
    // Each heartbeat comes after its outputs are stored, and the positions rise to the last.
    for (const p of heartbeats) expect(log).toContain(`end ${outputSegmentKey(job, p.segmentsFinished - 1)}`);
    expect(heartbeats.map((p) => p.segmentsFinished)).toEqual(
      [...heartbeats.map((p) => p.segmentsFinished)].sort((a, b) => a - b),
    );
    expect(heartbeats.at(-1)).toEqual(progress);
    expect(await readRecords(fixture.store, outputSegmentKeys(job, progress))).toEqual(referenceMerge(inputs));
  });

  it('fails when a cut cannot be stored, once no write of the attempt is in flight, having stored nothing after it', async () => {
    const ns = uniqueId('overlap-fail');
    const keys = await writeInputs(fixture.store, ns, 'g', makeInputs(4, 3000), [1, 2]);
    const job = { namespaceId: namespaceId(ns), jobId: newJobId() };
    const limits = { targetSegmentBytes: 16 * 1024, maxFanIn: 16, segmentFormat };
    const { store, log, inFlight } = slowOutputs(fixture.store, job, () => sleep(100), 1);
    const heartbeats: number[] = [];
    await expect(
      compactGroup({
        store,
        job,
        inputs: keys,
        limits,
        resume: NO_PROGRESS,
        hooks: { onRecords: () => {}, onSegmentFinished: (p) => heartbeats.push(p.segmentsFinished) },
      }),
    ).rejects.toThrow(/injected failure/);
    expect(inFlight()).toBe(0);
    expect(log).toEqual([
      `start ${outputSegmentKey(job, 0)}`,
      `end ${outputSegmentKey(job, 0)}`,
      `start ${outputSegmentKey(job, 1)}`,
      `end ${outputSegmentKey(job, 1)}`,
    ]);
    expect(heartbeats).toEqual([1]);
  });
});
