/**
 * Fault injection for tests: a store decorator that can delay or fail chosen calls, and an S3 client middleware that
 * loses responses.
 */
import type { S3Client } from '@aws-sdk/client-s3';
import type { ObjectStore } from '../../src/store';

export type StoreOperation = Exclude<keyof ObjectStore, 'description'>;

/** Runs every store call through `around`, which decides when (and whether) `call` runs and sees it settle. */
export function wrapStore(
  store: ObjectStore,
  around: (operation: StoreOperation, args: readonly unknown[], call: () => Promise<unknown>) => Promise<unknown>,
): ObjectStore {
  return new Proxy(store, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver);
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) =>
        around(property as StoreOperation, args, async () =>
          (value as (...a: unknown[]) => unknown).apply(target, args),
        );
    },
  });
}

/** Runs `before(operation, firstArgument)` ahead of every store call; it may wait (a gate) or throw (a fault). */
export const interceptStore = (
  store: ObjectStore,
  before: (operation: StoreOperation, subject: unknown) => Promise<void> | void,
): ObjectStore =>
  wrapStore(store, async (operation, args, call) => {
    await before(operation, args[0]);
    return call();
  });

/** A promise to hold calls at, opened once by the test. */
export function gate(): { wait: Promise<void>; open: () => void; readonly opened: boolean } {
  let release!: () => void;
  let opened = false;
  const wait = new Promise<void>((resolve) => (release = resolve));
  return {
    wait,
    open: () => {
      opened = true;
      release();
    },
    get opened() {
      return opened;
    },
  };
}

/**
 * Lets matching requests reach the server and then throws as if the connection dropped before the
 * response arrived: the write landed, the caller cannot know. Added outside the SDK's retries, so
 * the caller sees the failure itself. Returns a counter of dropped responses.
 */
export function loseResponses(
  client: S3Client,
  matches: (command: string, input: Record<string, unknown>) => boolean,
): { dropped: number } {
  const counter = { dropped: 0 };
  client.middlewareStack.add(
    (next, context) => async (args) => {
      const result = await next(args);
      if (matches(context.commandName ?? '', args.input as Record<string, unknown>)) {
        counter.dropped++;
        throw Object.assign(new Error('socket hang up after the request was sent'), {
          name: 'TimeoutError',
          code: 'ECONNRESET',
        });
      }
      return result;
    },
    { step: 'initialize', name: 'loseResponses' },
  );
  return counter;
}
