/**
 * The store probe's judgement, on the embedded store (a real store: src/store/embedded.ts). What S3
 * servers do is shown against the servers themselves in test/integration/store-probe.test.ts.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { SettingsError } from '../../src/config';
import { STORE_PROBE_PREFIX } from '../../src/keys';
import {
  createEmbeddedObjectStore,
  requireFitStore,
  StoreConfigError,
  STORE_PROPERTIES,
  StoreUnavailableError,
  StoreUnfitError,
  verifyStore,
  type ObjectStore,
} from '../../src/store';
import { retryInconclusive } from '../../src/store/probe';
import { storeCheckFromEnv } from '../../src/worker';

const margin = { clockSafetyMarginMs: 2000 };
const opened: ObjectStore[] = [];
const embedded = () => {
  const store = createEmbeddedObjectStore({ path: join(mkdtempSync(join(tmpdir(), 'probe-')), 'store.sqlite') });
  opened.push(store);
  return store;
};
afterEach(async () => {
  await Promise.all(opened.splice(0).map((s) => s.close()));
});

/** The embedded store whose clock runs `offsetMs` ahead of this process's. */
const skewed = (store: ObjectStore, offsetMs: number): ObjectStore =>
  Object.assign(Object.create(store) as ObjectStore, {
    get: async (key: string) => {
      const read = await store.get(key);
      return { ...read, lastModified: new Date(read.lastModified!.getTime() + offsetMs) };
    },
  });

describe('verifyStore', () => {
  it('on the embedded store every property holds, in the documented order, and nothing is left under the probe prefix', async () => {
    const store = embedded();
    const check = await verifyStore(store, margin);
    expect(check.properties.map((p) => [p.property, p.outcome])).toEqual(
      Object.keys(STORE_PROPERTIES).map((id) => [id, 'held']),
    );
    expect(check).toMatchObject({ fit: true, versioning: 'unversioned', store: store.description });
    expect((await store.list({ prefix: STORE_PROBE_PREFIX })).objects).toEqual([]);
    expect(() => requireFitStore(check)).not.toThrow();
  });

  it('a store clock ahead by more than half the clock safety margin fails clock-skew, and only that', async () => {
    const check = await verifyStore(skewed(embedded(), 1500), margin);
    expect(check.properties.filter((p) => p.outcome === 'failed').map((p) => p.property)).toEqual(['clock-skew']);
    expect(check.properties.find((p) => p.property === 'clock-skew')?.detail).toMatch(
      /ms ahead of the local clock \(allowed 1000 ms\)$/,
    );
  });

  it('a store clock behind by a second (the resolution of S3 LastModified) still holds within the allowance', async () => {
    const check = await verifyStore(skewed(embedded(), -1000), margin);
    expect(check.fit).toBe(true);
  });

  it('a store that answers one ETag for every write fails new-etag (exit 5 in the CLI), not the probe', async () => {
    // As a proxy that rewrites every ETag to one value would: the store itself still compares its real ones.
    // Before, the refused compare-and-swap escaped the probe (PreconditionFailedError, exit 1).
    const store = embedded();
    const same = '"0000"';
    const oneEtag = Object.assign(Object.create(store) as ObjectStore, {
      putIfAbsent: async (key: string, body: Uint8Array) => ({ ...(await store.putIfAbsent(key, body)), etag: same }),
      putIfMatch: async (key: string, body: Uint8Array, etag: string) => ({
        ...(await store.putIfMatch(key, body, etag)),
        etag: same,
      }),
      put: async (key: string, body: Uint8Array) => ({ ...(await store.put(key, body)), etag: same }),
      get: async (key: string) => ({ ...(await store.get(key)), etag: same }),
      head: async (key: string) => ({ ...(await store.head(key)), etag: same }),
    });
    const check = await verifyStore(oneEtag, margin);
    expect(check.fit).toBe(false);
    expect(check.properties.at(-1)).toMatchObject({
      property: 'new-etag',
      outcome: 'failed',
      detail: expect.stringMatching(/do not name the versions written/),
    });
    expect(() => requireFitStore(check)).toThrow(StoreUnfitError);
    expect((await store.list({ prefix: STORE_PROBE_PREFIX })).objects).toEqual([]);
  });

  it('requireFitStore throws StoreUnfitError naming the failed property and the store, non-retryable', async () => {
    const store = embedded();
    const check = await verifyStore(skewed(store, -60_000), margin);
    const error = (() => {
      try {
        requireFitStore(check);
      } catch (err) {
        return err;
      }
    })();
    expect(error).toBeInstanceOf(StoreUnfitError);
    expect((error as StoreUnfitError).retryable).toBe(false);
    expect((error as StoreUnfitError).message).toMatch(
      new RegExp(`^store ${store.description} failed the store check: clock-skew`),
    );
  });
});

