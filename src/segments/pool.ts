/**
 * The compactor's threads: one pool per process (Piscina), sized by `COMPACTION_COMPACTOR_THREADS`
 * (see {@link compactorThreads}), on which every compaction of the process codes its blocks (zstd of
 * v2 blocks, gzip of whole v1 segments) and merges the key ranges of its v2 merges, so the process
 * uses every core whatever the mix of its jobs. Node's own asynchronous zstd builds a stream and a
 * zstd context on the calling thread for every call (about 100 µs a block, measured in
 * docs/performance.md), more than the work it moves away; a pool thread's synchronous calls build
 * their contexts too, but off the merging thread, which pays one message a batch each way.
 *
 * Threads start on first use and keep the process alive only while they have work. A thread that
 * dies fails the tasks it held only (their callers' attempts); the pool starts another.
 */
import { availableParallelism } from 'node:os';
import { extname, join } from 'node:path';
import { isMainThread } from 'node:worker_threads';
import { Piscina } from 'piscina';
import { PROCESS_SETTINGS } from '../config/declaration';
import { settingFromEnv } from '../config/environment';
import { codecs, fillsArrayBuffer, type CodecTask, type PoolThreadData } from './pool-thread';

/**
 * The module a thread loads, beside this one: compiled JavaScript in lib/, or the TypeScript sources
 * (tests, tsx), which a thread loads through tsx's require hook. Not through its module hooks (`--import
 * tsx`): a thread with those spent 654 ms collecting garbage in a compaction of 8 inputs of 40 MB, where
 * one without them spent 62 to 121 ms.
 */
const THREAD_MODULE = join(__dirname, `pool-thread${extname(__filename)}`);

let pool: Piscina | undefined;

/** Modules the pool's threads load as they start, beside their own: see {@link loadOnPoolThreads}. */
const preloads = new Set<string>();

/**
 * Has every thread of the pool load `module` (a path, as a task's `filename` names it) as it starts, so a task of that
 * module waits for no load, nor pays one inside a job: for a pool started after this call.
 */
export function loadOnPoolThreads(module: string): void {
  preloads.add(module);
}

/**
 * Threads of the pool: `COMPACTION_COMPACTOR_THREADS`, default one less than the available parallelism (the jobs'
 * own thread has the other core), at least 1. Off the main thread (a pool thread, or the simulator, where the pool's
 * tasks run in place), one: the thread itself.
 */
export const compactorThreads = (): number =>
  isMainThread ? (settingFromEnv(PROCESS_SETTINGS, 'compactorThreads') ?? Math.max(1, availableParallelism() - 1)) : 1;

/**
 * Block tasks a thread is given before it finishes one: a reader or writer keeps a block or two in
 * flight per segment, and a thread given one task at a time idles from each result until the job's
 * thread, busy parsing, sends the next (reading 8 inputs of 40 MB on one thread: 690 to 880 ms so,
 * 440 to 530 ms with 64). A range task holds its thread alone: it is abortable.
 */
const TASKS_PER_THREAD = 64;

/**
 * The process's pool, its {@link compactorThreads} threads started on first use: all of them, since the
 * pool gives a block task to the least busy thread it has and starts another only when all are full.
 */
export function compactorPool(): Piscina {
  if (pool !== undefined) return pool;
  // Read once, as the pool starts: not per block task.
  const threads = compactorThreads();
  pool = new Piscina({
    filename: THREAD_MODULE,
    workerData: { preloads: [...preloads] } satisfies PoolThreadData,
    minThreads: threads,
    maxThreads: threads,
    execArgv: extname(THREAD_MODULE) === '.ts' ? ['--require', 'tsx/cjs'] : [],
    concurrentTasksPerWorker: TASKS_PER_THREAD,
    // A thread waits for tasks on its port's events: waking one from Atomics.wait costs the job's thread a futex call
    // per block (0.85 s of it in a profile of reading 8 inputs of 40 MB four times).
    atomics: 'disabled',
    // No run and wait histograms: two clock reads and a record per block task on the job's thread, read by nobody.
    recordTiming: false,
  });
  return pool;
}

type Codec = keyof typeof codecs;

/**
 * Codec `name` of a batch of blocks in one pool task; on a pool thread itself, in place (that thread is already one of
 * the cores the pool spreads work over). The task gets bytes of its own, transferred: blocks handed over whole move as
 * they are; the others are copied into one buffer for the batch, since a caller's buffer may be a view of a larger one
 * it goes on using. Node's unpooled Buffer memory, not a zero-filled ArrayBuffer: it costs a tenth as much to fill and
 * to transfer (bench in docs/performance.md).
 */
async function codeBatch<N extends Codec>(
  name: N,
  tasks: readonly CodecTask<N>[],
  handOver = false,
): Promise<Buffer[]> {
  if (!isMainThread) return tasks.map((task) => codecs[name](task as never));
  const copied = tasks.filter(({ bytes }) => !(handOver && fillsArrayBuffer(bytes)));
  const shared = Buffer.allocUnsafeSlow(copied.reduce((sum, { bytes }) => sum + bytes.byteLength, 0));
  const transferList: ArrayBuffer[] = copied.length > 0 ? [shared.buffer] : [];
  let at = 0;
  const own = tasks.map((task) => {
    if (handOver && fillsArrayBuffer(task.bytes)) {
      transferList.push(task.bytes.buffer);
      return task;
    }
    const bytes = shared.subarray(at, at + task.bytes.byteLength);
    bytes.set(task.bytes);
    at += bytes.byteLength;
    return { ...task, bytes };
  });
  const out: Uint8Array[] = await compactorPool().run(own, { name, transferList });
  return out.map((bytes) => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));
}

/**
 * Each of `raws` compressed with zstd at `level`, in one pool task; `handOver`: the caller gives `raws` up (each moved
 * to the thread, not copied, when it fills an ArrayBuffer of its own).
 */
export const zstdCompressOnPool = (
  raws: readonly Uint8Array[],
  level: number,
  options: { handOver?: boolean } = {},
): Promise<Buffer[]> =>
  codeBatch(
    'zstd',
    raws.map((bytes) => ({ bytes, level })),
    options.handOver,
  );

/**
 * Each zstd frame of `frames` decompressed, in one pool task; fails when one is not zstd or would exceed its
 * `maxOutputLength`.
 */
export const zstdDecompressOnPool = (
  frames: readonly { compressed: Uint8Array; maxOutputLength: number }[],
): Promise<Buffer[]> =>
  codeBatch(
    'unzstd',
    frames.map(({ compressed, maxOutputLength }) => ({ bytes: compressed, maxOutputLength })),
  );

/** `raw` as one gzip member at `level`, on a pool thread. */
export const gzipOnPool = async (raw: Uint8Array, level: number): Promise<Buffer> =>
  (await codeBatch('gzip', [{ bytes: raw, level }]))[0]!;
