/**
 * What a thread of the compactor's pool (pool.ts) runs: each exported function is one kind of task,
 * its argument structured-cloned, its bytes moved (transferred) both ways, never copied.
 */
import { createRequire } from 'node:module';
import { workerData } from 'node:worker_threads';
import { constants, gzipSync, zstdCompressSync, zstdDecompressSync } from 'node:zlib';
import { move, transferableSymbol, valueSymbol } from 'piscina';

/** What a pool thread is started with. */
export interface PoolThreadData {
  /** Modules of other tasks, loaded as the thread starts (pool.ts, `loadOnPoolThreads`). */
  readonly preloads: readonly string[];
}

/** The block codecs, by task name: what a pool thread runs, and what runs in place on a pool thread itself. */
export const codecs = {
  zstd: ({ bytes, level }: { bytes: Uint8Array; level: number }): Buffer =>
    zstdCompressSync(bytes, { params: { [constants.ZSTD_c_compressionLevel]: level } }),
  /**
   * One output chunk of the most a block may hold (its raw length): no 16 KiB chunks to concatenate,
   * and a whole buffer to transfer; a third less of this thread's time per 128 KiB block.
   */
  unzstd: ({ bytes, maxOutputLength }: { bytes: Uint8Array; maxOutputLength: number }): Buffer =>
    zstdDecompressSync(bytes, { maxOutputLength, chunkSize: Math.max(maxOutputLength, constants.Z_MIN_CHUNK) }),
  gzip: ({ bytes, level }: { bytes: Uint8Array; level: number }): Buffer => gzipSync(bytes, { level }),
} as const;

/** One task of codec `N`: its bytes and its parameters. */
export type CodecTask<N extends keyof typeof codecs> = Parameters<(typeof codecs)[N]>[0];

/** Whether `bytes` fill an ArrayBuffer of their own, which may then be transferred whole. */
export const fillsArrayBuffer = (bytes: Uint8Array): bytes is Uint8Array<ArrayBuffer> =>
  bytes.buffer instanceof ArrayBuffer && bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength;

/** `bytes` in an ArrayBuffer of their own, which may be transferred: a view of a shared (pooled) one is copied. */
export const ownedBytes = (bytes: Uint8Array): Uint8Array<ArrayBuffer> =>
  fillsArrayBuffer(bytes) ? bytes : new Uint8Array(bytes);

/** A batch of results the pool transfers, each in an ArrayBuffer of its own. */
function movedAll(results: readonly Buffer[]): ReturnType<typeof move> {
  const own = results.map(ownedBytes);
  return move({ [transferableSymbol]: own.map((bytes) => bytes.buffer), [valueSymbol]: own });
}

/**
 * A pool task runs a batch of one codec's blocks: the job's thread pays the pool's cost per task (its balancer, its
 * messages), not per block.
 */
const batchOf =
  <N extends keyof typeof codecs>(name: N) =>
  (tasks: readonly CodecTask<N>[]): ReturnType<typeof move> =>
    movedAll(tasks.map((task) => codecs[name](task as never)));

export const zstd = batchOf('zstd');
export const unzstd = batchOf('unzstd');
export const gzip = batchOf('gzip');

// Last: a module loaded here imports this one again (through pool.ts), and finds its exports complete.
const load = createRequire(__filename);
for (const module of (workerData as PoolThreadData | null)?.preloads ?? []) load(module);
