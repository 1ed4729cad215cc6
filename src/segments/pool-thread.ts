/**
 * What a thread of the compactor's pool (pool.ts) runs: each exported function is one kind of task,
 * its argument one structured-cloned object, its bytes moved (transferred) both ways, never copied.
 */
import { createRequire } from 'node:module';
import { workerData } from 'node:worker_threads';
import { constants, gzipSync, zstdCompressSync, zstdDecompressSync } from 'node:zlib';
import { move } from 'piscina';

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

type Moved = ReturnType<typeof move>;

/** A result the pool transfers: a buffer sharing a pooled ArrayBuffer with others is copied into one of its own. */
const moved = (bytes: Buffer): Moved =>
  move(bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength ? bytes : new Uint8Array(bytes));

export const zstd = (task: Parameters<typeof codecs.zstd>[0]): Moved => moved(codecs.zstd(task));
export const unzstd = (task: Parameters<typeof codecs.unzstd>[0]): Moved => moved(codecs.unzstd(task));
export const gzip = (task: Parameters<typeof codecs.gzip>[0]): Moved => moved(codecs.gzip(task));

// Last: a module loaded here imports this one again (through pool.ts), and finds its exports complete.
const load = createRequire(__filename);
for (const module of (workerData as PoolThreadData | null)?.preloads ?? []) load(module);
