/**
 * What the simulator replaces in its process so that a seed decides everything, as madsim
 * intercepts libc's `getrandom` and clocks: the package's code runs unchanged, but no real thread,
 * timer or entropy reaches it.
 *
 * - zlib's thread-pool calls (`gzip`, `gunzip`, `createGunzip`: deletion manifests and reading v1
 *   segments) run synchronously, their callbacks and stream events on `process.nextTick`;
 * - `worker_threads.isMainThread` is false, so the compactor's pool (segments/pool.ts) runs each
 *   task in place, as a pool thread does, and no thread starts;
 * - `crypto.getRandomValues` (segment and manifest-part ids) draws from the scenario's seed;
 * - `Date.now` and `performance.now` still work but are counted: a read during a scenario is a
 *   clock the simulation does not control, reported by the run (every clock is a parameter).
 *
 * Installed once per process (the sim runs in processes of its own, never beside other tests).
 */
import path from 'node:path';
import { syncBuiltinESMExports } from 'node:module';
import { Transform, type TransformCallback } from 'node:stream';
import workerThreads from 'node:worker_threads';
import zlib from 'node:zlib';
import { prng } from './choices';

type Callback = (error: Error | null, result?: Buffer) => void;

/** A zlib convenience function (`gzip(buffer, [options], callback)`) run synchronously, answering on the next tick. */
function onNextTick(sync: (input: zlib.InputType, options?: zlib.ZlibOptions) => Buffer) {
  return (input: zlib.InputType, options: zlib.ZlibOptions | Callback, callback?: Callback): void => {
    const [opts, done] = typeof options === 'function' ? [undefined, options] : [options, callback!];
    let result: Buffer;
    try {
      result = sync(input, opts);
    } catch (err) {
      process.nextTick(done, err as Error);
      return;
    }
    process.nextTick(done, null, result);
  };
}

/** A gunzip stream that inflates what it was given when its input ends: zlib's errors (`Z_…` codes) unchanged. */
function synchronousGunzip(options?: zlib.ZlibOptions): Transform {
  const parts: Buffer[] = [];
  return new Transform({
    transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback) {
      parts.push(chunk);
      done();
    },
    flush(done: TransformCallback) {
      try {
        done(null, zlib.gunzipSync(Buffer.concat(parts), options));
      } catch (err) {
        done(err as Error);
      }
    },
  });
}

export interface ClockReads {
  count: number;
  /** Where the first read came from. */
  first?: string;
}

interface Installed {
  readonly clockReads: ClockReads;
  /** Seeds the entropy the package's ids draw from, for the scenario about to run. */
  seedEntropy(seed: number): void;
}

let installed: Installed | undefined;

export function installDeterminism(): Installed {
  if (installed) return installed;
  const define = (target: object, name: string, value: unknown) =>
    Object.defineProperty(target, name, { value, writable: true, configurable: true, enumerable: true });
  define(zlib, 'gzip', onNextTick(zlib.gzipSync));
  define(zlib, 'gunzip', onNextTick(zlib.gunzipSync));
  define(zlib, 'createGunzip', synchronousGunzip);
  // The compactor's pool runs its tasks in place, as a pool thread does: in this thread, in a deterministic order.
  define(workerThreads, 'isMainThread', false);
  syncBuiltinESMExports();

  let random = prng(0);
  define(globalThis.crypto, 'getRandomValues', <T extends ArrayBufferView | null>(array: T): T => {
    if (array) {
      const bytes = new Uint8Array(array.buffer, array.byteOffset, array.byteLength);
      for (let i = 0; i < bytes.length; i += 4) {
        const word = random();
        for (let j = 0; j < 4 && i + j < bytes.length; j++) bytes[i + j] = (word >>> (8 * j)) & 0xff;
      }
    }
    return array;
  });

  const clockReads: ClockReads = { count: 0 };
  // Only the package's own reads count: the runner's loaders (tsx, vitest) read clocks of their own.
  const packageSource = `${path.resolve(__dirname, '../../src')}${path.sep}`;
  const counted = <F extends (...args: never[]) => number>(read: F): F =>
    ((...args: never[]) => {
      const stack = new Error('clock read').stack ?? '';
      if (stack.includes(packageSource) && clockReads.count++ === 0)
        clockReads.first = stack.split('\n').slice(2, 6).join(' | ');
      return read(...args);
    }) as F;
  const [dateNow, performanceNow] = [Date.now, performance.now.bind(performance)];
  Date.now = counted(dateNow);
  define(performance, 'now', counted(performanceNow));
  installed = {
    clockReads,
    seedEntropy(seed) {
      random = prng(seed ^ 0x5eed5eed);
    },
  };
  return installed;
}
