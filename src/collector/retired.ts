/**
 * Retired segments (spec 6a), decided: pure functions of a root, a key's `LastModified` and the
 * pass's rules, with no I/O and no clock of their own. Each key is judged against the root's index
 * (`rootIndex`, built once per root read), so a page costs the same however large the root is. The collector applies
 * them to the root it
 * read at the start and again to the root it re-reads before every delete batch.
 */
import { isInputSegmentKeyOf } from '../keys';
import { rootIndex, type RetiredSegment, type RootState } from '../root';
import type { RetiredRules } from './rules';

/** What becomes of one segment key in this pass. */
export type SegmentFate =
  /** Named by a group of the root: never deleted. */
  | 'referenced'
  /** Retired, and its reader grace is over: deleted, then dropped from the retired list. */
  | 'retired_due'
  /** Retired, and readers of an older root may still read it (not yet stamped visible, or a future stamp, included). */
  | 'retired_in_grace'
  /**
   * Neither named nor retired, and older than the lost-write grace: its writer never registered it, and no longer may.
   */
  | 'lost_write'
  /**
   * Neither named nor retired, and younger than the lost-write grace (or with no trustworthy timestamp): its writer may
   * still register it.
   */
  | 'young'
  /**
   * A staged output neither named nor retired: the job-prefix reclaim's, under its lease rules (spec 6), never this
   * one's.
   */
  | 'job_prefix';

/**
 * A retirement is due once the reader grace has passed since it was visible (spec 6c.2): since the
 * stamp a pass wrote, never since the writer's clock, which a late write leaves in the past.
 * Unstamped, it is not due.
 */
const isDue = (
  { visible_at_ms: visible }: RetiredSegment,
  rules: Pick<RetiredRules, 'nowMs' | 'readerGraceMs'>,
): boolean => visible !== undefined && visible <= rules.nowMs && rules.nowMs - visible >= rules.readerGraceMs;

/**
 * Judges one segment key of the root's namespace. A key both named and retired (referenced again
 * since) is referenced. `lastModified` matters only for an input segment the root does not know:
 * a missing or future timestamp means young.
 */
export function decideSegment(
  root: RootState,
  key: string,
  lastModified: Date | undefined,
  rules: RetiredRules,
): SegmentFate {
  const { referenced, retired } = rootIndex(root);
  if (referenced.has(key)) return 'referenced';
  const entry = retired.get(key);
  if (entry !== undefined) return isDue(entry, rules) ? 'retired_due' : 'retired_in_grace';
  if (!isInputSegmentKeyOf(root.namespace_id, key)) return 'job_prefix';
  const at = lastModified?.getTime();
  return at !== undefined && at <= rules.nowMs && rules.nowMs - at >= rules.lostWriteGraceMs ? 'lost_write' : 'young';
}

/**
 * Whether the root condemns a lost write of `lastModified` (spec 6c.1): at or before its lost-write
 * cutoff, so no root writer names it again and it may be deleted. A missing timestamp is never condemned.
 */
export const isCondemned = (root: RootState, lastModified: Date | undefined): boolean =>
  lastModified !== undefined &&
  root.lost_write_cutoff_ms !== undefined &&
  lastModified.getTime() <= root.lost_write_cutoff_ms;

/** The retired keys whose grace is over and that no group names again: the ones the pass deletes. */
export function dueRetiredKeys(root: RootState, rules: RetiredRules): string[] {
  const { referenced } = rootIndex(root);
  return (root.retired ?? []).filter((r) => !referenced.has(r.key) && isDue(r, rules)).map((r) => r.key);
}

/**
 * Whether the root still protects a key from the job-prefix reclaim: named by a group, or retired
 * and within its reader grace (spec 6a.6). A published output a later compaction retired ages
 * from its retirement, not from when it was written.
 */
export function isRetainedByRoot(
  root: RootState,
  key: string,
  rules: Pick<RetiredRules, 'nowMs' | 'readerGraceMs'>,
): boolean {
  const { referenced, retired } = rootIndex(root);
  if (referenced.has(key)) return true;
  const entry = retired.get(key);
  return entry !== undefined && !isDue(entry, rules);
}

/**
 * The records of `reclaimed` segments (deleted, or found gone) that `root` may drop: only entries
 * still due. One retired again since (unstamped again) or referenced again stays, so a
 * record goes only for data already gone.
 */
export const droppableRecords = (root: RootState, reclaimed: ReadonlySet<string>, rules: RetiredRules): string[] =>
  dueRetiredKeys(root, rules).filter((k) => reclaimed.has(k));

/**
 * The root after its droppable records of `reclaimed` segments are dropped, or undefined when it has none: the retired
 * list shrinks as segments go.
 */
export function withoutReclaimed(
  root: RootState,
  reclaimed: ReadonlySet<string>,
  rules: RetiredRules,
): RootState | undefined {
  const dropped = new Set(droppableRecords(root, reclaimed, rules));
  if (dropped.size === 0) return undefined;
  return Object.freeze({
    ...root,
    generation: root.generation + 1,
    retired: (root.retired ?? []).filter((r) => !dropped.has(r.key)),
  });
}
