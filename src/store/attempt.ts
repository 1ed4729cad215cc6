/**
 * The store as one compaction attempt sees it: every body it opened and did not finish is closed
 * when the attempt ends. A merge that stops early (bad input, cancellation) leaves the other inputs'
 * bodies unread, and an unread S3 body fails later, at its request's deadline, with nobody listening:
 * an uncaught exception that would take down the worker and every lease keeper on it. A body read to
 * its end (or closed by its reader) is forgotten at once: it holds its first read window, and an
 * attempt that kept every one would grow with the group's width, not with the merge's fan-in.
 */
import type { ObjectStore, StreamedObject, StreamOptions } from './port';

export function attemptStore(store: ObjectStore): { store: ObjectStore; closeBodies: () => Promise<void> } {
  const open = new Set<Promise<StreamedObject>>();
  const getStream = (key: string, options?: StreamOptions): Promise<StreamedObject> => {
    const opening = store.getStream(key, options);
    open.add(opening);
    const forget = () => open.delete(opening);
    return opening.then(
      (object) => ({ ...object, body: untilDone(object.body, forget) }),
      (err: unknown) => {
        forget();
        throw err;
      },
    );
  };
  return {
    store: new Proxy(store, {
      get: (target, property) => {
        if (property === 'getStream') return getStream;
        const value: unknown = Reflect.get(target, property);
        return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
      },
    }),
    // Opens still under way when the attempt failed are waited for, so their bodies are closed too.
    // A stream is destroyed: returning a fresh iterator of a stream never read would not touch it.
    closeBodies: async () => {
      for (const object of await Promise.allSettled([...open])) {
        if (object.status !== 'fulfilled') continue;
        const body = object.value.body as AsyncIterable<Uint8Array> & { destroy?: () => void };
        if (body.destroy) body.destroy();
        else await body[Symbol.asyncIterator]().return?.();
      }
    },
  };
}

/**
 * `body`, calling `done` once it has ended, failed or been closed by its reader (`yield*` passes a return on to
 * `body`).
 */
async function* untilDone(body: AsyncIterable<Uint8Array>, done: () => void): AsyncGenerator<Uint8Array> {
  try {
    yield* body;
  } finally {
    done();
  }
}
