/**
 * The store of one compaction attempt forgets a stream once it is read to its end, so what an
 * attempt holds is bounded by the streams open at once (the merge's fan-in), not by the inputs it
 * has read; a stream it did not finish is still closed when the attempt ends. On the embedded
 * store, whose stream holds its first chunk as the S3 store's holds its first read window.
 */
import { randomBytes } from 'node:crypto';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createEmbeddedObjectStore, type ObjectStore } from '../../src/store';
import { attemptStore } from '../../src/store/attempt';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;
const OBJECT_BYTES = 128 * 1024;
const OBJECTS = 200;

/** Buffers alive after a full collection: Buffer memory lives outside the JS heap. */
const retainedBytes = () => {
  gc();
  gc();
  return process.memoryUsage().arrayBuffers;
};

describe("an attempt's store", () => {
  let store: ObjectStore;
  const keys = Array.from({ length: OBJECTS }, (_, i) => `namespaces/mem/metadata/segments/${i}`);
  beforeEach(async () => {
    store = createEmbeddedObjectStore({ path: ':memory:' });
    for (const key of keys) await store.put(key, randomBytes(OBJECT_BYTES));
  });
  afterEach(() => store.close());

  it(`holds nothing of a stream read to its end: ${OBJECTS} streams of ${OBJECT_BYTES / 1024} KiB read one after another leave under 4 MiB`, async () => {
    const attempt = attemptStore(store);
    const before = retainedBytes();
    for (const key of keys) {
      let read = 0;
      for await (const chunk of (await attempt.store.getStream(key)).body) read += chunk.length;
      expect(read).toBe(OBJECT_BYTES);
    }
    expect(retainedBytes() - before).toBeLessThan(4 * 1024 * 1024);
    await attempt.closeBodies();
  });

  it('closes the streams it did not finish when the attempt ends, read in part or not at all', async () => {
    const attempt = attemptStore(store);
    const partial = (await attempt.store.getStream(keys[0]!)).body[Symbol.asyncIterator]();
    expect((await partial.next()).done).toBe(false);
    const unread = (await attempt.store.getStream(keys[1]!)).body[Symbol.asyncIterator]();
    await attempt.closeBodies();
    expect((await unread.next()).done).toBe(true);
    let rest = 0;
    for (let next = await partial.next(); !next.done; next = await partial.next()) rest += next.value.length;
    expect(rest).toBe(0);
  });
});
