/**
 * Reads on real MinIO through the fault proxy: the operation deadline bounds a request until its
 * response, a body is bounded by progress (the idle timeout), and a stream is a sequence of ranged
 * GETs, so any number of open streams use a bounded number of sockets.
 */
import { PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  createS3ObjectStore,
  ObjectChangedError,
  StoreUnavailableError,
  type ObjectStore,
  type S3StoreOptions,
} from '../../src/store';
import { s3Requests, startS3FaultProxy, type S3FaultProxy, type S3Request } from '../support/s3-fault-proxy';
import { openTestStore, s3ClientConfig, type TestStore } from '../support/stores';

const pattern = (size: number, salt = 0) => Uint8Array.from({ length: size }, (_, i) => (i * 7 + salt) % 251);
const forKey = (key: string) => (r: S3Request) => r.key === key && s3Requests.getObject(r);
let keyCounter = 0;
const freshKey = (name: string) => `namespaces/streams/${name}-${keyCounter++}`;

async function readAll(chunks: AsyncIterable<Uint8Array>): Promise<Buffer> {
  const parts: Uint8Array[] = [];
  for await (const chunk of chunks) parts.push(chunk);
  return Buffer.concat(parts);
}

describe('S3 reads: deadlines bound requests, progress bounds bodies', () => {
  let direct: TestStore;
  let proxy: S3FaultProxy;
  const opened: ObjectStore[] = [];
  /** A store whose client the adapter builds (so `maxSockets` applies), pointed at the proxy. */
  const throughProxy = (options: Omit<S3StoreOptions, 'bucket'>): ObjectStore => {
    const store = createS3ObjectStore({
      bucket: direct.bucket!,
      clientConfig: { ...s3ClientConfig(direct.endpoint!), endpoint: proxy.endpoint },
      ...options,
    });
    opened.push(store);
    return store;
  };

  beforeAll(async () => {
    direct = await openTestStore('minio');
    proxy = await startS3FaultProxy(direct.endpoint!.endpoint);
  });
  afterEach(() => proxy.setThrottle({}));
  afterAll(async () => {
    await Promise.all(opened.map((s) => s.close()));
    await direct?.store.close();
    await proxy?.stop();
  });

  it('a stream read for longer than the operation deadline completes: each window has its own deadline', async () => {
    const key = freshKey('slow-stream');
    const body = pattern(150_000);
    await direct.store.put(key, body);
    const store = throughProxy({ operationDeadlineMs: 1000, readWindowBytes: 64 * 1024 });
    proxy.setThrottle({ responseBytesPerSecond: 60_000, matches: forKey(key) });
    const started = performance.now();
    const read = await readAll((await store.getStream(key)).body);
    expect(performance.now() - started).toBeGreaterThan(2000);
    expect(read.equals(body)).toBe(true);
  });

  it('a single body read for longer than the operation deadline completes: the deadline ends with the response', async () => {
    const key = freshKey('slow-window');
    const body = pattern(120_000);
    await direct.store.put(key, body);
    // One window holds the whole object, and `get` reads it in one request.
    const store = throughProxy({ operationDeadlineMs: 1000, readWindowBytes: 1024 * 1024 });
    proxy.setThrottle({ responseBytesPerSecond: 60_000, matches: forKey(key) });
    const started = performance.now();
    expect((await readAll((await store.getStream(key)).body)).equals(body)).toBe(true);
    expect(Buffer.from((await store.get(key)).body).equals(body)).toBe(true);
    expect(performance.now() - started).toBeGreaterThan(3000);
  });

  it('a segment write uploading for longer than the operation deadline lands: its deadline grows with its size at the minimum upload rate', async () => {
    const key = freshKey('slow-upload');
    const body = pattern(1_500_000);
    const store = throughProxy({ operationDeadlineMs: 1000, minUploadBytesPerSecond: 300_000 });
    proxy.setThrottle({ requestBytesPerSecond: 500_000, matches: (r) => r.key === key });
    const started = performance.now();
    await store.put(key, body);
    expect(performance.now() - started).toBeGreaterThan(2000);
    expect(Buffer.from((await direct.store.get(key)).body).equals(Buffer.from(body))).toBe(true);
  });

  it('a body that stalls fails after the idle timeout as StoreUnavailable (retryable) naming the key', async () => {
    const key = freshKey('stalled');
    await direct.store.put(key, pattern(50_000));
    const store = throughProxy({ operationDeadlineMs: 10_000, idleTimeoutMs: 500 });
    proxy.setThrottle({ stallResponseAfterBytes: 1000, matches: forKey(key) });
    const started = performance.now();
    const error = await store.getStream(key).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(error).toBeInstanceOf(StoreUnavailableError);
    expect((error as StoreUnavailableError).key).toBe(key);
    expect((error as Error).message).toMatch(/idle timeout/);
    expect(performance.now() - started).toBeLessThan(5000);
    await expect(store.get(key)).rejects.toBeInstanceOf(StoreUnavailableError);
  });

  it('an object rewritten between two windows of a stream is ObjectChanged naming the key, and no byte of the new version is read', async () => {
    const key = freshKey('rewritten');
    await direct.store.put(key, pattern(3000));
    const store = throughProxy({ readWindowBytes: 1000 });
    const stream = await store.getStream(key);
    const chunks = stream.body[Symbol.asyncIterator]();
    const read: Uint8Array[] = [(await chunks.next()).value as Uint8Array];
    expect(read[0]).toHaveLength(1000);
    await direct.store.put(key, pattern(3000, 1));
    // The window read ahead before the rewrite may still come; the first one read after it fails.
    let error: unknown;
    try {
      for (let step = await chunks.next(); !step.done; step = await chunks.next()) read.push(step.value);
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ObjectChangedError);
    expect((error as ObjectChangedError).key).toBe(key);
    const bytes = Buffer.concat(read);
    expect(bytes.length).toBeLessThan(3000);
    expect(bytes.equals(Buffer.from(pattern(3000)).subarray(0, bytes.length))).toBe(true);
  });

  it('a stream reads its next window while its consumer works through the current one, and no further ahead', async () => {
    const key = freshKey('read-ahead');
    await direct.store.put(key, pattern(3000));
    const store = throughProxy({ readWindowBytes: 1000 });
    const stream = await store.getStream(key);
    const before = proxy.requests;
    const second = proxy.hold(forKey(key));
    const chunks = stream.body[Symbol.asyncIterator]();
    const read = [(await chunks.next()).value as Uint8Array];
    // The consumer holds the first window and asks for nothing more: the second is on its way already.
    await Promise.race([second.arrived, sleep(5000).then(() => expect.fail('the second window was not read ahead'))]);
    await sleep(300);
    expect(proxy.requests - before).toBe(1);
    second.release();
    for (let step = await chunks.next(); !step.done; step = await chunks.next()) read.push(step.value);
    expect(Buffer.concat(read).equals(Buffer.from(pattern(3000)))).toBe(true);
    expect(proxy.requests - before).toBe(2);
  });

  it('a stream asked for a window multiple reads ranged GETs that many times the window, at most 8 MiB unless the window itself is larger, the last ending at the end of the object', async () => {
    const rangesOf = async (options: Omit<S3StoreOptions, 'bucket'>, windowMultiple: number, body: Uint8Array) => {
      const key = freshKey('multiple');
      await direct.store.put(key, body);
      const ranges: string[] = [];
      const stop = proxy.observe(({ request }) => forKey(key)(request) && ranges.push(String(request.headers.range)));
      try {
        expect(
          (await readAll((await throughProxy(options).getStream(key, { windowMultiple })).body)).equals(
            Buffer.from(body),
          ),
        ).toBe(true);
      } finally {
        stop();
      }
      return ranges;
    };
    expect(await rangesOf({ readWindowBytes: 1000 }, 3, pattern(7000))).toEqual([
      'bytes=0-2999',
      'bytes=3000-5999',
      'bytes=6000-6999',
    ]);
    expect(await rangesOf({ readWindowBytes: 1000 }, 0.5, pattern(1500))).toEqual(['bytes=0-999', 'bytes=1000-1499']);
    expect(await rangesOf({ readWindowBytes: 3 * 2 ** 20 }, 4, pattern(100))).toEqual([`bytes=0-${8 * 2 ** 20 - 1}`]);
    expect(await rangesOf({ readWindowBytes: 16 * 2 ** 20 }, 2, pattern(100))).toEqual([`bytes=0-${16 * 2 ** 20 - 1}`]);
  });

  it('a stream of a byte range reads those bytes only, in ranged GETs that end at its end', async () => {
    const key = freshKey('range');
    const body = pattern(10_000);
    await direct.store.put(key, body);
    const ranges: string[] = [];
    const stop = proxy.observe(({ request }) => forKey(key)(request) && ranges.push(String(request.headers.range)));
    try {
      const store = throughProxy({ readWindowBytes: 1000 });
      const read = async (start: number, end: number) =>
        readAll((await store.getStream(key, { range: { start, end }, windowMultiple: 2 })).body);
      expect((await read(1500, 5600)).equals(Buffer.from(body.subarray(1500, 5600)))).toBe(true);
      expect((await read(9990, 20_000)).equals(Buffer.from(body.subarray(9990)))).toBe(true);
    } finally {
      stop();
    }
    expect(ranges).toEqual(['bytes=1500-3499', 'bytes=3500-5499', 'bytes=5500-5599', 'bytes=9990-11989']);
    const embedded = await openTestStore('embedded');
    try {
      const large = pattern(3_000_000, 1);
      await embedded.store.put(key, large);
      const chunks = await readAll(
        (await embedded.store.getStream(key, { range: { start: 1_234_567, end: 2_500_001 } })).body,
      );
      expect(chunks.equals(Buffer.from(large.subarray(1_234_567, 2_500_001)))).toBe(true);
    } finally {
      await embedded.store.close();
    }
  });

  it('an empty object streams as no bytes', async () => {
    const key = freshKey('empty');
    await direct.store.put(key, new Uint8Array());
    const stream = await throughProxy({}).getStream(key);
    expect(await readAll(stream.body)).toHaveLength(0);
    expect(stream.etag).toBe((await direct.store.head(key)).etag);
  });

  it('1,000 streams open at once and read in turns use no more sockets than the window requests allowed', async () => {
    const count = 1000;
    const prefix = freshKey('wide');
    const raw = new S3Client(s3ClientConfig(direct.endpoint!));
    const keys = Array.from({ length: count }, (_, i) => `${prefix}/${String(i).padStart(4, '0')}`);
    for (let i = 0; i < count; i += 50) {
      await Promise.all(
        keys
          .slice(i, i + 50)
          .map((Key, j) => raw.send(new PutObjectCommand({ Bucket: direct.bucket!, Key, Body: pattern(300, i + j) }))),
      );
    }
    raw.destroy();
    const store = throughProxy({ readWindowBytes: 128, maxConcurrentReads: 8, maxSockets: 16 });
    const peakBefore = proxy.connections.open;
    const streams = await Promise.all(keys.map((key) => store.getStream(key)));
    const iterators = streams.map((s) => s.body[Symbol.asyncIterator]());
    const received = keys.map(() => [] as Uint8Array[]);
    // Round-robin, one window at a time: every stream stays open until all are read.
    for (let live = iterators.map((_, i) => i); live.length > 0;) {
      const next: number[] = [];
      for (const i of live) {
        const step = await iterators[i]!.next();
        if (step.done) continue;
        received[i]!.push(step.value);
        next.push(i);
      }
      live = next;
    }
    received.forEach((parts, i) => expect(Buffer.concat(parts).equals(Buffer.from(pattern(300, i)))).toBe(true));
    expect(proxy.connections.peak - peakBefore).toBeLessThanOrEqual(8);
  });

  it('a client the store builds keeps at most maxSockets connections, however many requests wait', async () => {
    const own = await startS3FaultProxy(direct.endpoint!.endpoint, { probabilities: { delay: 1 }, delayMs: 100 });
    const key = freshKey('pool');
    await direct.store.put(key, pattern(10));
    const store = createS3ObjectStore({
      bucket: direct.bucket!,
      clientConfig: { ...s3ClientConfig(direct.endpoint!), endpoint: own.endpoint },
      maxSockets: 4,
    });
    await Promise.all(Array.from({ length: 40 }, () => store.head(key)));
    expect(own.connections.peak).toBe(4);
    await store.close();
    await own.stop();
  });
});
