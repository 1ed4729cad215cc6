/**
 * The reference compactor: streams a k-way merge of a group's input segments into output
 * segments of a target size under the job's prefix. Output segment ids are derived from the job
 * and the segment's index, so a resumed attempt rewrites nothing it finished and a re-run of a
 * half-written segment lands on the same key with the same bytes.
 */
import type { JobRef } from '../protocol';
import type { StreamOptions } from '../store';
import {
  compactorThreads,
  DEFAULT_SEGMENT_FORMAT_VERSION,
  isTombstone,
  isWellFormed,
  mergeSegments,
  newSegmentWriter,
  readMergeBatches,
  SEGMENT_EXTENSION,
  type MergeRecord,
  type SegmentFormatVersion,
} from '../segments';
import { planMerge, type MergePlan, type MergeSource } from './plan';
import { mergeInRanges, planRanges, type RangePlanning } from './range-merge';
import type { RangeCut } from './range-thread';
import { ProgressMismatchError, stagedOutputKey, type Compactor, type MergeLimits, type StagedStore } from './plugin';

/**
 * Outputs are compressed on the compactor pool's threads while the merge goes on: v2 block by block, v1 whole at the
 * cut.
 */
const BACKGROUND = { background: true } as const;

/**
 * Where a compaction stands; kept in Temporal heartbeat details so a retried attempt resumes. Its
 * size does not grow with the job's bytes: one number per intermediate run at most.
 */
export interface CompactionProgress {
  /**
   * This compactor's progress format: a resume of another version (or another compactor) is refused, never read as a
   * position.
   */
  readonly version: typeof PROGRESS_VERSION;
  readonly segmentsFinished: number;
  /** Last key of the last finished segment: a resumed attempt skips every key up to it. */
  readonly lastKey: string | null;
  /** Tombstone segments finished: the final merge's tombstones, cut at the same places as the outputs. */
  readonly tombstoneSegmentsFinished: number;
  /** The highest seq of a tombstone in the finished tombstone segments; absent while they hold none. */
  readonly tombstoneSeqFloor?: number;
  readonly recordsOut: number;
  readonly bytesOut: number;
  /**
   * Parts of each intermediate run finished so far, in plan order, and the fan-in they were planned with; absent until
   * one is.
   */
  readonly runs?: { readonly fanIn: number; readonly parts: readonly number[] };
}

/**
 * Raised whenever the shape or meaning of {@link CompactionProgress} changes: a worker resumes only
 * its own version, so one of another version refuses the progress instead of misreading it.
 */
export const PROGRESS_VERSION = 2;

/** Intermediate runs never leave the job, so they are always written in the fast format. */
const RUN_FORMAT = 2;

export const NO_PROGRESS: CompactionProgress = {
  version: PROGRESS_VERSION,
  segmentsFinished: 0,
  tombstoneSegmentsFinished: 0,
  lastKey: null,
  recordsOut: 0,
  bytesOut: 0,
};

export const outputSegmentKey = (job: JobRef, index: number): string =>
  stagedOutputKey(job, String(index), SEGMENT_EXTENSION);

/**
 * Part `part` of intermediate run `run` under fan-in `fanIn`: a fan-in of its own plans other runs, so their keys
 * differ too.
 */
export const runPartKey = (job: JobRef, fanIn: number, run: number, part: number): string =>
  stagedOutputKey(job, `run/${fanIn}/${run}/${part}`, SEGMENT_EXTENSION);

/**
 * Tombstone segment `index`: the tombstones the final merge left out of the outputs, staged for publication to name
 * when it must.
 */
export const tombstoneSegmentKey = (job: JobRef, index: number): string =>
  stagedOutputKey(job, `tombstones/${index}`, SEGMENT_EXTENSION);

export const outputSegmentKeys = (job: JobRef, progress: CompactionProgress): string[] =>
  Array.from({ length: progress.segmentsFinished }, (_, i) => outputSegmentKey(job, i));

export const tombstoneSegmentKeys = (job: JobRef, progress: CompactionProgress): string[] =>
  Array.from({ length: progress.tombstoneSegmentsFinished }, (_, i) => tombstoneSegmentKey(job, i));

export interface CompactionHooks {
  /**
   * Called after each cut of the final merge (its output and tombstone segments), and each intermediate run, is stored;
   * the activity heartbeats it.
   */
  readonly onSegmentFinished: (progress: CompactionProgress) => void;
  /** Called every few thousand records, so the activity can heartbeat and notice cancellation. */
  readonly onRecords: (recordsIn: number) => void;
}

