/**
 * One key range of a merge, run on a thread of the compactor's pool (segments/pool.ts): it reads its
 * blocks of every source through the job's thread (which holds the store), merges them and cuts
 * segments exactly as the job's own merge cuts them, compressing here, and sends each finished cut
 * back to be stored in key order. The job's thread answers over `port` (range-merge.ts).
 */
import type { MessagePort } from 'node:worker_threads';
import {
  isTombstone,
  mergeSegments,
  newSegmentWriter,
  ownedBytes,
  readBlockSpan,
  SegmentCorruptError,
  spanBytes,
  type BlockSpan,
  type MergeRecord,
  type SegmentFormatVersion,
  type SegmentWriter,
} from '../segments';

/** What one range merge is given. */
export interface RangeTask {
  readonly port: MessagePort;
  /** Per merge source, its spans of blocks that may hold keys of the range, in key order. */
  readonly sources: readonly (readonly BlockSpan[])[];
  /** The range's keys: from `lo` (none: from the first) to before `hi` (none: to the last). */
  readonly lo: string | null;
  readonly hi: string | null;
  /**
   * Cuts ending at or before this key were stored by an earlier attempt: they are made again (the
   * cuts after them depend on where they fell) but not sent.
   */
  readonly storedThrough: string | null;
  /** `final`: values to outputs, tombstones to tombstone segments; `run`: every record to an intermediate run. */
  readonly kind: 'final' | 'run';
  readonly format: SegmentFormatVersion;
  readonly targetSegmentBytes: number;
}

/** A finished cut, to be stored in key order: an output and a tombstone segment (a run's part: `live` only). */
export interface RangeCut {
  readonly live?: Uint8Array;
  readonly dead?: Uint8Array;
  readonly liveCount: number;
  readonly liveSize: number;
  readonly deadCount: number;
  /** The highest seq of the cut's tombstones; absent when it holds none. */
  readonly deadMaxSeq?: number;
  readonly lastKey: string;
}

/** Messages from a range to the job's thread. */
export type FromRange =
  | {
      readonly type: 'open';
      readonly stream: number;
      readonly key: string;
      readonly start: number;
      readonly end: number;
    }
  | { readonly type: 'next'; readonly stream: number }
  | { readonly type: 'cut'; readonly cut: RangeCut }
  | { readonly type: 'records'; readonly count: number }
  | { readonly type: 'corrupt'; readonly key: string; readonly reason: string };

/** Messages from the job's thread to a range. */
export type ToRange =
  { readonly type: 'chunk'; readonly stream: number; readonly bytes?: Uint8Array } | { readonly type: 'stored' };

/** Records counted in one message to the job's thread, which tells its hooks every few thousand. */
const RECORDS_PER_MESSAGE = 2048;

/** Merges the task's range and sends its cuts; resolves once the job's thread has taken the last of them. */
export async function mergeRange(task: RangeTask): Promise<void> {
  const link = rangeLink(task.port);
  try {
    const within = keyFilter(task.lo, task.hi);
    const sources = task.sources.map((spans) => readSpans(spans, link, within));
    const cuts = cutter(task, link);
    // Told in messages of a few thousand records: a merge's batches may be a few records each.
    let unreported = 0;
    for await (const batch of mergeSegments(sources, { dropTombstones: false })) {
      for (const record of batch) {
        const cutting = cuts.add(record);
        if (cutting) await cutting;
      }
      unreported += batch.length;
      if (unreported >= RECORDS_PER_MESSAGE) {
        link.post({ type: 'records', count: unreported });
        unreported = 0;
      }
    }
    if (unreported > 0) link.post({ type: 'records', count: unreported });
    await cuts.end();
  } catch (err) {
    // A typed error of the data is rebuilt as itself on the job's thread; a plain one crosses as it is.
    if (err instanceof SegmentCorruptError) link.post({ type: 'corrupt', key: err.key, reason: err.reason });
    throw err;
  } finally {
    task.port.close();
  }
}

