/**
 * zstd compression and decompression of v2 blocks, and gzip of whole v1 segments, on a pool of
 * worker threads, so a compaction's JavaScript thread merges while other cores code its bytes. Node's own asynchronous
 * zstd builds a
 * stream and a zstd context on the calling thread for every call (about 100 µs a block, measured in
 * docs/performance.md), more than the work it moves away; a pool thread's synchronous calls build
 * their contexts too, but off the merging thread, which pays one message each way.
 *
 * The threads run a few lines of plain JavaScript (no TypeScript to load in them). They are started
 * on first use, keep the process alive only while they have work, and a thread that dies fails its
 * own requests only; the next request starts a fresh one.
 */
import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';

/** What a pool thread runs: one request in, one reply out, the bytes moved (transferred), never copied. */
const THREAD_SOURCE = `
const { parentPort } = require('node:worker_threads');
const { constants, gzipSync, zstdCompressSync, zstdDecompressSync } = require('node:zlib');
const run = {
  zstd: (bytes, { level }) => zstdCompressSync(bytes, { params: { [constants.ZSTD_c_compressionLevel]: level } }),
  // One output chunk of the most a block may hold (its raw length): no 16 KiB chunks to concatenate,
  // and a whole buffer to transfer; a third less of this thread's time per 128 KiB block.
  unzstd: (bytes, { maxOutputLength }) => zstdDecompressSync(bytes, { maxOutputLength, chunkSize: Math.max(maxOutputLength, constants.Z_MIN_CHUNK) }),
  gzip: (bytes, { level }) => gzipSync(bytes, { level }),
};
parentPort.on('message', ({ id, op, level, maxOutputLength, bytes }) => {
  let out;
  try {
    out = run[op](bytes, { level, maxOutputLength });
  } catch (err) {
    parentPort.postMessage({ id, error: String(err && err.message || err) });
    return;
  }
  // A result may share a pooled ArrayBuffer with other buffers: only a whole one may be transferred.
  const whole = out.byteOffset === 0 && out.byteLength === out.buffer.byteLength ? out : new Uint8Array(out);
  parentPort.postMessage({ id, bytes: whole }, [whole.buffer]);
});
`;

interface Reply {
  readonly id: number;
  readonly bytes?: Uint8Array;
  readonly error?: string;
}

interface PoolThread {
  readonly worker: Worker;
  readonly waiting: Map<number, { resolve: (bytes: Buffer) => void; reject: (err: Error) => void }>;
}

/** Threads beside the calling one: one per other core, at least one. */
const POOL_SIZE = Math.max(1, availableParallelism() - 1);

const threads: PoolThread[] = [];
let nextId = 0;

function startThread(): PoolThread {
  const worker = new Worker(THREAD_SOURCE, { eval: true });
  const thread: PoolThread = { worker, waiting: new Map() };
  const failAll = (err: Error) => {
    threads.splice(threads.indexOf(thread), 1);
    for (const { reject } of thread.waiting.values()) reject(err);
    thread.waiting.clear();
  };
  worker.on('message', ({ id, bytes, error }: Reply) => {
    const request = thread.waiting.get(id)!;
    thread.waiting.delete(id);
    if (thread.waiting.size === 0) worker.unref();
    if (error !== undefined) request.reject(new Error(error));
    else request.resolve(Buffer.from(bytes!.buffer, bytes!.byteOffset, bytes!.byteLength));
  });
  worker.on('error', failAll);
  worker.on('exit', (code) => failAll(new Error(`a block codec thread exited with code ${code}`)));
  worker.unref();
  threads.push(thread);
  return thread;
}

/** The thread with the fewest requests waiting, started when the pool is not full and every thread is busy. */
function leastBusy(): PoolThread {
  let best = threads[0];
  for (const thread of threads) if (thread.waiting.size < best!.waiting.size) best = thread;
  return best === undefined || (best.waiting.size > 0 && threads.length < POOL_SIZE) ? startThread() : best;
}

const fillsArrayBuffer = (bytes: Uint8Array): bytes is Uint8Array<ArrayBuffer> =>
  bytes.buffer instanceof ArrayBuffer && bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength;

/** `handOver`: the caller gives `bytes` up (they are detached here when they fill an ArrayBuffer of their own). */
function request(
  message: { op: 'zstd' | 'unzstd' | 'gzip'; level?: number; maxOutputLength?: number },
  bytes: Uint8Array,
  { handOver = false } = {},
): Promise<Buffer> {
  const thread = leastBusy();
  const id = nextId++;
  // The thread gets its own bytes, transferred: unless handed over whole, a copy, since the caller's
  // buffer may be a view of a larger one it goes on using. Node's unpooled Buffer memory, not a
  // zero-filled ArrayBuffer: it costs a tenth as much to fill and to transfer (bench in docs/performance.md).
  let own: Uint8Array<ArrayBuffer>;
  if (handOver && fillsArrayBuffer(bytes)) {
    own = bytes;
  } else {
    own = Buffer.allocUnsafeSlow(bytes.byteLength);
    own.set(bytes);
  }
  return new Promise((resolve, reject) => {
    thread.waiting.set(id, { resolve, reject });
    thread.worker.ref();
    thread.worker.postMessage({ id, ...message, bytes: own }, [own.buffer]);
  });
}

/**
 * `raw` compressed with zstd at `level`, on a pool thread; `handOver`: the caller gives `raw` up (moved to the thread,
 * not copied, when it fills an ArrayBuffer of its own).
 */
export const zstdCompressOnPool = (
  raw: Uint8Array,
  level: number,
  options: { handOver?: boolean } = {},
): Promise<Buffer> => request({ op: 'zstd', level }, raw, options);

/**
 * The zstd frame `compressed` decompressed on a pool thread; fails when it is not zstd or would exceed
 * `maxOutputLength`.
 */
export const zstdDecompressOnPool = (compressed: Uint8Array, maxOutputLength: number): Promise<Buffer> =>
  request({ op: 'unzstd', maxOutputLength }, compressed);

/** `raw` as one gzip member at `level`, on a pool thread. */
export const gzipOnPool = (raw: Uint8Array, level: number): Promise<Buffer> => request({ op: 'gzip', level }, raw);
