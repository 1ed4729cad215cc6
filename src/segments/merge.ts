/** The k-way merge of sorted segments: one record per key, the highest `seq` winning. */
import { isTombstone, type MergeRecord } from './blocks';

/** A source's current batch and position in it; `source` is its index, which breaks ties of `seq`. */
interface Head<R extends MergeRecord> {
  batch: readonly R[];
  at: number;
  readonly source: number;
  readonly batches: AsyncIterator<readonly R[]>;
}

/** Records gathered before a batch is handed on: large enough that the consumer's await is rare. */
const OUT_BATCH = 4096;

/**
 * Merges sources of record batches, each source sorted strictly by key across its batches, into
 * batches of the merged records. For equal keys the highest `seq` wins (on a tie, the later source).
 * Tombstones are dropped only when `dropTombstones` is set, which is safe only when the sources are
 * all of the group's segments: otherwise an older value elsewhere would come back to life.
 *
 * The heads wait in a binary heap by key. The top head's records below every other head's key are
 * unique to it, so they are taken as a run with no heap work; only a key held by several heads, or
 * the end of a run, costs O(log k) comparisons. The only awaits are for a source's next batch and
 * for the consumer of each output batch.
 */
export async function* mergeSegments<R extends MergeRecord>(
  sources: readonly AsyncIterator<readonly R[]>[],
  options: { dropTombstones: boolean; after?: string },
): AsyncGenerator<R[]> {
  const { dropTombstones, after } = options;
  let out: R[] = [];
  const emit = (record: R) => {
    if (after !== undefined && record.key <= after) return;
    if (dropTombstones && isTombstone(record)) return;
    out.push(record);
  };
  const heap = new HeadHeap<R>();
  const firsts = await Promise.all(sources.map(async (batches, source) => ({ batch: await nextBatch(batches), batches, source })));
  for (const { batch, batches, source } of firsts) if (batch) heap.push({ batch, at: 0, source, batches });
  /** Moves the top head, whose batch is done, to its next batch, or out of the heap when its source is. */
  const refill = async (top: Head<R>) => {
    const batch = await nextBatch(top.batches);
    if (batch === undefined) return heap.pop();
    top.batch = batch;
    top.at = 0;
    heap.sinkTop();
  };
  /**
   * Moves the top head past its current record. A promise only when a source's next batch must be
   * awaited: within a batch nothing is awaited, so a record costs no microtask.
   */
  const advanceTop = (top: Head<R>): Promise<void> | undefined => {
    if (++top.at < top.batch.length) {
      heap.sinkTop();
      return undefined;
    }
    return refill(top);
  };
  for (;;) {
    const top = heap.peek();
    if (top === undefined) break;
    const bound = heap.secondKey();
    let record = top.batch[top.at]!;
    if (bound === undefined || record.key < bound) {
      // A run: the top's records below `bound` are in no other source (every other source is at `bound` or past it).
      const batch = top.batch;
      let at = top.at;
      for (; at < batch.length && (bound === undefined || batch[at]!.key < bound); at++) emit(batch[at]!);
      top.at = at - 1;
      if (out.length >= OUT_BATCH || at === batch.length) {
        if (out.length > 0) yield out;
        out = [];
      }
      await advanceTop(top);
      continue;
    }
    // Every head of this key (the top first) is taken, and its source advanced, before the next key is looked at.
    const key = record.key;
    let from = top.source;
    for (let head: Head<R> | undefined = top; head !== undefined && head.batch[head.at]!.key === key; head = heap.peek()) {
      const candidate = head.batch[head.at]!;
      if (candidate.seq > record.seq || (candidate.seq === record.seq && head.source > from)) {
        record = candidate;
        from = head.source;
      }
      const refilled = advanceTop(head);
      if (refilled !== undefined) await refilled;
    }
    emit(record);
    if (out.length >= OUT_BATCH) {
      yield out;
      out = [];
    }
  }
  if (out.length > 0) yield out;
}

/** The next non-empty batch of a source, or undefined at its end. */
async function nextBatch<R>(batches: AsyncIterator<readonly R[]>): Promise<readonly R[] | undefined> {
  for (;;) {
    const next = await batches.next();
    if (next.done) return undefined;
    if (next.value.length > 0) return next.value;
  }
}

const keyOf = (head: Head<MergeRecord>): string => head.batch[head.at]!.key;

/** A binary min-heap of heads by their current key; equal keys come out in any order (the merge picks among them). */
class HeadHeap<R extends MergeRecord> {
  private readonly items: Head<R>[] = [];

  peek(): Head<R> | undefined {
    return this.items[0];
  }

  /** The smallest key of the heads other than the top (a child of the root), or undefined when the top is alone. */
  secondKey(): string | undefined {
    const left = this.items[1];
    const right = this.items[2];
    if (left === undefined) return undefined;
    const l = keyOf(left);
    if (right === undefined) return l;
    const r = keyOf(right);
    return r < l ? r : l;
  }

  push(head: Head<R>): void {
    const items = this.items;
    const key = keyOf(head);
    let i = items.length;
    items.push(head);
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!(key < keyOf(items[parent]!))) break;
      items[i] = items[parent]!;
      i = parent;
    }
    items[i] = head;
  }

  /** Removes the top head. */
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
    const key = keyOf(top);
    let i = 0;
    for (;;) {
      const left = 2 * i + 1;
      if (left >= items.length) break;
      const right = left + 1;
      const child = right < items.length && keyOf(items[right]!) < keyOf(items[left]!) ? right : left;
      if (!(keyOf(items[child]!) < key)) break;
      items[i] = items[child]!;
      i = child;
    }
    items[i] = top;
  }
}
