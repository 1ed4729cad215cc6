/**
 * A merge of v2 sources split into key ranges (ranges.ts), each merged on a thread of the
 * compactor's pool (range-thread.ts), at most one range per pool thread of a job at once. This, the
 * job's thread, keeps the store: it reads each range's blocks for it and stores the cuts the ranges
 * send, in key order (a range's cuts wait until every range before it is stored), so outputs,
 * their numbering and the progress heartbeated are one key order whatever the threads.
 */
import { extname, join } from 'node:path';
import { MessageChannel, type MessagePort } from 'node:worker_threads';
import type { StreamOptions } from '../store';
import {
  blockIndexFromTail,
  compactorPool,
  compactorThreads,
  INDEX_TAIL_BYTES,
  loadOnPoolThreads,
  SegmentCorruptError,
  type IndexedBlock,
  type SegmentFormatVersion,
} from '../segments';
import type { StagedStore } from './plugin';
import type { FromRange, RangeCut, RangeTask, ToRange } from './range-thread';
import { planKeyRanges, type IndexedSegment, type KeyRange } from './ranges';

/** The module a pool thread loads for a range, beside this one (see segments/pool.ts). */
const RANGE_THREAD_MODULE = join(__dirname, `range-thread${extname(__filename)}`);

// Ranges run on the pool only when it has more than one thread: there, its threads load their module as they start.
if (compactorThreads() > 1) loadOnPoolThreads(RANGE_THREAD_MODULE);

/** Block indexes read at once: each a HEAD and a ranged GET of the segment's tail. */
const INDEX_READS = 16;

/** Bytes of a source's blocks sent to a range at once: one message per quarter MiB, not per chunk of a window. */
const BATCH_BYTES = 256 * 1024;

/** A merge to split: its sources' segments, how to cut, and where each cut goes. */
export interface RangeMerge {
  readonly store: StagedStore;
  /** Per source, its segments in key order (an input: one; an intermediate run: its parts). */
  readonly sources: readonly (readonly string[])[];
  readonly kind: RangeTask['kind'];
  readonly format: SegmentFormatVersion;
  readonly targetSegmentBytes: number;
  /** See {@link RangeTask.storedThrough}; ranges wholly at or before it are not merged again. */
  readonly storedThrough: string | null;
  readonly windows: StreamOptions;
  /** Stores a cut; resolves when the cut before it is stored (at most two are held). Called in key order. */
  readonly storeCut: (cut: RangeCut) => Promise<void>;
  /** Told the records each range reads, as they are read. */
  readonly counted: (records: number) => void;
}

/**
 * Compressed input bytes of one range: two target segments, several cuts of output. A range costs a ranged GET per
 * source and reads again the blocks across its ends: at half a target, 8 inputs of 40 MB made 19 ranges, and the job's
 * thread spent a second of CPU on their 152 GETs.
 */
export const rangeBytes = (targetSegmentBytes: number): number => Math.max(64 * 1024, targetSegmentBytes * 2);

/** What planning a merge's key ranges reads: its store and sources, the windows it reads with, its cut size. */
export type RangePlanning = Pick<RangeMerge, 'store' | 'sources' | 'windows' | 'targetSegmentBytes'>;

/**
 * The key ranges of a merge (ranges.ts), from its sources' block indexes, when every segment of it is
 * v2 and it makes more than one; undefined otherwise (its keys are one range).
 */
export async function planRanges(merge: RangePlanning): Promise<KeyRange[] | undefined> {
  const sources = await indexSources(merge.sources, (key) => readBlockIndex(merge, key));
  if (sources === undefined) return undefined;
  const planned = planKeyRanges(sources, rangeBytes(merge.targetSegmentBytes));
  return planned.length > 1 ? planned : undefined;
}

/**
 * The merge's `planned` ranges on the pool, those wholly at or before what an earlier attempt stored
 * left out. A failure of any range (or of a read or a store for it) stops the others: their threads
 * are ended, which fails no other job's task.
 */
export async function mergeInRanges(merge: RangeMerge, planned: readonly KeyRange[]): Promise<void> {
  const { storedThrough } = merge;
  const ranges = planned.filter((range) => range.hi === null || storedThrough === null || range.hi > storedThrough);
  const limit = compactorThreads();
  const stop = new AbortController();
  const running = new Set<Promise<void>>();
  let before: Promise<void> = Promise.resolve();
  try {
    for (const range of ranges) {
      while (running.size >= limit) await Promise.race(running);
      let start!: () => void;
      const started = new Promise<void>((resolve) => (start = resolve));
      const done = runRange(merge, range, { before, stop: stop.signal, started: start });
      done.catch(() => undefined);
      const tracked: Promise<void> = done.finally(() => running.delete(tracked));
      tracked.catch(() => undefined);
      running.add(tracked);
      before = done;
      // WARN: the next range is queued only once this one runs. A range holds its thread until the ranges before it
      // are stored, and the pool may start queued tasks out of order: a range started before one it waits on could
      // hold the thread that one needs (jobs with more ranges queued than threads deadlocked so).
      await Promise.race([started, tracked]);
    }
    await before;
    await Promise.all(running);
  } catch (err) {
    stop.abort();
    await Promise.allSettled(running);
    throw err;
  }
}

type IndexOf = (key: string) => Promise<IndexedBlock[] | undefined>;

/** Segments with their block indexes, read a few at once; undefined when one of them is not v2. */
async function indexSegments(keys: readonly string[], indexOf: IndexOf): Promise<IndexedSegment[] | undefined> {
  const indexed: IndexedSegment[] = [];
  for (let at = 0; at < keys.length; at += INDEX_READS) {
    const batch = keys.slice(at, at + INDEX_READS);
    const blocks = await Promise.all(batch.map(indexOf));
    if (blocks.some((b) => b === undefined)) return undefined;
    indexed.push(...batch.map((key, i) => ({ key, blocks: blocks[i]! })));
  }
  return indexed;
}