/**
 * Merges all of the group's segments from `resume` on into output segments and, for the tombstones
 * that win their key, tombstone segments; it reads at most `maxFanIn` sources at once: a wider group first merges spans
 * of its inputs into intermediate runs
 * (see {@link planMerge}), staged under the job's prefix at keys derived from the job, the fan-in
 * and the run, and never referenced by a root (the collector reclaims them with the job's prefix).
 * Runs keep tombstones and every source's winner, so the outputs hold the records of one merge of
 * all inputs (byte for byte when the final merge runs on this thread; split into key ranges, it cuts
 * where the blocks of its own sources say). Outputs are written in `limits.segmentFormat`, runs
 * always in v2; inputs and
 * runs of either format are read. Records move in batches (a decoded block or chunk per source, runs of
 * the merge), so no step is awaited per record. Memory: two cuts of the final merge (an output and
 * a tombstone segment each: one being built while the one before is compressed and stored) plus, per
 * source read at once, about two read windows, its inflate state and its decoded batch (v2: two
 * blocks). A merge of n sources asks for windows fan-in / n times the store's own, so it holds
 * about as much as a merge of the full fan-in and sends fewer requests. An input or run part is
 * opened only when its merge starts and is closed by the end of its last record. A final merge of
 * v2 sources only runs in key ranges on the compactor's pool, at most one range per pool thread at
 * once, each holding what a merge here holds: memory is bounded by fan-in × threads × two windows,
 * plus two cuts per range (one being built, one waiting to be stored).
 */
export async function compactGroup(compaction: GroupCompaction): Promise<CompactionProgress> {
  const { limits, resume } = compaction;
  const plan = planMerge(compaction.inputs.length, limits.maxFanIn);
  // Runs finished under another fan-in belong to another plan: this attempt writes its own.
  const runParts = resume.runs?.fanIn === limits.maxFanIn ? [...resume.runs.parts] : [];
  const merging: Merging = {
    ...compaction,
    runParts,
    merge: sourceMerger(compaction, runParts),
    counted: recordCounter(compaction.hooks.onRecords),
    writes: writeBehind(),
  };
  try {
    const afterRuns = await writeIntermediateRuns(merging, plan, resume);
    return await writeFinalMerge(merging, plan.final, afterRuns);
  } finally {
    // No write of this attempt may still be in flight once it returns or fails (attemptWrites checks).
    await merging.writes.settled();
  }
}

/** What {@link compactGroup} merges and where it stands: the arguments of one attempt. */
export interface GroupCompaction {
  readonly store: StagedStore;
  readonly job: JobRef;
  /** The group's input segments, in the order the plan numbers them. */
  readonly inputs: readonly string[];
  readonly limits: MergeLimits;
  /** Where an earlier attempt stopped: {@link NO_PROGRESS} for a first one. */
  readonly resume: CompactionProgress;
  readonly hooks: CompactionHooks;
}

/** One attempt's merge machinery, shared by its intermediate runs and its final merge. */
interface Merging extends GroupCompaction {
  /** Parts of each intermediate run finished, in plan order: this attempt's and those it resumed. */
  readonly runParts: number[];
  readonly merge: (sources: readonly MergeSource[], after?: string) => AsyncIterable<MergeRecord[]>;
  /** Counts records read, telling the hooks every few thousand. */
  readonly counted: (records: number) => void;
  readonly writes: ReturnType<typeof writeBehind>;
}

/** Calls `onRecords` every few thousand records, wherever a batch crosses the mark. */
function recordCounter(onRecords: CompactionHooks['onRecords']): (records: number) => void {
  let recordsIn = 0;
  return (records) => {
    if (Math.floor((recordsIn + records) / 2048) > Math.floor(recordsIn / 2048)) onRecords(recordsIn + records);
    recordsIn += records;
  };
}

/**
 * The merge of a span of sources (inputs or finished intermediate runs), from after `after`. A merge of
 * fewer sources than the fan-in reads larger windows: no more memory than the widest merge, fewer requests.
 */
function sourceMerger(compaction: GroupCompaction, runParts: readonly number[]): Merging['merge'] {
  const { store, limits } = compaction;
  const { maxFanIn } = limits;
  const open = (source: MergeSource, windows: StreamOptions): AsyncIterator<MergeRecord[]> =>
    readSegments(store, sourceKeys(compaction, runParts, source), windows);
  return (sources, after) => {
    const windows = { windowMultiple: Math.floor(maxFanIn / sources.length) };
    return mergeSegments(
      sources.map((source) => open(source, windows)),
      { dropTombstones: false, after },
    );
  };
}