/** The range's end of its port: requests, and waits for their answers. */
function rangeLink(port: MessagePort) {
  const chunks = new Map<number, ((bytes: Uint8Array | undefined) => void)[]>();
  const stored: (() => void)[] = [];
  port.on('message', (message: ToRange) => {
    if (message.type === 'stored') stored.shift()!();
    else chunks.get(message.stream)!.shift()!(message.bytes);
  });
  let streams = 0;
  const post = (message: FromRange, transfer: ArrayBuffer[] = []) => port.postMessage(message, transfer);
  return {
    post,
    /** Opens bytes [start, end) of `key` now (the job's thread reads them), to be read a batch of chunks at a time. */
    open(key: string, { start, end }: { start: number; end: number }): AsyncGenerator<Uint8Array> {
      const stream = streams++;
      const waiting: ((bytes: Uint8Array | undefined) => void)[] = [];
      chunks.set(stream, waiting);
      post({ type: 'open', stream, key, start, end });
      const next = () => {
        post({ type: 'next', stream });
        return new Promise<Uint8Array | undefined>((resolve) => waiting.push(resolve));
      };
      return (async function* () {
        // One batch read ahead: the job's thread reads the next while this thread works through this one.
        for (let pending = next(); ;) {
          const bytes = await pending;
          if (bytes === undefined) break;
          pending = next();
          yield bytes;
        }
        chunks.delete(stream);
      })();
    },
    /** Sends a cut (its bytes moved, not copied); resolves when the job's thread has taken it. */
    sendCut(cut: RangeCut): Promise<void> {
      const taken = new Promise<void>((resolve) => stored.push(resolve));
      const [live, dead] = [cut.live && ownedBytes(cut.live), cut.dead && ownedBytes(cut.dead)];
      post(
        { type: 'cut', cut: { ...cut, live, dead } },
        [live, dead].flatMap((b) => (b ? [b.buffer] : [])),
      );
      return taken;
    },
  };
}

type RangeLink = ReturnType<typeof rangeLink>;

/** Keeps the records of a batch within [lo, hi); a batch wholly inside is kept as it is. */
function keyFilter(lo: string | null, hi: string | null) {
  const inside = (key: string) => (lo === null || key >= lo) && (hi === null || key < hi);
  return <R extends MergeRecord>(batch: R[]): R[] =>
    batch.length > 0 && inside(batch[0]!.key) && inside(batch[batch.length - 1]!.key)
      ? batch
      : batch.filter((record) => inside(record.key));
}

/**
 * The records of a source's spans, one after another, within the range. Each span is opened when the
 * one before it starts, so a source of several segments (a run's parts) waits no round trip between them.
 */
async function* readSpans(
  spans: readonly BlockSpan[],
  link: RangeLink,
  within: ReturnType<typeof keyFilter>,
): AsyncGenerator<MergeRecord[]> {
  const open = (span: BlockSpan) => link.open(span.key, spanBytes(span));
  let opened = spans.length > 0 ? open(spans[0]!) : undefined;
  for (const [i, span] of spans.entries()) {
    const current = opened!;
    opened = i + 1 < spans.length ? open(spans[i + 1]!) : undefined;
    for await (const batch of readBlockSpan(span, current)) {
      const kept = within(batch);
      if (kept.length > 0) yield kept;
    }
  }
}

/**
 * Cuts the merged records as the job's own merge does: a final merge's values and tombstones into two
 * segments cut together when either reaches the target size, a run's records into one.
 */
function cutter(task: RangeTask, link: RangeLink) {
  const { kind, format, targetSegmentBytes, storedThrough } = task;
  const writer = (): SegmentWriter => newSegmentWriter(kind === 'run' ? 2 : format, { background: true });
  let [live, dead] = [writer(), writer()];
  let lastKey = '';
  let deadMaxSeq: number | undefined;
  let sent: Promise<void> = Promise.resolve();
  let resumed = storedThrough === null;
  const cut = async () => {
    const done = { live, dead, deadMaxSeq };
    [live, dead, deadMaxSeq] = [writer(), writer(), undefined];
    if (storedThrough !== null && lastKey <= storedThrough) return;
    const finished: RangeCut = {
      ...(done.live.count > 0 && { live: await done.live.finish() }),
      ...(done.dead.count > 0 && { dead: await done.dead.finish() }),
      ...(done.deadMaxSeq !== undefined && { deadMaxSeq: done.deadMaxSeq }),
      liveCount: done.live.count,
      liveSize: done.live.size,
      deadCount: done.dead.count,
      lastKey,
    };
    // At most one cut waits on the job's thread: this one is sent once the one before it is taken.
    await sent;
    sent = link.sendCut(finished);
  };
  return {
    /**
     * Adds `record`; a promise only when it closes a cut (sent once the cut before it is taken): an await per
     * record would cost a promise and a microtask each.
     */
    add(record: MergeRecord): Promise<void> | undefined {
      if (!resumed && record.key > storedThrough!) {
        resumed = true;
        // Under the plan that stored them, the stored cuts end at `storedThrough`, and the cut being made is empty;
        // under another (another target size), what it holds is stored already: the rest is cut afresh from here.
        if (live.count > 0 || dead.count > 0) [live, dead, deadMaxSeq] = [writer(), writer(), undefined];
      }
      if (kind === 'final' && isTombstone(record)) {
        dead.add(record);
        deadMaxSeq = Math.max(record.seq, deadMaxSeq ?? 0);
      } else live.add(record);
      lastKey = record.key;
      return live.size >= targetSegmentBytes || dead.size >= targetSegmentBytes ? cut() : undefined;
    },
    async end(): Promise<void> {
      if (live.count > 0 || dead.count > 0) await cut();
      await sent;
    },
  };
}
