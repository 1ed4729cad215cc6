/**
 * The model readers are held to: the writes of the metadata service, each with the `seq` it drew
 * when it began (so an older write can register after a newer one), when it was acknowledged, and
 * when a root first named one of its segments. A reader's view of a group at a root is right when,
 * per key, the record it sees is a record some write wrote, no acknowledged write of a higher `seq`
 * exists (no acknowledged write lost, no deleted key back), and a key it does not see has no
 * acknowledged record above its last tombstone. A write the writer could not settle (an unknown
 * outcome) may or may not appear: it counts as written only from when a root named it.
 */
import type { LiveRecord } from '../../src/reader';
import type { SegmentRecord } from '../../src/segments';

export interface Write {
  readonly id: number;
  readonly writer: string;
  readonly group: string;
  readonly seq: number;
  readonly records: readonly SegmentRecord[];
  /** The segments its attempts PUT. */
  readonly segments: string[];
  /** The event after which the writer was told it succeeded. */
  ackedEvent?: number;
  /** The event at which a root first named one of its segments. */
  landedEvent?: number;
  /** Each of its segments a root named, with the event at which one first did. */
  readonly landings: { readonly segment: string; readonly event: number }[];
}

/** Why a view is wrong, with what a classifier needs to tell one defect from another. */
export interface ViewError {
  readonly message: string;
  readonly key: string;
  /** The acknowledged record the view should have reflected, and its write. */
  readonly expected?: SegmentRecord;
  readonly expectedWrite?: Write;
  /** The record the view showed instead (undefined: none). */
  readonly seen?: SegmentRecord;
  readonly seenWrite?: Write;
}

export class Model {
  private nextSeq = 0;
  readonly writes: Write[] = [];
  private readonly bySeq = new Map<number, Write>();
  private readonly bySegment = new Map<string, Write>();

  /** A write beginning now: it draws the next `seq`, and every record it holds carries it. */
  begin(
    writer: string,
    group: string,
    records: readonly ({ key: string; value: string } | { key: string; tombstone: true })[],
  ): Write {
    const seq = ++this.nextSeq;
    const write: Write = {
      id: this.writes.length,
      writer,
      group,
      seq,
      records: records.map((r) => ({ ...r, seq })),
      segments: [],
      landings: [],
    };
    this.writes.push(write);
    this.bySeq.set(seq, write);
    return write;
  }

  /** The write whose records `key`, a segment its writer PUT, holds. */
  segmentOf(key: string): Write | undefined {
    return this.bySegment.get(key);
  }

  written(write: Write, segment: string): void {
    write.segments.push(segment);
    this.bySegment.set(segment, write);
  }

  /** A root named `segment` at event `event`. */
  named(segment: string, event: number): void {
    const write = this.bySegment.get(segment);
    if (!write || write.landings.some((l) => l.segment === segment)) return;
    write.landings.push({ segment, event });
    write.landedEvent ??= event;
  }

  acknowledged(write: Write, event: number): void {
    write.ackedEvent ??= event;
  }

  writeOf(seq: number): Write | undefined {
    return this.bySeq.get(seq);
  }

  /**
   * Checks `view` (the live records a reader merged from the group's segments, in key order) against
   * the writes of `group` as they stood when the root it read was read (event `rootEvent`).
   */
  checkView(group: string, view: readonly LiveRecord[], rootEvent: number): ViewError | undefined {
    const writes = this.writes.filter((w) => w.group === group);
    const acked = writes.filter((w) => w.ackedEvent !== undefined && w.ackedEvent < rootEvent);
    const possible = writes.filter(
      (w) =>
        (w.ackedEvent !== undefined && w.ackedEvent < rootEvent) ||
        (w.landedEvent !== undefined && w.landedEvent <= rootEvent),
    );
    const newest = (candidates: readonly Write[], key: string): SegmentRecord | undefined => {
      let best: SegmentRecord | undefined;
      for (const w of candidates)
        for (const r of w.records) if (r.key === key && (best === undefined || r.seq > best.seq)) best = r;
      return best;
    };
    const seenByKey = new Map(view.map((r) => [r.key, r]));
    const keys = new Set([...seenByKey.keys(), ...writes.flatMap((w) => w.records.map((r) => r.key))]);
    for (const key of [...keys].sort()) {
      const expected = newest(acked, key);
      const seen = seenByKey.get(key);
      if (seen) {
        const write = this.bySeq.get(seen.seq);
        const record = write?.group === group ? write.records.find((r) => r.key === key) : undefined;
        if (!write || !record || 'tombstone' in record || record.value !== seen.value) {
          return {
            key,
            seen,
            message: `key ${key} reads ${JSON.stringify(seen.value)} at seq ${seen.seq}, which no write of group ${group} wrote`,
          };
        }
        if (!possible.includes(write))
          return {
            key,
            seen,
            seenWrite: write,
            message: `key ${key} reads seq ${seen.seq} of ${write.writer}, a write no root had named when this root was read`,
          };
        if (expected && seen.seq < expected.seq) {
          const what = 'tombstone' in expected ? 'deleted' : `written as ${JSON.stringify(expected.value)}`;
          return {
            key,
            expected,
            expectedWrite: this.bySeq.get(expected.seq),
            seen,
            seenWrite: write,
            message: `key ${key} reads ${JSON.stringify(seen.value)} (seq ${seen.seq}, ${write.writer}) though it was ${what} at seq ${expected.seq} by an acknowledged write`,
          };
        }
      } else if (expected && !('tombstone' in expected)) {
        const deleted = possible.some((w) =>
          w.records.some((r) => r.key === key && 'tombstone' in r && r.seq > expected.seq),
        );
        if (!deleted)
          return {
            key,
            expected,
            expectedWrite: this.bySeq.get(expected.seq),
            message: `key ${key} is missing, though an acknowledged write set it to ${JSON.stringify(expected.value)} at seq ${expected.seq}`,
          };
      }
    }
    return undefined;
  }
}
