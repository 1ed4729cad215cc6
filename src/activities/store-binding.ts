/**
 * A run works on one store: the one it was started against (the client's `COMPACTION_S3_BUCKET` and
 * endpoint, or its embedded file), else the store of the worker that ran its first workflow task. Its
 * activities carry that store's identity, and a worker bound to another store (another bucket or
 * file: see {@link sameStore}) refuses them, naming both, instead of reading a root that is not there
 * or collecting the wrong bucket.
 */
import { TypedError } from '../errors';
import { sameStore, storeIdentity, type ObjectStore } from '../store';

/**
 * An activity of a run recorded against one store reached a worker bound to another: workers of one task queue serve
 * one store.
 */
export class StoreMismatchError extends TypedError {
  readonly failureType = 'StoreMismatch';
  constructor(
    /** The store the run records. */
    readonly runStore: string,
    /** The store of the worker that refused it. */
    readonly workerStore: string,
  ) {
    super(
      `the run works on ${runStore}, but this worker is bound to ${workerStore}: every worker polling a task queue must use the store ` +
        'the work is started against; point this worker at that store (COMPACTION_S3_BUCKET and AWS_ENDPOINT_URL_S3, or COMPACTION_EMBEDDED_STORE) ' +
        'or give it a task queue of its own (COMPACTION_TASK_QUEUE)',
    );
  }
}

/**
 * What an activity input carries: the identity of the store its run works on. The workflows always name it; an input
 * without one (an activity called directly, outside a workflow) is not checked.
 */
export interface StoreBound {
  readonly store?: string;
}

/**
 * Wraps every activity of a set, except `unbound` (those that touch no store), so that an input naming
 * another store than `store`'s identity fails with {@link StoreMismatchError} before the activity runs.
 */
export function withStoreBinding<T extends Record<string, (...args: never[]) => Promise<unknown>>>(
  activities: T,
  store: ObjectStore,
  unbound: readonly string[],
): T {
  const wrapped: Record<string, unknown> = {};
  for (const [name, fn] of Object.entries(activities)) {
    wrapped[name] = unbound.includes(name)
      ? fn
      : async (...args: never[]) => {
          const runStore = (args[0] as StoreBound | undefined)?.store;
          if (runStore !== undefined) {
            const workerStore = await storeIdentity(store);
            if (!sameStore(runStore, workerStore)) throw new StoreMismatchError(runStore, workerStore);
          }
          return fn(...args);
        };
  }
  return wrapped as T;
}
