/**
 * A merge of v2 sources is split into key ranges, each merged on a thread of the compactor's pool:
 * the ranges depend on the inputs only, so one thread or several write the same bytes under the same
 * keys, and an attempt stopped half-way and resumed writes what one never stopped writes. Each run
 * loads the package afresh with `COMPACTION_COMPACTOR_THREADS` set, so it has a pool of that size.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { CompactionProgress, MergeLimits } from '../../src/compactor';
import { familyGroup, jobId, namespaceId } from '../../src/keys';
import type { IndexedSegment } from '../../src/compactor/ranges';
import type { SegmentRecord } from '../../src/segments';
import { createEmbeddedObjectStore, type ObjectStore } from '../../src/store';
import { makeInputs, readRecords, referenceMerge, writeInputs } from '../support/records';

const job = {
  namespaceId: namespaceId('threads'),
  jobId: jobId('cmp_0123456789abcdef0123456789abcdef'),
  group: familyGroup('inodes'),
};

/** `records` written as v2 input segments, by key, in the order written. */
async function inputSegments(records: SegmentRecord[][]): Promise<Map<string, Buffer>> {
  const store = createEmbeddedObjectStore({ path: ':memory:' });
  const keys = await writeInputs(store, job.namespaceId, job.group, records, [2]);
  return new Map(await Promise.all(keys.map(async (key) => [key, Buffer.from((await store.get(key)).body)] as const)));
}

interface Run {
  readonly outputs: Map<string, Buffer>;
  readonly progress: CompactionProgress;
  readonly rangeTasks: number;
  readonly poolThreads: number;
}

/**
 * Compacts `inputs` (a copy of the objects in a fresh store) with a pool of `threads` threads, from
 * `resume`; `stopAfter`: the attempt fails once that many cuts are stored, as a killed one would.
 */
async function compactOn(
  threads: number,
  inputs: Map<string, Buffer>,
  options: {
    limits: MergeLimits;
    resume?: CompactionProgress;
    stopAfter?: number;
    store?: ObjectStore;
    heartbeated?: CompactionProgress[];
  },
): Promise<Run & { store: ObjectStore; heartbeated: CompactionProgress[] }> {
  vi.stubEnv('COMPACTION_COMPACTOR_THREADS', String(threads));
  vi.resetModules();
  const { compactGroup, NO_PROGRESS, outputSegmentKeys, tombstoneSegmentKeys } = await import('../../src/compactor');
  const pool = (await import('../../src/segments')).compactorPool();
  const run = vi.spyOn(pool, 'run');
  const store = options.store ?? createEmbeddedObjectStore({ path: ':memory:' });
  if (!options.store) for (const [key, bytes] of inputs) await store.put(key, bytes);
  const heartbeated = options.heartbeated ?? [];
  const progress = await compactGroup({
    store,
    job,
    inputs: [...inputs.keys()],
    limits: options.limits,
    resume: options.resume ?? NO_PROGRESS,
    hooks: {
      onSegmentFinished: (progress) => {
        heartbeated.push(progress);
        if (heartbeated.length === options.stopAfter) throw new Error('killed');
      },
      onRecords: () => {},
    },
  });
  const keys = [...outputSegmentKeys(job, progress), ...tombstoneSegmentKeys(job, progress)];
  const outputs = new Map(
    await Promise.all(keys.map(async (k) => [k, Buffer.from((await store.get(k)).body)] as const)),
  );
  const rangeTasks = run.mock.calls.filter(([, options]) => options?.name === 'mergeRange').length;
  return { outputs, progress, rangeTasks, poolThreads: pool.threads.length, store, heartbeated };
}

afterEach(() => vi.unstubAllEnvs());
vi.setConfig({ testTimeout: 120_000 });

