/** The k-way merge of sorted segments: one record per key, the highest `seq` winning. */
import type { SegmentRecord } from './format';

/**
 * Merges sources that are each sorted strictly by key. For equal keys the highest `seq` wins
 * (on a tie, the later source). Tombstones are dropped only when `dropTombstones` is set, which is
 * safe only when the sources are all of the group's segments: otherwise an older value elsewhere
 * would come back to life.
 */
export async function* mergeSegments(
  sources: readonly AsyncIterator<SegmentRecord>[],
  options: { dropTombstones: boolean; after?: string },
): AsyncGenerator<SegmentRecord> {
  const heads = await Promise.all(sources.map((s) => s.next()));
  for (;;) {
    let minKey: string | undefined;
    for (const head of heads) if (!head.done && (minKey === undefined || head.value.key < minKey)) minKey = head.value.key;
    if (minKey === undefined) return;
    let winner: SegmentRecord | undefined;
    for (let i = 0; i < heads.length; i++) {
      const head = heads[i]!;
      if (head.done || head.value.key !== minKey) continue;
      if (winner === undefined || head.value.seq >= winner.seq) winner = head.value;
      heads[i] = await sources[i]!.next();
    }
    if (options.after !== undefined && minKey <= options.after) continue;
    if (options.dropTombstones && 'tombstone' in winner!) continue;
    yield winner!;
  }
}