/**
 * Writes the plan's intermediate runs not yet finished, each cut into parts of the target size; a
 * run is reported finished (its part count heartbeated) only once every part of it is stored.
 */
async function writeIntermediateRuns(
  { store, job, limits, hooks, runParts, merge, counted, writes }: Merging,
  plan: MergePlan,
  resume: CompactionProgress,
): Promise<CompactionProgress> {
  const { targetSegmentBytes, maxFanIn } = limits;
  let progress = resume;
  for (let run = runParts.length; run < plan.runs.length; run++) {
    let parts = 0;
    let builder = newSegmentWriter(RUN_FORMAT, BACKGROUND);
    const storePart = async () => {
      const [part, bytes] = [parts++, builder.finish()];
      builder = newSegmentWriter(RUN_FORMAT, BACKGROUND);
      await writes.queue(bytes, (finished) => store.put(runPartKey(job, maxFanIn, run, part), finished));
    };
    for await (const batch of merge(plan.runs[run]!)) {
      for (const record of batch) {
        builder.add(record);
        if (builder.size >= targetSegmentBytes) await storePart();
      }
      counted(batch.length);
    }
    if (builder.count > 0) await storePart();
    await writes.drained();
    runParts.push(parts);
    progress = { ...progress, runs: { fanIn: maxFanIn, parts: [...runParts] } };
    hooks.onSegmentFinished(progress);
  }
  return progress;
}

/**
 * The final merge, from `resume`'s last key. It reads every input, so each key's winner is final here.
 * A winning tombstone leaves the outputs but not the job: it goes to a tombstone segment, which
 * publication names beside the outputs only when the group holds segments other than the inputs (one
 * of them may hold an older version of the key). Both are cut at the same record, so one position
 * resumes both. A merge of v2 sources only is split into key ranges merged on the compactor's pool
 * (range-merge.ts); one that reads a v1 segment runs here.
 */
async function writeFinalMerge(
  merging: Merging,
  sources: readonly MergeSource[],
  resume: CompactionProgress,
): Promise<CompactionProgress> {
  const { limits, writes } = merging;
  const version = limits.segmentFormat ?? DEFAULT_SEGMENT_FORMAT_VERSION;
  const cuts = finalCuts(merging, resume);
  const planning = rangePlanning(merging, sources);
  const ranges = await planRanges(planning);
  if (ranges !== undefined && compactorThreads() > 1) {
    await mergeInRanges(
      {
        ...planning,
        kind: 'final',
        format: version,
        storedThrough: resume.lastKey,
        counted: merging.counted,
        storeCut: ({ dead, live, ...tally }) => cuts.store(Promise.resolve([dead, live]), tally),
      },
      ranges,
    );
  } else {
    // On one thread, the ranges in key order in one merge here: a cut closes where a range ends, as its thread's does.
    const rangeEnds = ranges?.flatMap((range) => (range.hi === null ? [] : [range.hi])) ?? [];
    await cutFinalMerge(merging, { sources, resume, version, cuts, rangeEnds });
  }
  await writes.drained();
  return cuts.progress();
}

/** What one cut of the final merge holds, as its position counts it. */
type CutTally = Omit<RangeCut, 'live' | 'dead'>;

/**
 * Stores the final merge's cuts in order behind the merge, each followed by the progress it makes
 * (heartbeated only once stored: a position never names an output that is not stored).
 */
function finalCuts({ store, job, hooks, writes }: Merging, resume: CompactionProgress) {
  let progress = resume;
  return {
    progress: () => progress,
    store: (bytes: Promise<[Uint8Array | undefined, Uint8Array | undefined]>, tally: CutTally): Promise<void> =>
      writes.queue(bytes, async ([deadBytes, liveBytes]) => {
        if (deadBytes) await store.put(tombstoneSegmentKey(job, progress.tombstoneSegmentsFinished), deadBytes);
        if (liveBytes) await store.put(outputSegmentKey(job, progress.segmentsFinished), liveBytes);
        const { deadMaxSeq } = tally;
        progress = {
          ...progress,
          segmentsFinished: progress.segmentsFinished + Math.sign(tally.liveCount),
          tombstoneSegmentsFinished: progress.tombstoneSegmentsFinished + Math.sign(tally.deadCount),
          lastKey: tally.lastKey,
          ...(deadMaxSeq !== undefined && {
            tombstoneSeqFloor: Math.max(deadMaxSeq, progress.tombstoneSeqFloor ?? deadMaxSeq),
          }),
          recordsOut: progress.recordsOut + tally.liveCount,
          bytesOut: progress.bytesOut + tally.liveSize,
        };
        hooks.onSegmentFinished(progress);
      }),
  };
}

