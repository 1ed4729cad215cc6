/** The embedded store keeps large objects in chunks and streams them one chunk at a time. */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { afterEach, describe, expect, it } from 'vitest';
import { createEmbeddedObjectStore, ObjectChangedError, type ObjectStore } from '../../src/store';
import { CHUNK_BYTES } from '../../src/store/embedded';

function pattern(size: number, salt = 0): Uint8Array {
  const bytes = new Uint8Array(size);
  for (let i = 0; i < size; i++) bytes[i] = (i * 7 + salt) % 251;
  return bytes;
}

describe('embedded store streams', () => {
  let store: ObjectStore;
  const open = () => {
    const path = join(mkdtempSync(join(tmpdir(), 'embedded-streams-')), 'store.sqlite');
    store = createEmbeddedObjectStore({ path });
    return path;
  };
  afterEach(() => store?.close());

  it('a large object streams in pieces no larger than a chunk, reads back whole, and is stored in chunks', async () => {
    const path = open();
    const body = pattern(5 * CHUNK_BYTES + 123);
    await store.put('big', body);
    const pieces: Uint8Array[] = [];
    for await (const piece of (await store.getStream('big')).body) pieces.push(piece);
    expect(Math.max(...pieces.map((p) => p.length))).toBeLessThanOrEqual(CHUNK_BYTES);
    expect(Buffer.concat(pieces).equals(Buffer.from(body))).toBe(true);
    expect(Buffer.from((await store.get('big')).body).equals(Buffer.from(body))).toBe(true);
    expect((await store.head('big')).size).toBe(body.length);
    const db = new DatabaseSync(path, { readOnly: true });
    const stored = db
      .prepare(
        'SELECT length(body) AS first, (SELECT count(*) FROM object_chunks WHERE key = ?) AS rest FROM objects WHERE key = ?',
      )
      .get('big', 'big');
    db.close();
    expect(stored).toEqual({ first: CHUNK_BYTES, rest: 5 });
  });

  it('a stream reads later chunks only when wanted: an overwrite meanwhile is ObjectChanged naming the key', async () => {
    open();
    await store.put('big', pattern(3 * CHUNK_BYTES));
    const pieces = (await store.getStream('big')).body[Symbol.asyncIterator]();
    await pieces.next();
    await store.put('big', pattern(3 * CHUNK_BYTES, 1));
    let error: unknown;
    try {
      for (let step = await pieces.next(); !step.done; step = await pieces.next());
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ObjectChangedError);
    expect((error as ObjectChangedError).key).toBe('big');
  });

  it('an overwrite with a smaller object leaves no chunk behind, and a delete removes them all', async () => {
    const path = open();
    await store.put('big', pattern(3 * CHUNK_BYTES));
    await store.put('big', pattern(10));
    expect((await store.get('big')).body).toEqual(pattern(10));
    await store.put('other', pattern(2 * CHUNK_BYTES));
    await store.deleteMany(['other']);
    const db = new DatabaseSync(path, { readOnly: true });
    expect(db.prepare('SELECT count(*) AS n FROM object_chunks').get()).toEqual({ n: 0 });
    db.close();
  });
});
