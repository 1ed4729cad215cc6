/**
 * Bounded fan-in on MinIO: a group of any width is merged reading at most `maxFanIn` inputs at
 * once, through intermediate runs staged under the job's prefix, into the same bytes as one merge
 * of all inputs; a resumed attempt picks up the runs its predecessor finished.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import {
  compactGroup,
  NO_PROGRESS,
  outputSegmentKeys,
  planMerge,
  runPartKey,
  tombstoneSegmentKeys,
  type CompactionHooks,
  type CompactionProgress,
  type MergeLimits,
  type MergePlan,
} from '../../src/compactor';
import { jobPrefix, inputSegmentKey, namespaceId, newJobId, newSegmentId } from '../../src/keys';
import { encodeSegment, SEGMENT_EXTENSION, type SegmentFormatVersion, type SegmentRecord } from '../../src/segments';
import type { ObjectStore, StreamedObject, StreamOptions } from '../../src/store';
import { makeInputs, readRecords, referenceMerge } from '../support/records';
import { openTestStore, type TestStore } from '../support/stores';
import { uniqueId } from '../support/temporal';

const NO_HOOKS: CompactionHooks = { onSegmentFinished: () => {}, onRecords: () => {} };

/**
 * The store as the compactor sees it, counting input streams open at once (from `getStream` to the
 * end of the body), logging when each is opened and ended and the window multiple it asked for, and every key written.
 */
