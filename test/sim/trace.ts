/**
 * A scenario's trace: each party's steps and each store request with its fault, one line each, in
 * the order they happened. Its hash is what the determinism check compares; its text is what a
 * failure prints. Keys are shortened for reading (the namespace's `metadata/` and ids to 6 hex).
 */
import { createHash, type Hash } from 'node:crypto';

/**
 * `off`: nothing recorded (most scenarios of a batch); `hash`: the digest only (the determinism check); `keep`: the
 * lines too.
 */
export type TraceMode = 'off' | 'hash' | 'keep';

export class Trace {
  private readonly lines: string[] = [];
  private readonly hash: Hash = createHash('sha256');

  constructor(
    private readonly startMs: number,
    private readonly mode: TraceMode,
  ) {}

  /** Whether lines are recorded: callers skip building a line nobody reads. */
  get on(): boolean {
    return this.mode !== 'off';
  }

  add(atMs: number, who: string, text: string): void {
    if (this.mode === 'off') return;
    const line = `${String(atMs - this.startMs).padStart(7)} ${who.padEnd(12)} ${text}`;
    this.hash.update(line).update('\n');
    if (this.mode === 'keep') this.lines.push(line);
  }

  get length(): number {
    return this.lines.length;
  }

  text(): string {
    return this.lines.join('\n');
  }

  digest(): string {
    return this.hash.copy().digest('hex');
  }
}

/** A key as the trace shows it: under the namespace's `metadata/`, ids cut to 6 hex digits. */
export function shortKey(key: string): string {
  return key
    .replace(/^namespaces\/[^/]+\/metadata\//, '')
    .replace(
      /(cmp|seg)_([0-9a-f]{32})/g,
      (_, kind: string, hex: string) => `${kind}_${hex.replace(/^0{26}/, '').slice(0, 6)}`,
    )
    .replace(/part_[0-9a-f]{32}\.[^/]*$/, 'part');
}