/**
 * The final merge on this thread: values and tombstones cut together when either reaches the target
 * size, and before the first key at or past each of `rangeEnds`.
 */
async function cutFinalMerge(
  { limits, merge, counted }: Merging,
  { sources, resume, version, cuts, rangeEnds }: FinalMerge,
): Promise<void> {
  let live = newSegmentWriter(version, BACKGROUND);
  let dead = newSegmentWriter(version, BACKGROUND);
  let lastKey = resume.lastKey;
  let deadMaxSeq: number | undefined;
  const storeCut = async () => {
    const [cutLive, cutDead] = [live, dead];
    const tally = { liveCount: live.count, liveSize: live.size, deadCount: dead.count, deadMaxSeq, lastKey: lastKey! };
    live = newSegmentWriter(version, BACKGROUND);
    dead = newSegmentWriter(version, BACKGROUND);
    deadMaxSeq = undefined;
    const bytes = Promise.all([
      cutDead.count > 0 ? cutDead.finish() : undefined,
      cutLive.count > 0 ? cutLive.finish() : undefined,
    ]);
    await cuts.store(bytes, tally);
  };
  // Ends at or before the resumed key are passed: the cut being made starts after it, as a range's does.
  let end = rangeEnds.findIndex((key) => resume.lastKey === null || key > resume.lastKey);
  if (end < 0) end = rangeEnds.length;
  for await (const batch of merge(sources, resume.lastKey ?? undefined)) {
    for (const record of batch) {
      if (end < rangeEnds.length && record.key >= rangeEnds[end]!) {
        if (live.count > 0 || dead.count > 0) await storeCut();
        while (end < rangeEnds.length && record.key >= rangeEnds[end]!) end++;
      }
      if (isTombstone(record)) {
        dead.add(record);
        deadMaxSeq = Math.max(record.seq, deadMaxSeq ?? 0);
      } else live.add(record);
      lastKey = record.key;
      if (live.size >= limits.targetSegmentBytes || dead.size >= limits.targetSegmentBytes) await storeCut();
    }
    counted(batch.length);
  }
  if (live.count > 0 || dead.count > 0) await storeCut();
}

/** A final merge to run on this thread: its sources, where it resumes, its format and where its cuts go. */
interface FinalMerge {
  readonly sources: readonly MergeSource[];
  readonly resume: CompactionProgress;
  readonly version: SegmentFormatVersion;
  readonly cuts: ReturnType<typeof finalCuts>;
  /** Keys before which a cut closes: the ends of the key ranges the merge is split into (none: unsplit). */
  readonly rangeEnds: readonly string[];
}

/** The segments a merge source reads, in key order: an input, or the parts of a finished intermediate run. */
const sourceKeys = (
  { job, inputs, limits }: GroupCompaction,
  runParts: readonly number[],
  source: MergeSource,
): string[] =>
  'input' in source
    ? [inputs[source.input]!]
    : Array.from({ length: runParts[source.run]! }, (_, part) => runPartKey(job, limits.maxFanIn, source.run, part));

/** What planning the key ranges of a merge of `sources` reads: its store, segments, windows and cut size. */
function rangePlanning(merging: Merging, sources: readonly MergeSource[]): RangePlanning {
  const { store, limits, runParts } = merging;
  return {
    store,
    sources: sources.map((source) => sourceKeys(merging, runParts, source)),
    targetSegmentBytes: limits.targetSegmentBytes,
    windows: { windowMultiple: Math.floor(limits.maxFanIn / sources.length) },
  };
}

/**
 * Stores that run behind the merge, one after another in the order queued: the merge hands a
 * finished segment over (its compression already started) and goes on, and waits only when a
 * second would queue behind the one being stored, so at most two are held in memory.
 */
function writeBehind() {
  let last: Promise<void> = Promise.resolve();
  return {
    /** Queues `write` of `bytes`, run once every write before it is done; resolves when the one before it is. */
    async queue<T>(bytes: Promise<T>, write: (bytes: T) => Promise<unknown>): Promise<void> {
      // A failure of `bytes` reaches `write`'s caller through `last`, even when a failure before it means `write` never
      // runs.
      bytes.catch(() => undefined);
      const previous = last;
      last = previous.then(async () => void (await write(await bytes)));
      last.catch(() => undefined);
      await previous;
    },
    /** Every queued write done; rejects with the first failure. */
    drained: (): Promise<void> => last,
    /** Every queued write done or failed. */
    settled: (): Promise<void> => last.catch(() => undefined),
  };
}

const isCount = (value: unknown): value is number => Number.isSafeInteger(value) && (value as number) >= 0;