function observedStore(store: ObjectStore): {
  store: ObjectStore;
  mostOpen: () => number;
  puts: string[];
  streams: string[];
  windowMultiples: Map<string, number | undefined>;
} {
  let open = 0;
  let most = 0;
  const puts: string[] = [];
  const streams: string[] = [];
  const windowMultiples = new Map<string, number | undefined>();
  async function* counted(key: string, body: AsyncIterable<Uint8Array>): AsyncGenerator<Uint8Array> {
    try {
      yield* body;
    } finally {
      open--;
      streams.push(`end ${key}`);
    }
  }
  const own: Partial<ObjectStore> = {
    getStream: async (key: string, options?: StreamOptions): Promise<StreamedObject> => {
      most = Math.max(most, ++open);
      streams.push(`open ${key}`);
      windowMultiples.set(key, options?.windowMultiple);
      try {
        const object = await store.getStream(key, options);
        return { ...object, body: counted(key, object.body) };
      } catch (err) {
        open--;
        throw err;
      }
    },
    put: (key: string, body: Uint8Array) => {
      puts.push(key);
      return store.put(key, body);
    },
  };
  const observed = new Proxy(store, {
    get: (target, property) => {
      if (property in own) return own[property as keyof ObjectStore];
      const value: unknown = Reflect.get(target, property);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
  return { store: observed, mostOpen: () => most, puts, streams, windowMultiples };
}

/**
 * Inputs in v1: these tests observe the merge on the job's own thread, which every group holding a v1
 * segment takes (a group of v2 only is merged in key ranges on the pool: segments-threads.test.ts).
 */
async function writeGroup(
  store: ObjectStore,
  ns: string,
  inputs: SegmentRecord[][],
  format: SegmentFormatVersion = 1,
): Promise<string[]> {
  const keys = inputs.map(() => inputSegmentKey(namespaceId(ns), newSegmentId(), SEGMENT_EXTENSION));
  for (let i = 0; i < inputs.length; i += 50)
    await Promise.all(keys.slice(i, i + 50).map((key, j) => store.put(key, encodeSegment(inputs[i + j]!, format))));
  return keys;
}

const sortedInputs = (count: number, records: number, keySpace: number) =>
  makeInputs(count, records, keySpace).map((input) => input.sort((a, b) => (a.key < b.key ? -1 : 1)));

describe('a merge of more inputs than the fan-in', () => {
  let fixture: TestStore;
  afterEach(() => vi.unstubAllEnvs());
  beforeAll(async () => {
    fixture = await openTestStore('minio');
  });
  afterAll(async () => {
    await fixture?.store.close();
  });

  /** Runs a compaction of `inputs` as a fresh job and returns its output bytes, segment by segment. */
  async function compact(
    store: ObjectStore,
    ns: string,
    inputs: readonly string[],
    limits: MergeLimits,
  ): Promise<{ bytes: Buffer[]; progress: CompactionProgress; job: ReturnType<typeof jobOf> }> {
    const job = jobOf(ns);
    const progress = await compactGroup({ store, job, inputs, limits, resume: NO_PROGRESS, hooks: NO_HOOKS });
    return { bytes: await outputBytes(job, progress), progress, job };
  }
  const jobOf = (ns: string) => ({ namespaceId: namespaceId(ns), jobId: newJobId() });
  async function outputBytes(job: ReturnType<typeof jobOf>, progress: CompactionProgress): Promise<Buffer[]> {
    return Promise.all(
      outputSegmentKeys(job, progress).map(async (key) => Buffer.from((await fixture.store.get(key)).body)),
    );
  }

  /**
   * The most streams a merge of `plan` holds open: one per source, and a run's source one more, its next part opened
   * ahead.
   */
  const mostStreams = (plan: MergePlan): number =>
    Math.max(...[...plan.runs, plan.final].map((sources) => sources.length + sources.filter((s) => 'run' in s).length));

  it.each([250, 1000])(
    '%i inputs at fan-in 16 never read more than 16 sources at once, and compact to the bytes of one merge of all inputs',
    async (count) => {
      const ns = uniqueId('fanin').toLowerCase();
      const inputs = sortedInputs(count, 3, 2000);
      const keys = await writeGroup(fixture.store, ns, inputs);
      const limits = { targetSegmentBytes: 16 * 1024, maxFanIn: 16 };
      const bounded = observedStore(fixture.store);
      const multi = await compact(bounded.store, ns, keys, limits);
      const single = observedStore(fixture.store);
      const one = await compact(single.store, ns, keys, { ...limits, maxFanIn: count });

      expect(multi.progress.runs?.parts).toHaveLength(planMerge(count, 16).runs.length);
      expect(bounded.mostOpen()).toBeLessThanOrEqual(mostStreams(planMerge(count, 16)));
      // The counter sees what the single-level merge does: every input open at once.
      expect(single.mostOpen()).toBe(count);
      expect(multi.bytes).toEqual(one.bytes);
      expect(multi.progress.segmentsFinished).toBeGreaterThan(1);
      expect(await readRecords(fixture.store, outputSegmentKeys(multi.job, multi.progress))).toEqual(
        referenceMerge(inputs),
      );
    },
  );

  it('250 v2 inputs at fan-in 16: the final merge of the runs is split into key ranges on two pool threads, reading at most two ranges of sources at once, into the records of one merge and the bytes of one thread', async () => {
    const ns = uniqueId('fanin-ranges').toLowerCase();
    const inputs = sortedInputs(250, 120, 30_000);
    const keys = await writeGroup(fixture.store, ns, inputs, 2);
    const limits = { targetSegmentBytes: 16 * 1024, maxFanIn: 16 };
    const plan = planMerge(keys.length, limits.maxFanIn);
    const onThreads = async (threads: number) => {
      // A fresh package with a pool of `threads` threads, its range tasks counted.
      vi.stubEnv('COMPACTION_COMPACTOR_THREADS', String(threads));
      vi.resetModules();
      const { compactGroup: compactOn } = await import('../../src/compactor');
      const run = vi.spyOn((await import('../../src/segments')).compactorPool(), 'run');
      const observed = observedStore(fixture.store);
      const job = jobOf(ns);
      const progress = await compactOn({
        store: observed.store,
        job,
        inputs: keys,
        limits,
        resume: NO_PROGRESS,
        hooks: NO_HOOKS,
      });
      const ranges = run.mock.calls.filter(([, options]) => options?.name === 'mergeRange').length;
      return { observed, job, progress, ranges, bytes: await outputBytes(job, progress) };
    };
    const two = await onThreads(2);
    const one = await onThreads(1);
    expect(two.progress.runs?.parts).toHaveLength(plan.runs.length);
    expect(two.ranges).toBeGreaterThan(2);
    expect(one.ranges).toBe(0);
    // Two ranges at once, each reading every run (a run's next part opened ahead): twice a merge of the runs.
    expect(two.observed.mostOpen()).toBeGreaterThan(mostStreams(plan));
    expect(two.observed.mostOpen()).toBeLessThanOrEqual(2 * mostStreams(plan));
    expect(one.observed.mostOpen()).toBeLessThanOrEqual(mostStreams(plan));
    // Each range reads the runs' windows as the merge of all of them does: fan-in / runs times the store's own.
    const runKeys = new Set(
      two.progress.runs!.parts.flatMap((parts, run) =>
        Array.from({ length: parts }, (_, part) => runPartKey(two.job, limits.maxFanIn, run, part)),
      ),
    );
    const finalMultiples = [...two.observed.windowMultiples].filter(([key]) => runKeys.has(key));
    expect(finalMultiples).toHaveLength(runKeys.size);
    expect(new Set(finalMultiples.map(([, multiple]) => multiple))).toEqual(
      new Set([Math.floor(limits.maxFanIn / plan.final.length)]),
    );
    expect(two.bytes).toEqual(one.bytes);
    expect(await readRecords(fixture.store, outputSegmentKeys(two.job, two.progress))).toEqual(referenceMerge(inputs));
  });

  it("an intermediate run's next part is opened while the merge reads the one before it, and the outputs are those of one merge", async () => {
    const ns = uniqueId('fanin-parts').toLowerCase();
    const inputs = sortedInputs(20, 200, 3000);
    const keys = await writeGroup(fixture.store, ns, inputs);
    const limits = { targetSegmentBytes: 2048, maxFanIn: 6 };
    const observed = observedStore(fixture.store);
    const multi = await compact(observed.store, ns, keys, limits);
    const one = await compact(fixture.store, ns, keys, { ...limits, maxFanIn: 20 });
    expect(multi.bytes).toEqual(one.bytes);
    const runs = multi.progress.runs!.parts;
    expect(Math.min(...runs)).toBeGreaterThan(2);
    const at = (event: string) => observed.streams.indexOf(event);
    for (const [run, parts] of runs.entries()) {
      for (let part = 0; part + 1 < parts; part++) {
        const [current, next] = [
          runPartKey(multi.job, limits.maxFanIn, run, part),
          runPartKey(multi.job, limits.maxFanIn, run, part + 1),
        ];
        expect(at(`open ${next}`)).toBeGreaterThan(at(`open ${current}`));
        expect(at(`open ${next}`)).toBeLessThan(at(`end ${current}`));
      }
    }
    expect(observed.mostOpen()).toBeLessThanOrEqual(mostStreams(planMerge(20, limits.maxFanIn)));
    // Merges of as many sources as the fan-in: the store's own windows.
    expect(new Set(observed.windowMultiples.values())).toEqual(new Set([1]));
  });

  it("a merge of fewer sources than the fan-in reads windows fan-in / sources times the store's own, into the same bytes", async () => {
    const ns = uniqueId('fanin-windows').toLowerCase();
    const inputs = sortedInputs(5, 400, 3000);
    const keys = await writeGroup(fixture.store, ns, inputs);
    const observed = observedStore(fixture.store);
    const narrow = await compact(observed.store, ns, keys, { targetSegmentBytes: 2048, maxFanIn: 16 });
    const wide = await compact(fixture.store, ns, keys, { targetSegmentBytes: 2048, maxFanIn: 5 });
    expect([...observed.windowMultiples].sort()).toEqual(keys.map((key) => [key, 3]).sort());
    expect(narrow.bytes).toEqual(wide.bytes);
    expect(await readRecords(fixture.store, outputSegmentKeys(narrow.job, narrow.progress))).toEqual(
      referenceMerge(inputs),
    );
  });

  it('equal seqs are decided as in one merge of all inputs: the later input wins, whichever run it went through', async () => {
    const ns = uniqueId('fanin-ties').toLowerCase();
    // Every record has the same seq: each key's winner is the last input that holds it.
    const inputs = sortedInputs(40, 50, 400).map((input) => input.map((r) => ({ ...r, seq: 7 })));
    const keys = await writeGroup(fixture.store, ns, inputs);
    const multi = await compact(fixture.store, ns, keys, { targetSegmentBytes: 4096, maxFanIn: 3 });
    const one = await compact(fixture.store, ns, keys, { targetSegmentBytes: 4096, maxFanIn: 40 });
    expect(multi.progress.runs?.parts.length).toBeGreaterThan(10);
    expect(multi.bytes).toEqual(one.bytes);
  });

  it('an attempt that stopped after two runs resumes from its progress: it rewrites none of their parts, and its outputs are those of an uninterrupted merge', async () => {
    const ns = uniqueId('fanin-resume').toLowerCase();
    const inputs = sortedInputs(60, 40, 1500);
    const keys = await writeGroup(fixture.store, ns, inputs);
    const limits = { targetSegmentBytes: 2048, maxFanIn: 8 };
    const job = jobOf(ns);
    let stoppedAt: CompactionProgress | undefined;
    const stop = new Error('the worker died');
    await expect(
      compactGroup({
        store: fixture.store,
        job,
        inputs: keys,
        limits,
        resume: NO_PROGRESS,
        hooks: {
          ...NO_HOOKS,
          onSegmentFinished: (p) => {
            if ((p.runs?.parts.length ?? 0) < 2) return;
            stoppedAt = p;
            throw stop;
          },
        },
      }),
    ).rejects.toBe(stop);
    expect(stoppedAt?.runs?.parts).toHaveLength(2);
    const finishedParts = stoppedAt!.runs!.parts.flatMap((parts, run) =>
      Array.from({ length: parts }, (_, part) => runPartKey(job, limits.maxFanIn, run, part)),
    );
    expect(finishedParts.length).toBeGreaterThanOrEqual(2);

    const resumed = observedStore(fixture.store);
    const progress = await compactGroup({
      store: resumed.store,
      job,
      inputs: keys,
      limits,
      resume: stoppedAt!,
      hooks: NO_HOOKS,
    });
    expect(resumed.puts.filter((key) => finishedParts.includes(key))).toEqual([]);
    const uninterrupted = await compact(fixture.store, ns, keys, limits);
    expect(await outputBytes(job, progress)).toEqual(uninterrupted.bytes);

    // Under the prefix: the runs' parts of the plan, the outputs and the tombstone segments, nothing twice and nothing
    // else.
    const listed = (await fixture.store.list({ prefix: `${jobPrefix(job.namespaceId, job.jobId)}segments/` })).objects
      .map((o) => o.key)
      .sort();
    const expected = [
      ...progress.runs!.parts.flatMap((parts, run) =>
        Array.from({ length: parts }, (_, part) => runPartKey(job, limits.maxFanIn, run, part)),
      ),
      ...outputSegmentKeys(job, progress),
      ...tombstoneSegmentKeys(job, progress),
    ].sort();
    expect(listed).toEqual(expected);
  });

  it('an attempt resumed under another fan-in merges by its own plan into the same bytes', async () => {
    const ns = uniqueId('fanin-replan').toLowerCase();
    const inputs = sortedInputs(30, 40, 1000);
    const keys = await writeGroup(fixture.store, ns, inputs);
    const job = jobOf(ns);
    let stoppedAt: CompactionProgress | undefined;
    await compactGroup({
      store: fixture.store,
      job,
      inputs: keys,
      limits: { targetSegmentBytes: 2048, maxFanIn: 4 },
      resume: NO_PROGRESS,
      hooks: {
        ...NO_HOOKS,
        onSegmentFinished: (p) => {
          if ((p.runs?.parts.length ?? 0) < 2) return;
          stoppedAt = p;
          throw new Error('the worker died');
        },
      },
    }).catch(() => {});
    const progress = await compactGroup({
      store: fixture.store,
      job,
      inputs: keys,
      limits: { targetSegmentBytes: 2048, maxFanIn: 6 },
      resume: stoppedAt!,
      hooks: NO_HOOKS,
    });
    expect(progress.runs?.fanIn).toBe(6);
    expect(progress.runs?.parts).toHaveLength(planMerge(30, 6).runs.length);
    const uninterrupted = await compact(fixture.store, ns, keys, { targetSegmentBytes: 2048, maxFanIn: 30 });
    expect(await outputBytes(job, progress)).toEqual(uninterrupted.bytes);
  });
});