describe('a merge split into key ranges on the pool', () => {
  it.each([1, 2] as const)(
    'the golden segment of format %i compacts to the same bytes on one thread and on three',
    async (format) => {
      const golden = readFileSync(join(__dirname, '..', 'golden', `segment-v${format}.mseg`));
      const inputs = new Map([[`namespaces/threads/metadata/inodes/golden.mseg`, golden]]);
      for (const segmentFormat of [1, 2] as const) {
        const limits = { targetSegmentBytes: 1024, maxFanIn: 8, segmentFormat };
        const one = await compactOn(1, inputs, { limits });
        const three = await compactOn(3, inputs, { limits });
        expect(one.outputs.size).toBeGreaterThan(0);
        expect(three.outputs).toEqual(one.outputs);
        expect(three.progress).toEqual(one.progress);
        // One range (a small group) is merged on the job's thread.
        expect(three.rangeTasks).toBe(0);
      }
    },
  );

  it('a 1,000-input group compacts to the same bytes on one thread and on three, its final merge in many ranges', async () => {
    const records = makeInputs(1000, 24, 12_000);
    const inputs = await inputSegments(records);
    const limits = { targetSegmentBytes: 16 * 1024, maxFanIn: 128 };
    const one = await compactOn(1, inputs, { limits });
    const three = await compactOn(3, inputs, { limits });
    expect(three.outputs).toEqual(one.outputs);
    expect(three.progress).toEqual(one.progress);
    expect(three.rangeTasks).toBeGreaterThan(3);
    // One thread merges the ranges in key order on the job's thread, in one merge.
    expect(one.rangeTasks).toBe(0);
    expect([one.poolThreads, three.poolThreads]).toEqual([1, 3]);
    const outputKeys = [...one.outputs.keys()].slice(0, one.progress.segmentsFinished);
    expect(await readRecords(one.store, outputKeys)).toEqual(referenceMerge(records));
  });

  it.each([
    [2, 2],
    [2, 1],
    [1, 2],
  ])(
    'an attempt on %i threads stopped half-way and resumed on %i from its last heartbeat writes the bytes of one never stopped',
    async (before, after) => {
      const inputs = await inputSegments(makeInputs(16, 2000, 40_000));
      const limits = { targetSegmentBytes: 32 * 1024, maxFanIn: 16 };
      const whole = await compactOn(2, inputs, { limits });
      expect(whole.heartbeated.length).toBeGreaterThan(8);
      const store = createEmbeddedObjectStore({ path: ':memory:' });
      for (const [key, bytes] of inputs) await store.put(key, bytes);
      const stopAt = Math.floor(whole.heartbeated.length / 2);
      const killed = compactOn(before, inputs, { limits, store, stopAfter: stopAt });
      await expect(killed).rejects.toThrow('killed');
      const resumed = await compactOn(after, inputs, { limits, store, resume: whole.heartbeated[stopAt - 1] });
      expect(resumed.progress).toEqual(whole.progress);
      expect(resumed.outputs).toEqual(whole.outputs);
      // The resumed attempt stored only what the stopped one had not: its first heartbeat is the cut after.
      expect(resumed.heartbeated[0]).toEqual(whole.heartbeated[stopAt]);
    },
  );

  it('eight jobs at once on two threads, each split into more ranges than threads, all finish with the records of one merge', async () => {
    const records = makeInputs(16, 2000, 40_000);
    const inputs = await inputSegments(records);
    vi.stubEnv('COMPACTION_COMPACTOR_THREADS', '2');
    vi.resetModules();
    const { compactGroup, NO_PROGRESS, outputSegmentKeys } = await import('../../src/compactor');
    const run = vi.spyOn((await import('../../src/segments')).compactorPool(), 'run');
    const store = createEmbeddedObjectStore({ path: ':memory:' });
    for (const [key, bytes] of inputs) await store.put(key, bytes);
    const jobs = Array.from({ length: 8 }, (_, i) => ({ ...job, jobId: jobId(`cmp_${String(i).repeat(32)}`) }));
    const progress = await Promise.all(
      jobs.map((one) =>
        compactGroup({
          store,
          job: one,
          inputs: [...inputs.keys()],
          limits: { targetSegmentBytes: 8 * 1024, maxFanIn: 16 },
          resume: NO_PROGRESS,
          hooks: { onSegmentFinished: () => {}, onRecords: () => {} },
        }),
      ),
    );
    expect(run.mock.calls.filter(([, options]) => options?.name === 'mergeRange').length).toBeGreaterThan(8 * 2);
    for (const [i, one] of jobs.entries())
      expect(await readRecords(store, outputSegmentKeys(one, progress[i]!))).toEqual(referenceMerge(records));
  });

  it('an attempt resumed under another target size stores each record once: it cuts afresh after the last stored key', async () => {
    const records = makeInputs(16, 2000, 40_000);
    const inputs = await inputSegments(records);
    const store = createEmbeddedObjectStore({ path: ':memory:' });
    for (const [key, bytes] of inputs) await store.put(key, bytes);
    const heartbeated: CompactionProgress[] = [];
    const limits = { targetSegmentBytes: 32 * 1024, maxFanIn: 16 };
    await expect(compactOn(2, inputs, { limits, store, stopAfter: 5, heartbeated })).rejects.toThrow('killed');
    const resume = heartbeated.at(-1)!;
    const resumed = await compactOn(2, inputs, { limits: { ...limits, targetSegmentBytes: 20_000 }, store, resume });
    const outputs = [...resumed.outputs.keys()].slice(0, resumed.progress.segmentsFinished);
    expect(resumed.progress.segmentsFinished).toBeGreaterThan(resume.segmentsFinished);
    expect(await readRecords(store, outputs)).toEqual(referenceMerge(records));
  });
});

describe('planKeyRanges', () => {
  const segment = (key: string, firsts: string[]): IndexedSegment => ({
    key,
    blocks: firsts.map((first, i) => ({
      offset: 8 + i * 100,
      end: 108 + i * 100,
      count: 2,
      firstKey: first,
      lastKey: `${first}~`,
    })),
  });

  it('splits at first keys of blocks into ranges that tile the keys, each reading every block that may hold its keys', async () => {
    const { planKeyRanges } = await import('../../src/compactor/ranges');
    const sources = [[segment('a', ['b', 'd', 'f', 'h'])], [segment('b', ['c', 'e']), segment('c', ['g', 'i'])]];
    const ranges = planKeyRanges(sources, 250);
    expect(ranges.map((r) => [r.lo, r.hi])).toEqual([
      [null, 'e'],
      ['e', 'h'],
      ['h', null],
    ]);
    const read = ranges.map((r) => r.sources.map((spans) => spans.flatMap((s) => s.blocks.map((b) => b.firstKey))));
    expect(read).toEqual([
      [['b', 'd'], ['c']],
      [['f'], ['e', 'g']],
      [['h'], ['i']],
    ]);
    expect(ranges[1]!.sources[1]!.map((s) => [s.key, s.first, s.after])).toEqual([
      ['b', 1, 'c~'],
      ['c', 0, null],
    ]);
    expect(planKeyRanges(sources, 1e9)).toHaveLength(1);
  });
});
