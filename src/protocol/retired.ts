/**
 * Superseded segments (spec 6a), decided: pure functions of a root, a key's `LastModified` and the
 * pass's rules, with no I/O and no clock of their own. Each key is judged against the root's index
 * (`rootIndex`, built once per root read), so a page costs the same however large the root is. The collector applies them to the root it
 * read at the start and again to the root it re-reads before every delete batch.
 */
import { isInputSegmentKeyOf } from '../keys';
import { rootIndex, type RootState } from '../root';
import type { RetiredRules } from './rules';

/** What becomes of one segment key in this pass. */
export type SegmentFate =
  /** Named by a group of the root: never deleted. */
  | 'referenced'
  /** Retired, and its reader grace is over: deleted, then dropped from the retired list. */
  | 'retired_due'
  /** Retired, and readers of an older root may still read it (a future `retired_at_ms` included). */
  | 'retired_in_grace'
  /** Neither named nor retired, and older than the lost-write grace: its writer never registered it, and no longer may. */
  | 'lost_write'
  /** Neither named nor retired, and younger than the lost-write grace (or with no trustworthy timestamp): its writer may still register it. */
  | 'young'
  /** A staged output neither named nor retired: the job-prefix reclaim's, under its lease rules (spec 6), never this one's. */
  | 'job_prefix';

const isDue = (retiredAtMs: number, rules: Pick<RetiredRules, 'nowMs' | 'readerGraceMs'>): boolean => retiredAtMs <= rules.nowMs && rules.nowMs - retiredAtMs >= rules.readerGraceMs;

/**
 * Judges one segment key of the root's namespace. A key both named and retired (referenced again
 * since) is referenced. `lastModified` matters only for an input segment the root does not know:
 * a missing or future timestamp means young.
 */
export function decideSegment(root: RootState, key: string, lastModified: Date | undefined, rules: RetiredRules): SegmentFate {
  const { referenced, retiredAtMs } = rootIndex(root);
  if (referenced.has(key)) return 'referenced';
  const retiredAt = retiredAtMs.get(key);
  if (retiredAt !== undefined) return isDue(retiredAt, rules) ? 'retired_due' : 'retired_in_grace';
  if (!isInputSegmentKeyOf(root.namespace_id, key)) return 'job_prefix';
  const at = lastModified?.getTime();
  return at !== undefined && at <= rules.nowMs && rules.nowMs - at >= rules.lostWriteGraceMs ? 'lost_write' : 'young';
}

/** The retired keys whose grace is over and that no group names again: the ones the pass deletes. */
export function dueRetiredKeys(root: RootState, rules: RetiredRules): string[] {
  const { referenced } = rootIndex(root);
  return (root.retired ?? []).filter((r) => !referenced.has(r.key) && isDue(r.retired_at_ms, rules)).map((r) => r.key);
}

/**
 * Whether the root still protects a key from the job-prefix reclaim: named by a group, or retired
 * and within its reader grace (spec 6a.6). A published output a later compaction superseded ages
 * from its retirement, not from when it was written.
 */
export function isRetainedByRoot(root: RootState, key: string, rules: Pick<RetiredRules, 'nowMs' | 'readerGraceMs'>): boolean {
  const { referenced, retiredAtMs } = rootIndex(root);
  if (referenced.has(key)) return true;
  const retiredAt = retiredAtMs.get(key);
  return retiredAt !== undefined && !isDue(retiredAt, rules);
}

/**
 * The records of `reclaimed` segments (deleted, or found gone) that `root` may drop: only entries
 * still due. One retired again since (a later `retired_at_ms`) or referenced again stays, so a
 * record goes only for data already gone.
 */
export const droppableRecords = (root: RootState, reclaimed: ReadonlySet<string>, rules: RetiredRules): string[] =>
  dueRetiredKeys(root, rules).filter((k) => reclaimed.has(k));

/** The root after its droppable records of `reclaimed` segments are dropped, or undefined when it has none: the retired list shrinks as segments go. */
export function withoutReclaimed(root: RootState, reclaimed: ReadonlySet<string>, rules: RetiredRules): RootState | undefined {
  const dropped = new Set(droppableRecords(root, reclaimed, rules));
  if (dropped.size === 0) return undefined;
  return Object.freeze({ ...root, generation: root.generation + 1, retired: (root.retired ?? []).filter((r) => !dropped.has(r.key)) });
}
