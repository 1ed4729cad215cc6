/** The k-way merge of sorted segments: one record per key, the highest `seq` winning. */
import type { SegmentRecord } from './format';

/** A source's current record; `source` is its index, which breaks ties of `seq`. */
interface Head {
  record: SegmentRecord;
  readonly source: number;
}

/**
 * Merges sources that are each sorted strictly by key. For equal keys the highest `seq` wins
 * (on a tie, the later source). Tombstones are dropped only when `dropTombstones` is set, which is
 * safe only when the sources are all of the group's segments: otherwise an older value elsewhere
 * would come back to life. The heads wait in a binary heap by key, so a record costs O(log k)
 * comparisons, not a scan of all k heads.
 */
export async function* mergeSegments(
  sources: readonly AsyncIterator<SegmentRecord>[],
  options: { dropTombstones: boolean; after?: string },
): AsyncGenerator<SegmentRecord> {
  const heap = new HeadHeap();
  const firsts = await Promise.all(sources.map((s) => s.next()));
  firsts.forEach((first, source) => {
    if (!first.done) heap.push({ record: first.value, source });
  });
  for (;;) {
    const top = heap.peek();
    if (top === undefined) return;
    const key = top.record.key;
    let record = top.record;
    let from = top.source;
    // Every head of this key (the top first) is taken, and its source advanced, before the next key is looked at.
    for (let head: Head | undefined = top; head?.record.key === key; head = heap.peek()) {
      if (head.record.seq > record.seq || (head.record.seq === record.seq && head.source > from)) {
        record = head.record;
        from = head.source;
      }
      const next = await sources[head.source]!.next();
      if (next.done) {
        heap.pop();
      } else {
        // The head stays on top with its source's next record and sinks to its place: no allocation, one sift per record.
        head.record = next.value;
        heap.sinkTop();
      }
    }
    if (options.after !== undefined && key <= options.after) continue;
    if (options.dropTombstones && 'tombstone' in record) continue;
    yield record;
  }
}

/** A binary min-heap of heads by key; equal keys come out in any order (the merge picks among them). */
class HeadHeap {
  private readonly items: Head[] = [];

  peek(): Head | undefined {
    return this.items[0];
  }

  push(head: Head): void {
    const items = this.items;
    let i = items.length;
    items.push(head);
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!(head.record.key < items[parent]!.record.key)) break;
      items[i] = items[parent]!;
      i = parent;
    }
    items[i] = head;
  }

  /** Removes the head with the smallest key. */
  pop(): void {
    const last = this.items.pop();
    if (last === undefined || this.items.length === 0) return;
    this.items[0] = last;
    this.sinkTop();
  }

  /** Restores the order after the top head's key grew. */
  sinkTop(): void {
    const items = this.items;
    const top = items[0]!;
    let i = 0;
    for (;;) {
      const left = 2 * i + 1;
      if (left >= items.length) break;
      const right = left + 1;
      const child = right < items.length && items[right]!.record.key < items[left]!.record.key ? right : left;
      if (!(items[child]!.record.key < top.record.key)) break;
      items[i] = items[child]!;
      i = child;
    }
    items[i] = top;
  }
}
