/** Whether the collector can trust a namespace's root, and what it says when it cannot. */
import { type NamespaceId, rootKey } from '../keys';
import {
  MAX_COLLECTED_ROOT_BYTES,
  MAX_ROOT_BYTES,
  RootCorruptError,
  RootTooLargeError,
  type RootCodec,
  type RootState,
} from '../root';
import { ObjectTooLargeError, StoreError, type ObjectStore } from '../store';
import { RootLostError, RootMissingError, type ReadRoot } from '../protocol/root-io';
import { judgeRoot, RootWentBackError } from './judged-root';

/** Why a namespace's root cannot be trusted; the namespace's pass then claims and deletes nothing. */
export interface RootProblem {
  readonly key: string;
  /**
   * `oversize`: readable to the collector only, past what readers accept; only its retired segments
   * are reclaimed, to shrink it. `went_back`: older than a root a pass already judged (spec 6c.5); a
   * root missing where one was judged is `missing`, its reason naming the restore.
   */
  readonly problem: 'missing' | 'corrupt' | 'unreadable' | 'oversize' | 'went_back';
  readonly reason: string;
}

/**
 * Reads the root once and says what is wrong with it, if anything, or the generation the pass judges
 * the namespace by (recorded first: {@link judgeRoot}). Retention wins: without a root to read there
 * is no telling referenced segments from unreferenced ones, so a namespace whose root is missing,
 * corrupt, unreadable (after the store's own retries) or older than one a pass judged is skipped for the pass. A root
 * over the readers' limit (up to {@link MAX_COLLECTED_ROOT_BYTES}) is `oversize`: its job prefixes
 * wait, and its retired segments are reclaimed, which is what shrinks it.
 */
export async function findRootProblem(
  store: ObjectStore,
  ns: NamespaceId,
  codec: RootCodec,
): Promise<{ readonly problem: RootProblem } | { readonly generation: number }> {
  try {
    const judged = await judgeRoot(store, ns, codec, MAX_COLLECTED_ROOT_BYTES);
    const oversize = oversizeProblem(ns, judged.bytes);
    return oversize ? { problem: oversize } : { generation: judged.root.generation };
  } catch (err) {
    const problem = rootProblemOf(err, ns);
    if (problem) return { problem };
    throw err;
  }
}

/** The problem of a root of `bytes` that the collector read, if it is past what readers accept. */
export const oversizeProblem = (ns: NamespaceId, bytes: number): RootProblem | undefined =>
  bytes > MAX_ROOT_BYTES
    ? { key: rootKey(ns), problem: 'oversize', reason: new RootTooLargeError(ns, bytes, false).message }
    : undefined;

/** What a failed read of the root says about it; undefined for a failure that is not about the root (a bug). */
export function rootProblemOf(err: unknown, ns: NamespaceId): RootProblem | undefined {
  const key = rootKey(ns);
  if (err instanceof RootMissingError || err instanceof RootLostError)
    return { key, problem: 'missing', reason: err.message };
  if (err instanceof RootWentBackError) return { key, problem: 'went_back', reason: err.message };
  if (err instanceof RootCorruptError || err instanceof ObjectTooLargeError)
    return { key, problem: 'corrupt', reason: err.message };
  if (err instanceof StoreError) return { key, problem: 'unreadable', reason: err.message };
  return undefined;
}

/**
 * `read`'s root, unless it is older than `minGeneration` (the root the pass judged): then it went back, and nothing is
 * decided by it.
 */
export function atLeast(read: ReadRoot, minGeneration: number | undefined): RootState {
  if (minGeneration !== undefined && read.root.generation < minGeneration)
    throw new RootWentBackError(read.root.namespace_id, read.root.generation, minGeneration);
  return read.root;
}
