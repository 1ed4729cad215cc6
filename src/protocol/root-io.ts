/** Reading and replacing the namespace root: bytes and ETag from one GET, replaced only by CAS. */
import { TypedError } from '../errors';
import { rootKey, type NamespaceId } from '../keys';
import { decodeRootWith, emptyRoot, encodeRootForWrite, MAX_ROOT_BYTES, retireRemoved, type RootCodec, type RootState } from '../root';
import { ConflictError, NotFoundError, PreconditionFailedError, type ObjectStore } from '../store';

/**
 * The namespace has no root: nothing to compact (a compaction of it is invalid input), and nothing
 * to tell referenced segments from unreferenced ones (the collector deletes nothing there).
 */
export class RootMissingError extends TypedError {
  readonly failureType = 'RootMissing';
  constructor(readonly key: string) {
    super(`root ${key} does not exist: the namespace has no metadata to compact, and the collector deletes nothing in it`);
  }
}

export interface ReadRoot {
  readonly root: RootState;
  readonly etag: string;
  /** The size of the bytes read. */
  readonly bytes: number;
}

/**
 * Reads the root with `codec` and checks what it decoded. The codec has no default: a caller that
 * forgot the worker's would read a plug-in's root as `root.json` (pass `jsonRootCodec` for the reference root).
 * `maxBytes`: the readers' limit, unless the collector reads a root past it to shrink it (`MAX_COLLECTED_ROOT_BYTES`).
 */
export async function readRoot(store: ObjectStore, ns: NamespaceId, codec: RootCodec, maxBytes = MAX_ROOT_BYTES): Promise<ReadRoot> {
  const key = rootKey(ns);
  try {
    const object = await store.get(key, { maxBytes });
    return { root: decodeRootWith(codec, object.body, ns, maxBytes), etag: object.etag, bytes: object.body.length };
  } catch (err) {
    throw err instanceof NotFoundError ? new RootMissingError(key) : err;
  }
}

/** The root, or undefined when the namespace has none yet. */
export async function readRootIfAny(store: ObjectStore, ns: NamespaceId, codec: RootCodec): Promise<ReadRoot | undefined> {
  try {
    return await readRoot(store, ns, codec);
  } catch (err) {
    if (err instanceof RootMissingError) return undefined;
    throw err;
  }
}

/** How the package's root writer writes: its clock, and a check before each CAS is sent. */
export interface RootWriteOptions {
  /** The writer's wall clock: every segment the write removes retires at its reading then (spec 6a.1). */
  readonly clockMs?: () => number;
  /** Called right before each CAS is sent; what it throws stops the write with nothing sent (a writer budget spent). */
  readonly beforeWrite?: () => void;
}

/**
 * Replaces the root by CAS with what `next` makes of the current one (undefined: nothing to write),
 * re-reading and retrying on a lost race. An ambiguous answer is thrown: a change that landed may not be one to apply twice.
 */
async function casRoot<R extends RootState | undefined>(
  store: ObjectStore,
  ns: NamespaceId,
  codec: RootCodec,
  next: (current: ReadRoot | undefined) => R,
  beforeWrite: () => void = () => {},
): Promise<R> {
  for (;;) {
    const current = await readRootIfAny(store, ns, codec);
    const root = next(current);
    if (root === undefined) return root;
    const bytes = encodeRootForWrite(codec, root);
    beforeWrite();
    try {
      if (current) await store.putIfMatch(rootKey(ns), bytes, current.etag);
      else await store.putIfAbsent(rootKey(ns), bytes);
      return root;
    } catch (err) {
      if (!(err instanceof PreconditionFailedError || err instanceof ConflictError || err instanceof NotFoundError)) throw err;
    }
  }
}

/**
 * Applies `change` to the current root by CAS, creating the root if absent, retrying lost races.
 * Every segment the change removes from the root is retired at the writer's clock in the same write
 * (spec 6a.1), so readers of the old root get the reader grace. For the metadata service's own
 * writer (stood in for by the demo and tests), not for publication.
 * A root the change makes larger than readers accept is refused (`RootTooLargeError`) and not written.
 */
export async function updateRoot(
  store: ObjectStore,
  ns: NamespaceId,
  change: (root: RootState) => RootState,
  codec: RootCodec,
  options: RootWriteOptions = {},
): Promise<RootState> {
  const clockMs = options.clockMs ?? Date.now;
  const retiring = (current: ReadRoot | undefined): RootState => {
    const before = current?.root ?? emptyRoot(ns);
    return retireRemoved(before, change(before), clockMs());
  };
  return casRoot(store, ns, codec, retiring, options.beforeWrite);
}

/**
 * Fences the namespace's publications in flight (spec 6b): one CAS of the root with the generation
 * + 1 and nothing else changed, so a root CAS sent with an older ETag fails however late it arrives.
 * Undefined when the namespace has no root (no publication can land there either).
 */
export async function fenceRoot(store: ObjectStore, ns: NamespaceId, codec: RootCodec): Promise<RootState | undefined> {
  return casRoot(store, ns, codec, (current) => current && Object.freeze({ ...current.root, generation: current.root.generation + 1 }));
}
