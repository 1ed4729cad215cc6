/** Reading and replacing the namespace root: bytes and ETag from one GET, replaced only by CAS. */
import { TypedError } from '../errors';
import { rootKey, type NamespaceId } from '../keys';
import { decodeRootWith, emptyRoot, encodeRootForWrite, MAX_ROOT_BYTES, type RootCodec, type RootState } from '../root';
import { ConflictError, NotFoundError, PreconditionFailedError, type ObjectStore } from '../store';

/**
 * The namespace has no root: nothing to compact (a compaction of it is invalid input), and nothing
 * to tell referenced segments from unreferenced ones (the collector deletes nothing there).
 */
export class RootMissingError extends TypedError {
  override readonly name = 'RootMissingError';
  readonly failureType = 'RootMissing';
  readonly retryable = false;
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

/**
 * Applies `change` to the current root by CAS, creating the root if absent, retrying lost races.
 * For the metadata service's own writer (stood in for by the demo and tests), not for publication.
 * A root the change makes larger than readers accept is refused (`RootTooLargeError`) and not written.
 */
export async function updateRoot(
  store: ObjectStore,
  ns: NamespaceId,
  change: (root: RootState) => RootState,
  codec: RootCodec,
): Promise<RootState> {
  for (;;) {
    const current = await readRootIfAny(store, ns, codec);
    const next = change(current?.root ?? emptyRoot(ns));
    try {
      const bytes = encodeRootForWrite(codec, next);
      if (current) await store.putIfMatch(rootKey(ns), bytes, current.etag);
      else await store.putIfAbsent(rootKey(ns), bytes);
      return next;
    } catch (err) {
      if (!(err instanceof PreconditionFailedError || err instanceof ConflictError || err instanceof NotFoundError)) throw err;
    }
  }
}
