/**
 * The S3 fault proxy against real MinIO: requests pass through it unchanged (MinIO accepts their
 * signatures), and each fault it injects reaches our S3 adapter as the typed error the port promises,
 * after the AWS SDK's own retries (3 attempts by default). What each fault did to the stored object is
 * checked on a direct connection to MinIO.
 */
import type { Readable } from 'node:stream';
import { GetObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import {
  AmbiguousError,
  ConflictError,
  createS3ObjectStore,
  NotFoundError,
  PreconditionFailedError,
  StoreUnavailableError,
  type ObjectStore,
} from '../../src/store';
import {
  s3Requests,
  startS3FaultProxy,
  type FaultKind,
  type S3Exchange,
  type S3FaultProxy,
  type S3Request,
} from '../support/s3-fault-proxy';
import { openTestStore, s3ClientConfig, type TestStore } from '../support/stores';

const SDK_ATTEMPTS = 3;
const bytes = (s: string) => new TextEncoder().encode(s);
const text = (b: Uint8Array) => new TextDecoder().decode(b);
let keyCounter = 0;
const freshKey = (name: string) => `namespaces/proxy/${name}-${keyCounter++}`;
const forKey = (key: string) => (r: S3Request) => r.key === key;
const both = (a: (r: S3Request) => boolean, b: (r: S3Request) => boolean) => (r: S3Request) => a(r) && b(r);

describe('S3 fault proxy on MinIO', () => {
  let direct: TestStore;
  let proxy: S3FaultProxy;
  let faulty: ObjectStore;
  const throughProxy = (options: { operationDeadlineMs?: number; maxAttempts?: number } = {}): ObjectStore =>
    createS3ObjectStore({
      bucket: direct.bucket!,
      client: new S3Client({
        ...s3ClientConfig(direct.endpoint!),
        endpoint: proxy.endpoint,
        maxAttempts: options.maxAttempts,
      }),
      operationDeadlineMs: options.operationDeadlineMs ?? 30_000,
    });

  beforeAll(async () => {
    direct = await openTestStore('minio');
    proxy = await startS3FaultProxy(direct.endpoint!.endpoint);
    faulty = throughProxy();
  });
  afterEach(() => {
    proxy.setPlan({});
    proxy.setThrottle({});
  });
  afterAll(async () => {
    await faulty?.close();
    await direct?.store.close();
    await proxy?.stop();
  });

  /** Runs `action` and returns how many requests and faults of `kind` it caused at the proxy. */
  const counted = async <T>(kind: FaultKind, action: () => Promise<T>) => {
    const requests = proxy.requests;
    const faults = proxy.injected[kind];
    const outcome = await action().then(
      (value) => ({ value }),
      (error: unknown) => ({ error }),
    );
    return { ...outcome, requests: proxy.requests - requests, faults: proxy.injected[kind] - faults };
  };

  it('forwards every operation unchanged: MinIO accepts the signatures, and what is written through the proxy reads back directly', async () => {
    const key = freshKey('plain');
    const created = await faulty.putIfAbsent(key, bytes('one'));
    await expect(faulty.putIfAbsent(key, bytes('again'))).rejects.toBeInstanceOf(PreconditionFailedError);
    const swapped = await faulty.putIfMatch(key, bytes('two'), created.etag);
    await expect(faulty.putIfMatch(key, bytes('three'), created.etag)).rejects.toBeInstanceOf(PreconditionFailedError);
    expect(text((await direct.store.get(key)).body)).toBe('two');
    expect((await faulty.get(key)).etag).toBe(swapped.etag);
    expect((await faulty.head(key)).size).toBe(3);
    const page = await faulty.list({ prefix: key });
    expect(page.objects.map((o) => o.key)).toEqual([key]);
    // A body larger than one TCP segment, streamed back.
    const large = bytes('x'.repeat(3 * 1024 * 1024));
    await faulty.put(`${key}.large`, large);
    let streamed = 0;
    for await (const chunk of (await faulty.getStream(`${key}.large`)).body) streamed += chunk.length;
    expect(streamed).toBe(large.length);
    expect((await faulty.deleteMany([key, `${key}.large`])).failed).toEqual([]);
    await expect(direct.store.get(key)).rejects.toBeInstanceOf(NotFoundError);
    expect(Object.values(proxy.injected).every((n) => n === 0)).toBe(true);
  });

  describe.each(['error500', 'error503'] as const)('%s', (fault) => {
    it('once on a compare-and-swap: the SDK retries it and the write lands once', async () => {
      const key = freshKey(fault);
      const { etag } = await direct.store.putIfAbsent(key, bytes('v1'));
      proxy.script(fault, both(s3Requests.compareAndSwap, forKey(key)));
      const run = await counted(fault, () => faulty.putIfMatch(key, bytes('v2'), etag));
      expect(run).toMatchObject({ faults: 1, requests: 2 });
      expect('value' in run && run.value.etag).toBe((await direct.store.get(key)).etag);
      expect(text((await direct.store.get(key)).body)).toBe('v2');
    });

    it('on every attempt: a compare-and-swap is Ambiguous (and did not land), a read is StoreUnavailable', async () => {
      const key = freshKey(fault);
      const { etag } = await direct.store.putIfAbsent(key, bytes('v1'));
      proxy.script(fault, forKey(key), 2 * SDK_ATTEMPTS);
      const write = await counted(fault, () => faulty.putIfMatch(key, bytes('v2'), etag));
      expect(write).toMatchObject({ faults: SDK_ATTEMPTS, requests: SDK_ATTEMPTS });
      expect('error' in write && write.error).toBeInstanceOf(AmbiguousError);
      const read = await counted(fault, () => faulty.get(key));
      expect('error' in read && read.error).toBeInstanceOf(StoreUnavailableError);
      expect(text((await direct.store.get(key)).body)).toBe('v1');
    });
  });

  it('409 ConditionalRequestConflict is not retried by the SDK: a compare-and-swap and a create are Conflict, and neither landed', async () => {
    const key = freshKey('conflict');
    const { etag } = await direct.store.putIfAbsent(key, bytes('v1'));
    proxy.script('conflict409', forKey(key), 2);
    const swap = await counted('conflict409', () => faulty.putIfMatch(key, bytes('v2'), etag));
    expect(swap).toMatchObject({ faults: 1, requests: 1 });
    expect('error' in swap && swap.error).toBeInstanceOf(ConflictError);
    const fresh = freshKey('conflict');
    proxy.script('conflict409', forKey(fresh));
    await expect(faulty.putIfAbsent(fresh, bytes('new'))).rejects.toBeInstanceOf(ConflictError);
    expect(text((await direct.store.get(key)).body)).toBe('v1');
    await expect(direct.store.get(fresh)).rejects.toBeInstanceOf(NotFoundError);
  });

  it('a lost response on a compare-and-swap: the write landed, and the SDK retry of the same CAS meets it as PreconditionFailed', async () => {
    const key = freshKey('lost-cas');
    const { etag } = await direct.store.putIfAbsent(key, bytes('v1'));
    proxy.script('lostResponse', both(s3Requests.compareAndSwap, forKey(key)));
    const run = await counted('lostResponse', () => faulty.putIfMatch(key, bytes('v2'), etag));
    expect(run).toMatchObject({ faults: 1, requests: 2 });
    expect('error' in run && run.error).toBeInstanceOf(PreconditionFailedError);
    expect(text((await direct.store.get(key)).body)).toBe('v2');
  });

  it('a lost response on every attempt of a compare-and-swap is Ambiguous, and the write landed', async () => {
    const key = freshKey('lost-cas-all');
    const { etag } = await direct.store.putIfAbsent(key, bytes('v1'));
    proxy.script('lostResponse', both(s3Requests.compareAndSwap, forKey(key)), SDK_ATTEMPTS);
    const run = await counted('lostResponse', () => faulty.putIfMatch(key, bytes('v2'), etag));
    expect(run).toMatchObject({ faults: SDK_ATTEMPTS, requests: SDK_ATTEMPTS });
    expect('error' in run && run.error).toBeInstanceOf(AmbiguousError);
    expect(text((await direct.store.get(key)).body)).toBe('v2');
  });

  it('a lost response on a create: the object exists, and the retried create reports PreconditionFailed', async () => {
    const key = freshKey('lost-create');
    proxy.script('lostResponse', both(s3Requests.createIfAbsent, forKey(key)));
    await expect(faulty.putIfAbsent(key, bytes('mine'))).rejects.toBeInstanceOf(PreconditionFailedError);
    expect(text((await direct.store.get(key)).body)).toBe('mine');
  });

  it('a lost response on DeleteObjects and on a read: both retried and succeed, deletes being idempotent', async () => {
    const key = freshKey('lost-delete');
    await direct.store.put(key, bytes('doomed'));
    proxy.script('lostResponse', s3Requests.getObject, 1);
    expect(text((await faulty.get(key)).body)).toBe('doomed');
    proxy.script('lostResponse', s3Requests.deleteObjects, 1);
    const run = await counted('lostResponse', () => faulty.deleteMany([key]));
    expect(run).toMatchObject({ faults: 1, requests: 2 });
    expect('value' in run && run.value).toEqual({ deleted: [key], failed: [] });
    await expect(direct.store.get(key)).rejects.toBeInstanceOf(NotFoundError);
  });

  it('a timeout shorter than the operation deadline is retried by the SDK; the held request never reached MinIO', async () => {
    const key = freshKey('timeout-short');
    const { etag } = await direct.store.putIfAbsent(key, bytes('v1'));
    proxy.setPlan({ timeoutMs: 300 });
    proxy.script('timeout', both(s3Requests.compareAndSwap, forKey(key)));
    const started = Date.now();
    const run = await counted('timeout', () => faulty.putIfMatch(key, bytes('v2'), etag));
    expect(Date.now() - started).toBeGreaterThanOrEqual(300);
    // The first attempt was never forwarded, so the retry's If-Match still matches.
    expect(run).toMatchObject({ faults: 1, requests: 2 });
    expect('value' in run).toBe(true);
    expect(text((await direct.store.get(key)).body)).toBe('v2');
  });

  it('a timeout past the operation deadline is Ambiguous for a write and StoreUnavailable for a read', async () => {
    const key = freshKey('timeout-long');
    const { etag } = await direct.store.putIfAbsent(key, bytes('v1'));
    const hasty = throughProxy({ operationDeadlineMs: 500 });
    proxy.setPlan({ timeoutMs: 10_000 });
    proxy.script('timeout', forKey(key), 2);
    const started = Date.now();
    await expect(hasty.putIfMatch(key, bytes('v2'), etag)).rejects.toBeInstanceOf(AmbiguousError);
    await expect(hasty.get(key)).rejects.toBeInstanceOf(StoreUnavailableError);
    expect(Date.now() - started).toBeLessThan(9_000);
    expect(text((await direct.store.get(key)).body)).toBe('v1');
    await hasty.close();
  });

  it('observers see every forwarded request with the body sent and the full answer, also an answer the client never got', async () => {
    const key = freshKey('observed');
    const seen: S3Exchange[] = [];
    const unsubscribe = proxy.observe((e) => seen.push(e));
    const { etag } = await faulty.putIfAbsent(key, bytes('v1'));
    proxy.script('lostResponse', both(s3Requests.compareAndSwap, forKey(key)));
    proxy.script('error500', s3Requests.deleteObjects);
    await expect(faulty.putIfMatch(key, bytes('v2'), etag)).rejects.toBeInstanceOf(PreconditionFailedError);
    const landed = await direct.store.get(key);
    await faulty.deleteMany([key]);
    unsubscribe();
    const summary = seen.map((e) => ({
      method: e.request.method,
      status: e.status,
      lost: e.lost,
      body: e.requestBody?.toString(),
    }));
    expect(summary.slice(0, 3)).toEqual([
      { method: 'PUT', status: 200, lost: false, body: 'v1' },
      { method: 'PUT', status: 200, lost: true, body: 'v2' },
      { method: 'PUT', status: 412, lost: false, body: 'v2' },
    ]);
    expect(seen[1]!.responseHeaders.etag).toBe(landed.etag);
    // The injected 500 was never forwarded: only the retried DeleteObjects reached MinIO, and its request names the
    // key.
    expect(seen.slice(3).map((e) => [e.request.method, e.status])).toEqual([['POST', 200]]);
    expect(seen[3]!.requestBody?.toString()).toContain(`<Key>${key}</Key>`);
    expect(seen[3]!.responseBody?.toString()).toContain('DeleteResult');
  });

  it('a delay holds the request and then forwards it', async () => {
    const key = freshKey('delay');
    proxy.setPlan({ delayMs: 400 });
    proxy.script('delay', forKey(key));
    const started = Date.now();
    await faulty.put(key, bytes('late'));
    expect(Date.now() - started).toBeGreaterThanOrEqual(400);
    expect(text((await direct.store.get(key)).body)).toBe('late');
  });

  it('a plan injects faults only into matching requests, at its probabilities, and the same seed chooses the same faults', async () => {
    const key = freshKey('plan');
    await direct.store.put(key, bytes('read me'));
    const plan = {
      seed: 42,
      probabilities: { error500: 0.2, conflict409: 0.2, lostResponse: 0.2 },
      matches: s3Requests.getObject,
    };
    const sequence = async (): Promise<string[]> => {
      proxy.setPlan(plan);
      const outcomes: string[] = [];
      // Sequential reads through a client that does not retry, so each read is one request and one draw.
      const once = throughProxy({ maxAttempts: 1 });
      for (let i = 0; i < 60; i++)
        outcomes.push(
          await once.get(key).then(
            () => 'ok',
            (e: Error) => e.name,
          ),
        );
      await once.list({ prefix: key });
      await once.close();
      return outcomes;
    };
    const before = proxy.injected;
    const first = await sequence();
    const second = await sequence();
    expect(second).toEqual(first);
    const counts = (name: string) => first.filter((o) => o === name).length;
    expect(counts('ok')).toBeGreaterThan(10);
    expect(counts('StoreUnavailableError')).toBeGreaterThan(10);
    // A read answered 409 has no retry meaning for a GET: the adapter reports it as Conflict all the same.
    expect(counts('ConflictError')).toBeGreaterThan(3);
    const injected = proxy.injected;
    expect(injected.timeout - before.timeout).toBe(0);
    expect(injected.delay - before.delay).toBe(0);
    expect(
      injected.error500 +
        injected.conflict409 +
        injected.lostResponse -
        before.error500 -
        before.conflict409 -
        before.lostResponse,
    ).toBe(2 * (60 - counts('ok')));
  });

  describe('throttle', () => {
    const readAll = async (store: ObjectStore, key: string) => {
      const chunks: Uint8Array[] = [];
      for await (const chunk of (await store.getStream(key)).body) chunks.push(chunk);
      return Buffer.concat(chunks);
    };
    const timed = async <T>(action: () => Promise<T>) => {
      const started = performance.now();
      const value = await action();
      return { value, ms: performance.now() - started };
    };
    const pattern = (size: number) => Uint8Array.from({ length: size }, (_, i) => i % 251);

    it('limits matching response bodies to their rate, and the bytes arrive intact', async () => {
      const key = freshKey('slow-read');
      const body = pattern(200_000);
      await direct.store.put(key, body);
      proxy.setThrottle({ responseBytesPerSecond: 400_000, matches: both(s3Requests.getObject, forKey(key)) });
      const read = await timed(() => readAll(faulty, key));
      expect(read.ms).toBeGreaterThanOrEqual(400);
      expect(read.value.equals(body)).toBe(true);
      // Other requests are not throttled.
      expect((await timed(() => faulty.head(key))).ms).toBeLessThan(400);
    });

    it('limits request bodies to their rate, and the write lands intact', async () => {
      const key = freshKey('slow-write');
      const body = pattern(100_000);
      proxy.setThrottle({ requestBytesPerSecond: 200_000, matches: s3Requests.put });
      expect((await timed(() => faulty.put(key, body))).ms).toBeGreaterThanOrEqual(400);
      expect(Buffer.from((await direct.store.get(key)).body).equals(body)).toBe(true);
    });

    it('a shared rate is for all matching bodies together', async () => {
      const keys = [freshKey('shared'), freshKey('shared')];
      for (const key of keys) await direct.store.put(key, pattern(100_000));
      proxy.setThrottle({ responseBytesPerSecond: 400_000, shared: true, matches: s3Requests.getObject });
      const both = await timed(() => Promise.all(keys.map((key) => readAll(faulty, key))));
      expect(both.ms).toBeGreaterThanOrEqual(400);
    });

    it('a stalled response sends its first bytes and then nothing, until the client gives up', async () => {
      const key = freshKey('stall');
      await direct.store.put(key, pattern(50_000));
      proxy.setThrottle({ stallResponseAfterBytes: 1000, matches: forKey(key) });
      const client = new S3Client({ ...s3ClientConfig(direct.endpoint!), endpoint: proxy.endpoint });
      const out = await client.send(new GetObjectCommand({ Bucket: direct.bucket!, Key: key }));
      const body = out.Body as Readable;
      let received = 0;
      body.on('data', (chunk: Buffer) => (received += chunk.length));
      const ended = new Promise((resolve) => body.on('close', resolve).on('error', resolve));
      await vi.waitFor(() => expect(received).toBe(1000));
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(received).toBe(1000);
      body.destroy();
      await ended;
      client.destroy();
    });
  });
});
