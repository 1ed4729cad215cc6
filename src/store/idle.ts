/**
 * Progress bounds for response bodies: a body is allowed any total time, but never a silence longer than the idle
 * timeout.
 */
import type { Readable } from 'node:stream';

/**
 * Yields `body`'s chunks; when no chunk arrives for `idleMs` while one is awaited, the body is
 * destroyed (freeing its socket) and the iteration throws `onIdle()`. Time the consumer spends
 * between chunks does not count: that is back-pressure, not a silent server.
 */
async function* boundedByProgress(body: Readable, idleMs: number, onIdle: () => Error): AsyncGenerator<Uint8Array> {
  const chunks = body[Symbol.asyncIterator]() as AsyncIterator<Uint8Array>;
  try {
    for (;;) {
      let timer: NodeJS.Timeout | undefined;
      const silence = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(onIdle()), idleMs);
      });
      // Promise.race subscribes to both, so the chunk promise's rejection after a destroy is handled.
      const next = await Promise.race([chunks.next(), silence]).finally(() => clearTimeout(timer));
      if (next.done) return;
      yield next.value;
    }
  } finally {
    body.destroy();
  }
}

/** Reads a whole body under the idle bound. */
export async function readBounded(body: Readable, idleMs: number, onIdle: () => Error): Promise<Uint8Array> {
  const chunks: Uint8Array[] = [];
  for await (const chunk of boundedByProgress(body, idleMs, onIdle)) chunks.push(chunk);
  return Buffer.concat(chunks);
}
