/**
 * A root does not go back (spec 6c.5). The collector keeps, outside the root, a copy of the
 * highest-generation root a pass judged each namespace by (`judgedRootKey`). A root missing where
 * that copy exists, or of a lower generation, was lost or replaced by an older one (an operator's
 * mistake, a bad restore, a lifecycle rule): judged by it, published outputs and registered segments
 * would look unreferenced. So no pass deletes anything in the namespace until an operator restores
 * the copy (`compaction-lease root restore`), and no writer creates a root there afresh.
 */
import { TypedError } from '../errors';
import { inputSegmentsPrefix, judgedRootKey, rootKey, type NamespaceId } from '../keys';
import { encodeRootForWrite, rootIndex, type RootCodec } from '../root';
import { AmbiguousError, ConflictError, NotFoundError, PreconditionFailedError, type ObjectStore } from '../store';
import { readRootAt, RootLostError, RootMissingError, type ReadRoot } from '../protocol/root-io';

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

/**
 * The judged copy of the namespace's root (the last root a pass judged it by), or undefined when no pass has judged
 * one.
 */
export const readJudgedRoot = (
  store: ObjectStore,
  ns: NamespaceId,
  codec: RootCodec,
  maxBytes: number,
): Promise<(ReadRoot & { readonly body: Uint8Array }) | undefined> =>
  readRootAt(store, judgedRootKey(ns), { ns, codec, maxBytes });

/**
 * The root a pass judges the namespace by (read up to `maxBytes`), after checking it against the
 * judged copy: a missing root throws `RootMissingError`, or {@link RootLostError} where a pass judged
 * one, and an older one {@link RootWentBackError}. A newer one becomes the copy (by CAS, monotone in generation) before
 * anything is decided by it, so a later loss is noticed whatever a pass deletes by it.
 */
export async function judgeRoot(
  store: ObjectStore,
  ns: NamespaceId,
  codec: RootCodec,
  maxBytes: number,
): Promise<ReadRoot> {
  const current = await readRootAt(store, rootKey(ns), { ns, codec, maxBytes });
  if (current === undefined)
    throw (await readJudgedRoot(store, ns, codec, maxBytes))
      ? new RootLostError(ns)
      : new RootMissingError(rootKey(ns));
  for (let round = 0; round < MAX_COPY_ROUNDS; round++) {
    const judged = await readJudgedRoot(store, ns, codec, maxBytes);
    if (judged && current.root.generation < judged.root.generation)
      throw new RootWentBackError(ns, current.root.generation, judged.root.generation);
    if (judged && current.root.generation === judged.root.generation) return current;
    try {
      if (judged) await store.putIfMatch(judgedRootKey(ns), current.body, judged.etag);
      else await store.putIfAbsent(judgedRootKey(ns), current.body);
      return current;
    } catch (err) {
      // Another pass recorded its copy meanwhile: read it again and decide again.
      if (!(
        err instanceof PreconditionFailedError ||
        err instanceof ConflictError ||
        err instanceof AmbiguousError ||
        err instanceof NotFoundError
      ))
        throw err;
    }
  }
  return current;
}

/** What restoring a namespace's root from its judged copy does (or, as a plan, would do). */
export interface RootRestore {
  /** The generation of the judged copy. */
  readonly judgedGeneration: number;
  /** The generation of the root there now; undefined when it is missing. */
  readonly currentGeneration: number | undefined;
  /** The generation the restored root is written at: higher than both, so no later check sees it go back. */
  readonly restoredGeneration: number;
  /**
   * Segments under `metadata/segments/` the copy neither names nor retires (the first few): registered after the copy,
   * or lost writes; register them again within the lost-write grace if they are data.
   */
  readonly unnamedSegments: readonly string[];
  /** How many there are in all. */
  readonly unnamedCount: number;
  /** Whether the root was written (false for a dry run). */
  readonly applied: boolean;
}

/** Nothing to restore: no pass judged a root of the namespace, or its root has not gone back. */
export class NothingToRestoreError extends TypedError {
  readonly failureType = 'InvalidInput';
  constructor(
    readonly namespaceId: NamespaceId,
    reason: string,
  ) {
    super(`nothing to restore in namespace ${namespaceId}: ${reason}`);
  }
}

/** How many unnamed segments a restore names; it counts them all. */
const NAMED_UNNAMED = 20;

/**
 * Restores the namespace's root from the last copy a pass judged it by (spec 6c.5): the copy's
 * groups, retirements and fences at a generation above both it and the root there now, by CAS on
 * the root as it was read (create where it is missing). `apply: false` plans it, writing nothing.
 * Either way it lists the input segments the copy neither names nor retires: written after the copy
 * (their registrations are lost with the root) or lost writes.
 */
export async function restoreJudgedRoot(
  store: ObjectStore,
  ns: NamespaceId,
  codec: RootCodec,
  options: { readonly apply: boolean; readonly maxBytes: number },
): Promise<RootRestore> {
  const judged = await readJudgedRoot(store, ns, codec, options.maxBytes);
  if (!judged)
    throw new NothingToRestoreError(ns, `no collector pass has judged a root of it (${judgedRootKey(ns)} is missing)`);
  const current = await readRootAt(store, rootKey(ns), { ns, codec, maxBytes: options.maxBytes }).catch(
    (err: unknown) => {
      // A root that is there but does not decode is replaced like a missing one: it is read only for its ETag.
      if (err instanceof TypedError && err.failureType === 'RootCorrupt') return undefined;
      throw err;
    },
  );
  // A root at or past the copy has not gone back: restoring would forget what was registered since.
  if (current && current.root.generation >= judged.root.generation) {
    throw new NothingToRestoreError(
      ns,
      `its root is at generation ${current.root.generation}, not behind the judged copy (generation ${judged.root.generation})`,
    );
  }
  const restoredGeneration = Math.max(judged.root.generation, current?.root.generation ?? 0) + 1;
  const { referenced, retired } = rootIndex(judged.root);
  const unnamed: string[] = [];
  let unnamedCount = 0;
  let cursor: string | undefined;
  do {
    const page = await store.list({ prefix: inputSegmentsPrefix(ns), ...(cursor !== undefined && { cursor }) });
    for (const { key } of page.objects) {
      if (referenced.has(key) || retired.has(key)) continue;
      unnamedCount++;
      if (unnamed.length < NAMED_UNNAMED) unnamed.push(key);
    }
    cursor = page.nextCursor;
  } while (cursor !== undefined);
  if (options.apply) {
    const bytes = encodeRootForWrite(codec, { ...judged.root, generation: restoredGeneration });
    const existing = await store.head(rootKey(ns)).then(
      (o) => o.etag,
      (err: unknown) => (err instanceof NotFoundError ? undefined : Promise.reject(err)),
    );
    if (existing === undefined) await store.putIfAbsent(rootKey(ns), bytes);
    else await store.putIfMatch(rootKey(ns), bytes, current?.etag ?? existing);
  }
  return {
    judgedGeneration: judged.root.generation,
    currentGeneration: current?.root.generation,
    restoredGeneration,
    unnamedSegments: unnamed,
    unnamedCount,
    applied: options.apply,
  };
}