describe('verifyStore on a store that fails a request', () => {
  /** The embedded store whose first `failures` conditional creates fail with `error`. */
  const failingCreates = (store: ObjectStore, failures: number, error: () => Error): ObjectStore => {
    let left = failures;
    return Object.assign(Object.create(store) as ObjectStore, {
      putIfAbsent: async (key: string, body: Uint8Array) => {
        if (left-- > 0) throw error();
        return store.putIfAbsent(key, body);
      },
    });
  };

  it('a timed-out request is no verdict: the probe runs again under fresh keys and reports what it measured', async () => {
    const store = embedded();
    const check = await verifyStore(
      failingCreates(store, 1, () => new StoreUnavailableError('k', 'timeout')),
      margin,
    );
    expect(check.fit).toBe(true);
    expect((await store.list({ prefix: STORE_PROBE_PREFIX })).objects).toEqual([]);
  });

  it('a denied request is thrown at once, and the run deletes what it wrote', async () => {
    const store = embedded();
    const denied = new StoreConfigError('IAM policy', 'access denied');
    await expect(
      verifyStore(
        failingCreates(store, 1, () => denied),
        margin,
      ),
    ).rejects.toBe(denied);
    expect((await store.list({ prefix: STORE_PROBE_PREFIX })).objects).toEqual([]);
  });
});

describe('start-up checks and an inconclusive store', () => {
  it('a check that times out twice and then answers passes; a third timeout is thrown; a denial is thrown at once', async () => {
    const failingTimes = (n: number, error: Error) => {
      let calls = 0;
      return { calls: () => calls, check: async () => (++calls <= n ? Promise.reject(error) : 'answered') };
    };
    const slow = failingTimes(2, new StoreUnavailableError('bucket', 'timeout'));
    await expect(retryInconclusive(slow.check)).resolves.toBe('answered');
    const down = failingTimes(3, new StoreUnavailableError('bucket', 'timeout'));
    await expect(retryInconclusive(down.check)).rejects.toThrow(StoreUnavailableError);
    expect(down.calls()).toBe(3);
    const denied = failingTimes(1, new StoreConfigError('IAM policy', 'access denied'));
    await expect(retryInconclusive(denied.check)).rejects.toThrow(StoreConfigError);
    expect(denied.calls()).toBe(1);
  });
});

describe('COMPACTION_STORE_CHECK', () => {
  it('is run when unset, skip when set so, and anything else is a SettingsError naming it', () => {
    expect(storeCheckFromEnv({})).toBe('run');
    expect(storeCheckFromEnv({ COMPACTION_STORE_CHECK: 'skip' })).toBe('skip');
    expect(() => storeCheckFromEnv({ COMPACTION_STORE_CHECK: 'off' })).toThrow(SettingsError);
    expect(() => storeCheckFromEnv({ COMPACTION_STORE_CHECK: 'off' })).toThrow(
      /COMPACTION_STORE_CHECK must be one of run, skip/,
    );
  });
});
