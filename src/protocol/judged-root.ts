/**
 * A root does not go back (spec 6c.5). The collector keeps, outside the root, a copy of the
 * highest-generation root a pass judged each namespace by (`judgedRootKey`). A root missing where
 * that copy exists, or of a lower generation, was lost or replaced by an older one (an operator's
 * mistake, a bad restore, a lifecycle rule): judged by it, published outputs and registered segments
 * would look unreferenced. So no pass deletes anything in the namespace until an operator restores
 * the copy (`compaction-lease root restore`), and no writer creates a root there afresh.
 */
import { TypedError } from '../errors';
import { judgedRootKey, rootKey, type NamespaceId } from '../keys';
import { decodeRootWith, type RootCodec } from '../root';
import { AmbiguousError, ConflictError, NotFoundError, PreconditionFailedError, type ObjectStore } from '../store';
import { RootLostError, RootMissingError, type ReadRoot } from './root-io';

/** The root's generation is lower than one a pass already judged the namespace by: it went back. */
export class RootWentBackError extends TypedError {
  readonly failureType = 'RootWentBack';
  constructor(
    readonly namespaceId: NamespaceId,
    readonly generation: number,
    readonly judgedGeneration: number,
  ) {
    super(
      `root ${rootKey(namespaceId)} is at generation ${generation}, older than generation ${judgedGeneration} a collector pass judged (${judgedRootKey(namespaceId)}): ` +
        `it went back, so nothing is deleted in the namespace; restore the last judged root with \`compaction-lease root restore ${namespaceId}\` (a dry run first)`,
    );
  }
}

/** Rounds of the copy's CAS against other passes recording theirs; past them the copy is left to those passes. */
const MAX_COPY_ROUNDS = 5;

/** The object at `key` read as a root of `ns` with its bytes, or undefined when there is none. */
async function readRootObject(store: ObjectStore, key: string, ns: NamespaceId, codec: RootCodec, maxBytes: number): Promise<(ReadRoot & { readonly body: Uint8Array }) | undefined> {
  try {
    const object = await store.get(key, { maxBytes });
    return { root: decodeRootWith(codec, object.body, ns, maxBytes), etag: object.etag, bytes: object.body.length, lastModified: object.lastModified, body: object.body };
  } catch (err) {
    if (err instanceof NotFoundError) return undefined;
    throw err;
  }
}

/** The judged copy of the namespace's root (the last root a pass judged it by), or undefined when no pass has judged one. */
export const readJudgedRoot = (store: ObjectStore, ns: NamespaceId, codec: RootCodec, maxBytes: number): Promise<(ReadRoot & { readonly body: Uint8Array }) | undefined> =>
  readRootObject(store, judgedRootKey(ns), ns, codec, maxBytes);

/**
 * The root a pass judges the namespace by (read up to `maxBytes`), after checking it against the
 * judged copy: a missing root throws `RootMissingError`, or {@link RootLostError} where a pass judged
 * one, and an older one {@link RootWentBackError}. A newer one becomes the copy (by CAS, monotone in generation) before
 * anything is decided by it, so a later loss is noticed whatever a pass deletes by it.
 */
export async function judgeRoot(store: ObjectStore, ns: NamespaceId, codec: RootCodec, maxBytes: number): Promise<ReadRoot> {
  const current = await readRootObject(store, rootKey(ns), ns, codec, maxBytes);
  if (current === undefined) throw (await readJudgedRoot(store, ns, codec, maxBytes)) ? new RootLostError(ns) : new RootMissingError(rootKey(ns));
  for (let round = 0; round < MAX_COPY_ROUNDS; round++) {
    const judged = await readJudgedRoot(store, ns, codec, maxBytes);
    if (judged && current.root.generation < judged.root.generation) throw new RootWentBackError(ns, current.root.generation, judged.root.generation);
    if (judged && current.root.generation === judged.root.generation) return current;
    try {
      if (judged) await store.putIfMatch(judgedRootKey(ns), current.body, judged.etag);
      else await store.putIfAbsent(judgedRootKey(ns), current.body);
      return current;
    } catch (err) {
      // Another pass recorded its copy meanwhile: read it again and decide again.
      if (!(err instanceof PreconditionFailedError || err instanceof ConflictError || err instanceof AmbiguousError || err instanceof NotFoundError)) throw err;
    }
  }
  return current;
}
