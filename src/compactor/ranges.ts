/**
 * How a merge of v2 sources is split into disjoint key ranges, each merged on its own thread. Pure:
 * the split keys depend on the sources' block indexes and the range size only, never on the number
 * of threads, so a merge on one thread or on many, and a resumed one, writes the same segments. (A
 * merge through intermediate runs reads other blocks than one of all inputs: it writes the same
 * records, cut at other keys.)
 */
import type { BlockSpan, IndexedBlock } from '../segments';

/** A v2 segment and its block index. */
export interface IndexedSegment {
  readonly key: string;
  readonly blocks: readonly IndexedBlock[];
}

/** One key range of a merge: its keys from `lo` to before `hi` (null: unbounded), and per source the spans to read. */
export interface KeyRange {
  readonly lo: string | null;
  readonly hi: string | null;
  readonly sources: readonly (readonly BlockSpan[])[];
}

/** The most ranges one merge is split into: each is a task on the pool and a message of its spans. */
export const MAX_RANGES = 1024;

/**
 * Splits a merge of `sources` (each its segments in key order, as a run's parts are) into key ranges
 * of about `rangeBytes` compressed bytes of blocks each, at least one: the split keys are first keys
 * of blocks (where the sources' bytes reach each share), so a block lies across at most as many
 * ranges as split keys fall inside it. A range reads, of each segment, the blocks that may hold its keys.
 */
export function planKeyRanges(sources: readonly (readonly IndexedSegment[])[], rangeBytes: number): KeyRange[] {
  const blocks = sources
    .flatMap((segments) => segments.flatMap((segment) => segment.blocks))
    .sort((a, b) => (a.firstKey < b.firstKey ? -1 : a.firstKey > b.firstKey ? 1 : 0));
  const total = blocks.reduce((sum, b) => sum + (b.end - b.offset), 0);
  const count = Math.max(1, Math.min(MAX_RANGES, Math.round(total / rangeBytes)));
  const splits: string[] = [];
  let seen = 0;
  for (const block of blocks) {
    const share = (total * (splits.length + 1)) / count;
    if (splits.length < count - 1 && seen >= share && block.firstKey > (splits.at(-1) ?? blocks[0]!.firstKey))
      splits.push(block.firstKey);
    seen += block.end - block.offset;
  }
  const bounds = [null, ...splits, null];
  return bounds.slice(1).map((hi, i) => {
    const lo = bounds[i] ?? null;
    return { lo, hi, sources: sources.map((segments) => segments.flatMap((segment) => spansOf(segment, lo, hi))) };
  });
}

/** The blocks of `segment` that may hold a key in [lo, hi), as one span, or none. */
function spansOf(segment: IndexedSegment, lo: string | null, hi: string | null): BlockSpan[] {
  const { blocks } = segment;
  let first = 0;
  while (first < blocks.length && lo !== null && blocks[first]!.lastKey < lo) first++;
  let end = first;
  while (end < blocks.length && (hi === null || blocks[end]!.firstKey < hi)) end++;
  if (end === first) return [];
  return [{ key: segment.key, blocks: blocks.slice(first, end), first, after: blocks[first - 1]?.lastKey ?? null }];
}
