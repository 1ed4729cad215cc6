/** The k-way merge of sorted segments: one record per key, the highest `seq` winning. */
import { isTombstone, type MergeRecord } from './blocks';

/** A source's current batch and position in it. */
interface Head<R extends MergeRecord> {
  batch: readonly R[];
  at: number;
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
 * The sources' current keys play a tournament ({@link LoserTree}): moving the winner on costs one
 * key comparison per level, log2(k) in all. When one source wins twice in a row, its records below
 * every other source's key are unique to it and are taken as a run, one comparison each. The only
 * awaits are for a source's next batch and for the consumer of each output batch.
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
  const heads: Head<R>[] = await Promise.all(
    sources.map(async (batches) => ({ batch: (await nextBatch(batches)) ?? [], at: 0, batches })),
  );
  const tree = new LoserTree(heads.map((head) => head.batch[0]?.key));
  /** Moves `head` (of `source`), its batch done, to its next batch, or out of the tournament at its source's end. */
  const refill = async (head: Head<R>, source: number) => {
    const batch = await nextBatch(head.batches);
    head.batch = batch ?? [];
    head.at = 0;
    tree.replay(source, batch === undefined ? undefined : batch[0]!.key);
  };
  /**
   * Moves the winner, `head` of `source`, past its current record. A promise only when a source's next
   * batch must be awaited: within a batch nothing is awaited, so a record costs no microtask.
   */
  const advance = (head: Head<R>, source: number): Promise<void> | undefined => {
    if (++head.at < head.batch.length) {
      tree.replay(source, head.batch[head.at]!.key);
      return undefined;
    }
    return refill(head, source);
  };
  let previous = -1;
  for (;;) {
    const source = tree.winner;
    const key = tree.winningKey;
    if (key === undefined) break;
    const top = heads[source]!;
    if (source === previous) {
      const bound = tree.runnerUpKey();
      if (bound === undefined || key < bound) {
        // A run: the winner's records below `bound` are in no other source (all others are at `bound` or past it).
        const batch = top.batch;
        let at = top.at;
        for (; at < batch.length && (bound === undefined || batch[at]!.key < bound); at++) emit(batch[at]!);
        top.at = at - 1;
        if (out.length >= OUT_BATCH || at === batch.length) {
          if (out.length > 0) yield out;
          out = [];
        }
        await advance(top, source);
        continue;
      }
    }
    previous = source;
    // Every source at this key (the winner first) is taken and advanced before the next key is looked at.
    let record = top.batch[top.at]!;
    let from = source;
    for (let head = top, at = source; ;) {
      const candidate = head.batch[head.at]!;
      if (candidate.seq > record.seq || (candidate.seq === record.seq && at > from)) {
        record = candidate;
        from = at;
      }
      const refilled = advance(head, at);
      if (refilled !== undefined) await refilled;
      if (tree.winningKey !== key) break;
      at = tree.winner;
      head = heads[at]!;
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

/**
 * A tournament of k sources by their current key (undefined once a source is done, after every
 * key). Leaf i is node k + i of a binary tree in an array, node n's parent is n >> 1; each inner
 * node keeps the loser of the match played there and node 0 the overall winner. A new key of the
 * winner is played against the losers on its leaf's path only: log2(k) comparisons, where a binary
 * heap takes up to two per level. Equal keys win in any order (the merge takes them all).
 */
class LoserTree {
  private readonly keys: (string | undefined)[];
  private readonly nodes: Int32Array;

  constructor(keys: readonly (string | undefined)[]) {
    this.keys = [...keys];
    this.nodes = new Int32Array(Math.max(keys.length, 1));
    this.nodes[0] = keys.length > 0 ? this.play(1) : 0;
  }

  /** The winning source: the one with the smallest key. */
  get winner(): number {
    return this.nodes[0]!;
  }

  /** The smallest key of all sources, or undefined when every source is done. */
  get winningKey(): string | undefined {
    return this.keys[this.nodes[0]!];
  }

  /** Sets the key of the winning source `source` (it must be the winner) and plays it up to the root. */
  replay(source: number, key: string | undefined): void {
    const { keys, nodes } = this;
    keys[source] = key;
    let winner = source;
    for (let n = (source + keys.length) >> 1; n > 0; n >>= 1) {
      const loser = nodes[n]!;
      if (this.before(loser, winner)) {
        nodes[n] = winner;
        winner = loser;
      }
    }
    nodes[0] = winner;
  }

  /**
   * The smallest key of the sources other than the winner, or undefined when they are all done: the smallest loser on
   * the winner's path.
   */
  runnerUpKey(): string | undefined {
    const { keys, nodes } = this;
    let best: string | undefined;
    for (let n = (nodes[0]! + keys.length) >> 1; n > 0; n >>= 1) {
      const key = keys[nodes[n]!];
      if (key !== undefined && (best === undefined || key < best)) best = key;
    }
    return best;
  }

  /** Plays the subtree of node `n` from scratch; returns its winner. */
  private play(n: number): number {
    const k = this.keys.length;
    if (n >= k) return n - k;
    const left = this.play(2 * n);
    const right = this.play(2 * n + 1);
    const [winner, loser] = this.before(right, left) ? [right, left] : [left, right];
    this.nodes[n] = loser;
    return winner;
  }

  /** Whether source `a`'s key comes before source `b`'s; a done source comes after every other. */
  private before(a: number, b: number): boolean {
    const ka = this.keys[a];
    if (ka === undefined) return false;
    const kb = this.keys[b];
    return kb === undefined || ka < kb;
  }
}