/**
 * `resume` as this compactor's progress: undefined (a first attempt) is {@link NO_PROGRESS}; anything
 * else must be a {@link CompactionProgress} of this version, field by field, or it is refused with
 * {@link ProgressMismatchError}. Read loosely, a foreign progress (another format module, another
 * version) would be a position past the end: no record written, no output, and a publication that
 * replaces the group with nothing.
 */
export function resumeProgress(job: JobRef, resume: unknown): CompactionProgress {
  if (resume === undefined) return NO_PROGRESS;
  const p = resume as Partial<Record<keyof CompactionProgress, unknown>> | null;
  const runs = p?.runs as { fanIn?: unknown; parts?: unknown } | undefined;
  const fits =
    typeof p === 'object' &&
    p !== null &&
    p.version === PROGRESS_VERSION &&
    isCount(p.segmentsFinished) &&
    isCount(p.tombstoneSegmentsFinished) &&
    isCount(p.recordsOut) &&
    isCount(p.bytesOut) &&
    (p.tombstoneSeqFloor === undefined || isCount(p.tombstoneSeqFloor)) &&
    // A cut finishes an output, a tombstone segment or both: lastKey is set once either count is.
    // A key is well-formed text: a lone surrogate here is no position the merge could have reached.
    (p.lastKey === null
      ? p.segmentsFinished === 0 && p.tombstoneSegmentsFinished === 0
      : typeof p.lastKey === 'string' &&
        isWellFormed(p.lastKey) &&
        (p.segmentsFinished as number) + (p.tombstoneSegmentsFinished as number) > 0) &&
    (runs === undefined ||
      (typeof runs === 'object' &&
        runs !== null &&
        isCount(runs.fanIn) &&
        runs.fanIn >= 2 &&
        Array.isArray(runs.parts) &&
        runs.parts.every(isCount)));
  if (!fits)
    throw new ProgressMismatchError(job, resume, `the reference compactor's progress of version ${PROGRESS_VERSION}`);
  return resume as CompactionProgress;
}

/**
 * The reference compactor, on the plug-in interface: {@link compactGroup}, its progress in the
 * heartbeat details, its outputs the keys of the segments it finished. It takes any `resume` and
 * checks it is its own ({@link resumeProgress}).
 */
export const referenceCompactor: Compactor = {
  async compact({ job, inputs, store, limits, resume, heartbeat }) {
    const progress = await compactGroup({
      store,
      job,
      inputs,
      limits,
      resume: resumeProgress(job, resume),
      hooks: { onSegmentFinished: heartbeat, onRecords: () => heartbeat() },
    });
    const floor = progress.tombstoneSeqFloor === undefined ? {} : { tombstoneSeqFloor: progress.tombstoneSeqFloor };
    return {
      outputs: outputSegmentKeys(job, progress),
      tombstones: tombstoneSegmentKeys(job, progress),
      ...floor,
      recordsOut: progress.recordsOut,
      bytesOut: progress.bytesOut,
    };
  },
};

/**
 * The record batches of `keys` one after another. Each segment is opened (its first window read)
 * when the one before it starts, so a source of several segments (an intermediate run's parts)
 * waits no round trip between them: it holds its current segment and the next one's first window.
 */
async function* readSegments(
  store: StagedStore,
  keys: readonly string[],
  windows: StreamOptions,
): AsyncGenerator<MergeRecord[]> {
  let opening = keys.length > 0 ? store.getStream(keys[0]!, windows) : undefined;
  for (const [i, key] of keys.entries()) {
    const current = await opening!;
    opening = i + 1 < keys.length ? store.getStream(keys[i + 1]!, windows) : undefined;
    // Handled here too: a merge that stops early leaves the next segment's opening to nobody.
    opening?.catch(() => undefined);
    yield* readMergeBatches(key, current.body);
  }
}

export { FanInError, planMerge, type MergePlan, type MergeSource } from './plan';
export { MAX_RECURRING_ATTEMPTS, nextStreak, RecurringFailureError, type FailureStreak } from './recurring';
export {
  attemptWrites,
  CompactorRuleError,
  checkOutputsExist,
  checkProgress,
  checkStagedKeys,
  MAX_PROGRESS_BYTES,
  OutputMissingError,
  OutsideJobPrefixError,
  ProgressMismatchError,
  ProgressRefusedError,
  stagedOutputKey,
  stagedStore,
  withCheckedProgress,
  WriteAfterAttemptError,
  type AttemptWrites,
  type CompactionAttempt,
  type CompactionJob,
  type CompactionOutputs,
  type Compactor,
  type MergeLimits,
  type StagedStore,
} from './plugin';
