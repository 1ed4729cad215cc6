/**
 * The discrete-event scheduler: one simulated clock, a queue of events ordered by time and then by
 * the order they were scheduled, and a drain after each event that lets every party run until it
 * waits on the simulation again (a store reply or a sleep). Everything a party awaits is resolved
 * by an event, and nothing in the process runs on a real thread or timer (see `determinism.ts`),
 * so one seed gives one run.
 */

export interface SimEvent {
  readonly at: number;
  readonly seq: number;
  readonly run: () => void;
  cancelled: boolean;
}

/** A binary heap of events: the earliest first, ties in the order they were scheduled. */
class EventQueue {
  private readonly heap: SimEvent[] = [];
  get size(): number {
    return this.heap.length;
  }
  private static before(a: SimEvent, b: SimEvent): boolean {
    return a.at < b.at || (a.at === b.at && a.seq < b.seq);
  }
  push(event: SimEvent): void {
    const heap = this.heap;
    heap.push(event);
    for (let i = heap.length - 1; i > 0;) {
      const parent = (i - 1) >> 1;
      if (!EventQueue.before(heap[i]!, heap[parent]!)) break;
      [heap[i], heap[parent]] = [heap[parent]!, heap[i]!];
      i = parent;
    }
  }
  pop(): SimEvent | undefined {
    const heap = this.heap;
    const top = heap[0];
    const last = heap.pop();
    if (top === undefined || last === undefined || heap.length === 0) return top;
    heap[0] = last;
    for (let i = 0; ;) {
      const [l, r] = [2 * i + 1, 2 * i + 2];
      let least = i;
      if (l < heap.length && EventQueue.before(heap[l]!, heap[least]!)) least = l;
      if (r < heap.length && EventQueue.before(heap[r]!, heap[least]!)) least = r;
      if (least === i) break;
      [heap[i], heap[least]] = [heap[least]!, heap[i]!];
      i = least;
    }
    return top;
  }
}

const nextTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** Turns of the event loop a drain waits, at most, for a party still computing between two waits. */
const MAX_DRAIN_TURNS = 64;

export class Scheduler {
  /** The simulated time: the store's clock, and every party's clock before its skew. */
  now: number;
  /** Events run so far. */
  events = 0;
  /** Bumped by everything a party does towards the simulation: a drain ends when a turn moves it no more. */
  activity = 0;
  private readonly queue = new EventQueue();
  private scheduled = 0;

  constructor(startMs: number) {
    this.now = startMs;
  }

  get pending(): number {
    return this.queue.size;
  }

  /**
   * Runs `run` at `at` (now, if `at` is past; times are whole milliseconds, as clocks give): after every event
   * scheduled before it for the same time.
   */
  at(at: number, run: () => void): SimEvent {
    const event: SimEvent = { at: Math.max(Math.ceil(at), this.now), seq: this.scheduled++, run, cancelled: false };
    this.queue.push(event);
    this.activity++;
    return event;
  }

  /** Resolves `ms` from now, or as soon as `stop` aborts. */
  sleep(ms: number, stop?: AbortSignal): Promise<void> {
    if (stop?.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const event = this.at(this.now + Math.max(0, ms), () => {
        stop?.removeEventListener('abort', onAbort);
        resolve();
      });
      const onAbort = () => {
        event.cancelled = true;
        this.activity++;
        resolve();
      };
      stop?.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** Runs the next event and lets the parties it woke run; false when no event is left. */
  async step(): Promise<boolean> {
    for (;;) {
      const event = this.queue.pop();
      if (event === undefined) return false;
      if (event.cancelled) continue;
      this.now = event.at;
      this.events++;
      event.run();
      await this.drain();
      return true;
    }
  }

  /**
   * Lets every party run until it waits on the simulation: turns of the event loop until one turn
   * schedules nothing new. Deterministic whatever it waits for, since nothing else runs meanwhile.
   */
  async drain(): Promise<void> {
    for (let turn = 0; turn < MAX_DRAIN_TURNS; turn++) {
      const before = this.activity;
      await nextTurn();
      if (this.activity === before) return;
    }
  }
}
