/**
 * At most `size` holders at a time, admitted in arrival order. A holder may step out of its lane
 * while it waits on something that needs none (a batch waiting for its manifest part), and is
 * readmitted before anyone new: what was begun finishes first. What the holders out of their lanes
 * hold (their `weight`, say the keys of their batches) stays within `outsideBudget`: a holder whose
 * weight would pass it waits in its lane instead (unless no one is out), so memory stays bounded by
 * the lanes and the budget, not by how many holders are queued.
 */
export class Lanes {
  #free: number;
  #outsideWeight = 0;
  #outside = 0;
  readonly #returning: (() => void)[] = [];
  readonly #arriving: (() => void)[] = [];

  constructor(
    size: number,
    readonly outsideBudget: number = Infinity,
  ) {
    if (!Number.isInteger(size) || size < 1)
      throw new RangeError(`lanes: size must be a whole number ≥ 1, got ${size}`);
    this.#free = size;
  }

  /** Runs `work` in a lane, once one is free. */
  async hold<T>(work: () => Promise<T>): Promise<T> {
    await this.#enter(this.#arriving);
    try {
      return await work();
    } finally {
      this.#leave();
    }
  }

  /**
   * Called by a holder: gives up its lane while `waiting` settles, then takes one back before any
   * newcomer; when its `weight` would pass the budget of those out, it waits in its lane instead.
   */
  async stepOut<T>(waiting: Promise<T>, weight = 1): Promise<T> {
    if (this.#outside > 0 && this.#outsideWeight + weight > this.outsideBudget) return waiting;
    this.#outside++;
    this.#outsideWeight += weight;
    this.#leave();
    try {
      return await waiting;
    } finally {
      this.#outside--;
      this.#outsideWeight -= weight;
      await this.#enter(this.#returning);
    }
  }

  async #enter(queue: (() => void)[]): Promise<void> {
    // A lane is free only when no one waits: #leave hands a lane straight to the next in line.
    if (this.#free > 0) {
      this.#free--;
      return;
    }
    await new Promise<void>((admit) => queue.push(admit));
  }

  #leave(): void {
    const next = this.#returning.shift() ?? this.#arriving.shift();
    if (next) next();
    else this.#free++;
  }
}