/**
 * Each source's segments with their block indexes; undefined when one of them is not v2. Sources of
 * one segment (the inputs among them: only an input may be v1) are read first, so a merge that
 * cannot be split reads no intermediate run's index.
 */
async function indexSources(sources: readonly (readonly string[])[], indexOf: IndexOf) {
  const single = sources.filter((keys) => keys.length === 1).flat();
  const indexed = new Map<string, IndexedSegment>();
  for (const keys of [single, sources.filter((keys) => keys.length !== 1).flat()]) {
    const segments = await indexSegments(keys, indexOf);
    if (segments === undefined) return undefined;
    for (const segment of segments) indexed.set(segment.key, segment);
  }
  return sources.map((keys) => keys.map((key) => indexed.get(key)!));
}

/** The block index of segment `key`, from its tail (one ranged read, two for a large index); undefined if not v2. */
async function readBlockIndex({ store, windows }: RangePlanning, key: string): Promise<IndexedBlock[] | undefined> {
  const { size } = await store.head(key);
  for (let start = Math.max(0, size - INDEX_TAIL_BYTES); size > 0;) {
    const parts: Uint8Array[] = [];
    const tail = await store.getStream(key, { ...windows, range: { start, end: size } });
    for await (const chunk of tail.body) parts.push(chunk);
    const found = blockIndexFromTail(key, size, Buffer.concat(parts));
    if (found === undefined || 'blocks' in found) return found?.blocks;
    if (found.readFrom >= start) throw new SegmentCorruptError(key, 'the trailer is malformed');
    start = found.readFrom;
  }
  return undefined;
}

/** How one range runs among the others of its merge. */
interface RangeOrder {
  /** The range before it: its cuts are stored only once that one is done. */
  readonly before: Promise<void>;
  /** Aborted when another range of the merge fails. */
  readonly stop: AbortSignal;
  /** Called once the range runs on a thread (its first message). */
  readonly started: () => void;
}

/**
 * Runs one range on the pool and serves it; resolves once its task is done and every cut it sent is
 * stored or queued to be.
 */
async function runRange(merge: RangeMerge, range: KeyRange, { before, stop, started }: RangeOrder): Promise<void> {
  const { port1, port2 } = new MessageChannel();
  const own = new AbortController();
  const abort = () => own.abort();
  stop.addEventListener('abort', abort);
  port1.once('message', started);
  const served = serveRange(merge, port1, before, abort);
  const task: RangeTask = {
    port: port2,
    sources: range.sources,
    lo: range.lo,
    hi: range.hi,
    storedThrough: merge.storedThrough,
    kind: merge.kind,
    format: merge.format,
    targetSegmentBytes: merge.targetSegmentBytes,
  };
  try {
    await compactorPool().run(task, {
      filename: RANGE_THREAD_MODULE,
      name: 'mergeRange',
      transferList: [port2 as never],
      signal: own.signal,
    });
    await served.cuts();
  } catch (err) {
    // The store's or the data's own error, typed, in place of the thread's copy of it or of the abort.
    throw served.failure() ?? err;
  } finally {
    stop.removeEventListener('abort', abort);
    port1.close();
  }
}

/** Answers one range's requests on `port`: reads of its blocks, its cuts (after `before`) and its record counts. */
function serveRange(merge: RangeMerge, port: MessagePort, before: Promise<void>, abort: () => void) {
  const streams = new Map<number, Promise<AsyncIterator<Uint8Array>>>();
  let failure: unknown;
  let cuts = before;
  const fail = (err: unknown) => {
    failure ??= err;
    abort();
  };
  const post = (message: ToRange, transfer: ArrayBuffer[] = []) => port.postMessage(message, transfer);
  port.on('message', (message: FromRange) => {
    switch (message.type) {
      case 'open': {
        const range = { start: message.start, end: message.end };
        const opening = merge.store.getStream(message.key, { ...merge.windows, range });
        streams.set(
          message.stream,
          opening.then((o) => o.body[Symbol.asyncIterator]()),
        );
        opening.catch(() => undefined);
        return;
      }
      case 'next':
        return void nextBatch(streams.get(message.stream)!).then(
          (bytes) => post({ type: 'chunk', stream: message.stream, bytes }, bytes ? [bytes.buffer] : []),
          fail,
        );
      case 'cut':
        cuts = cuts.then(() => merge.storeCut(message.cut)).then(() => post({ type: 'stored' }));
        return void cuts.catch(fail);
      case 'records':
        return merge.counted(message.count);
      case 'corrupt':
        return void (failure ??= new SegmentCorruptError(message.key, message.reason));
    }
  });
  return { failure: () => failure, cuts: () => cuts };
}

/** A stream's next chunks, {@link BATCH_BYTES} at least unless it ends, in one buffer of their own; none at its end. */
async function nextBatch(opening: Promise<AsyncIterator<Uint8Array>>): Promise<Uint8Array<ArrayBuffer> | undefined> {
  const chunks = await opening;
  const parts: Uint8Array[] = [];
  let bytes = 0;
  while (bytes < BATCH_BYTES) {
    const next = await chunks.next();
    if (next.done) break;
    parts.push(next.value);
    bytes += next.value.length;
  }
  if (parts.length === 0) return undefined;
  const batch = Buffer.allocUnsafeSlow(bytes);
  let at = 0;
  for (const part of parts) at += (batch.set(part, at), part.length);
  return batch;
}
