/**
 * One simulated world: the scheduler, the bucket, the parties and the request path between them.
 * Every store request a party sends is an event: it reaches the bucket after its request delay, is
 * applied (or refused), and its answer reaches the party after its reply delay, each leg as its
 * fault says (`faults.ts`). A monitor sees every request the bucket applied and every change it
 * made, and checks the invariants there.
 */
import type { Timing } from '../../src/config';
import { TypedError } from '../../src/errors';
import {
  AmbiguousError,
  ConflictError,
  StoreError,
  StoreUnavailableError,
  type ConditionalDelete,
  type ObjectStore,
} from '../../src/store';
import type { Choices } from './choices';
import {
  decideFault,
  healedFault,
  isWrite,
  partitionedFault,
  type Fault,
  type FaultProfile,
  type StoreOp,
} from './faults';
import { Scheduler, type SimEvent } from './scheduler';
import { PartyStore } from './store';
import { shortKey, Trace, type TraceMode } from './trace';
import { World, type Change } from './world';

export type PartyKind = 'writer' | 'job' | 'collector' | 'reader' | 'service' | 'operator' | 'settler';

/** One process of the simulation: its own clock (the store's plus a skew), its own view of the store. */
export interface Party {
  readonly name: string;
  readonly kind: PartyKind;
  /** Its wall clock minus the store's; within half the clock safety margin either way. */
  readonly skewMs: number;
  readonly store: ObjectStore;
  /** Wall-clock milliseconds: the simulation's time plus the skew. */
  clock(): number;
  /** Monotonic milliseconds (no skew, never jumps). */
  elapsed(): number;
  sleep(ms: number, stop?: AbortSignal): Promise<void>;
  log(text: string): void;
  /** What the party is doing, captured with each request it sends (a write, a reader's promise, a pass's state). */
  context: unknown;
  /** Store times during which the party is cut off from the store (see `partitioned` in `faults.ts`). */
  readonly partitions: readonly Partition[];
}

/**
 * A party cut off from the store for `lastsMs`: from `fromMs`, or, `onRootWrite`, from its first
 * root write at or after `fromMs` (a connection stuck in the middle of a publication or a
 * registration: the moment that matters, which a partition at a random time rarely hits).
 */
export interface Partition {
  readonly fromMs: number;
  readonly lastsMs: number;
  readonly onRootWrite: boolean;
}

export interface StoreRequest {
  readonly id: number;
  readonly party: Party;
  readonly op: StoreOp;
  /** The object's key, a listing's prefix, or the first key of a batched delete. */
  readonly key: string;
  readonly keys?: readonly string[];
  readonly body?: Uint8Array;
  readonly etag?: string;
  readonly issuedAt: number;
  readonly fault: Fault;
  /** The party's context when it sent the request. */
  readonly context: unknown;
}

export type Outcome = { readonly ok: unknown } | { readonly err: Error };

/** Where the invariants and the model watch the world. */
export interface Monitor {
  /** The bucket applied `request` (again, for `retry`: the SDK's retry after a lost answer) and answered `outcome`. */
  applied(request: StoreRequest, outcome: Outcome, retry: boolean): void;
  /** The bucket changed, by `request` (undefined: the operator's own hand). */
  changed(change: Change, request: StoreRequest | undefined): void;
}

export interface Violation {
  /** The invariant's function name. */
  readonly invariant: string;
  readonly message: string;
  readonly atMs: number;
  /** What a classifier of known defects reads. */
  readonly evidence?: Readonly<Record<string, unknown>>;
}

export interface SimOptions {
  readonly startMs: number;
  readonly choices: Choices;
  readonly timing: Timing;
  readonly faults: FaultProfile;
  /** How far past the operation deadline a late request may reach the store. */
  readonly lateSpanMs: number;
  /** Whether the bucket honours `If-Match` on DeleteObject (S3, moto) or ignores it (MinIO). */
  readonly conditionalDelete: ConditionalDelete;
  readonly trace: TraceMode;
}

/** A party gave up after its retries (as an activity whose attempts are spent): an outcome, not a bug. */
export class PartyGaveUp extends Error {
  override readonly name = 'PartyGaveUp';
}

const unknownOutcome = (request: StoreRequest, reason: string): Error =>
  isWrite(request.op) ? new AmbiguousError(request.key, reason) : new StoreUnavailableError(request.key, reason);

export class Sim {
  readonly scheduler: Scheduler;
  readonly world: World;
  readonly trace: Trace;
  readonly timing: Timing;
  readonly coverage = new Map<string, number>();
  readonly violations: Violation[] = [];
  monitor: Monitor | undefined;
  /** Faults have stopped: new requests are quiet and late ones have arrived. */
  healed = false;
  /** Parties still running, by name. */
  readonly running = new Set<string>();
  private requests = 0;
  private applying: StoreRequest | undefined;
  /** When each partition started (a partition on a root write starts when the party sends one). */
  private readonly partitionStarts = new Map<Partition, number>();
  /** Arrivals and answers held past the operation deadline: delivered at once when faults heal. */
  private readonly held = new Set<SimEvent>();

  constructor(private readonly options: SimOptions) {
    this.scheduler = new Scheduler(options.startMs);
    this.trace = new Trace(options.startMs, options.trace);
    this.timing = options.timing;
    this.world = new World(
      () => this.scheduler.now,
      (change) => this.monitor?.changed(change, this.applying),
      options.conditionalDelete,
    );
  }

  get choices(): Choices {
    return this.options.choices;
  }

  get now(): number {
    return this.scheduler.now;
  }

  count(label: string, n = 1): void {
    this.coverage.set(label, (this.coverage.get(label) ?? 0) + n);
  }

  violate(violation: Omit<Violation, 'atMs'>): void {
    const v = { ...violation, atMs: this.now };
    this.violations.push(v);
    this.trace.add(this.now, 'VIOLATION', `${v.invariant}: ${v.message}`);
  }

  party(name: string, kind: PartyKind, skewMs = 0, partitions: readonly Partition[] = []): Party {
    const startedAt = this.now;
    const party: Party = {
      name,
      kind,
      skewMs,
      partitions,
      store: undefined as unknown as ObjectStore,
      clock: () => this.scheduler.now + skewMs,
      elapsed: () => this.scheduler.now - startedAt,
      sleep: (ms, stop) => this.scheduler.sleep(ms, stop),
      log: (text) => this.trace.add(this.scheduler.now, name, text),
      context: undefined,
    };
    (party as { store: ObjectStore }).store = new PartyStore(this, party);
    return party;
  }

  /**
   * Starts `body` as `party`'s work; an error that is not one of the package's typed errors is a bug, and a violation.
   */
  spawn(party: Party, body: () => Promise<unknown>): void {
    this.running.add(party.name);
    this.scheduler.activity++;
    void body().then(
      () => {
        this.running.delete(party.name);
        this.scheduler.activity++;
      },
      (err: unknown) => {
        this.running.delete(party.name);
        this.scheduler.activity++;
        party.log(`ended with ${err instanceof Error ? `${err.name}: ${err.message}` : String(err)}`);
        if (!(err instanceof TypedError || err instanceof PartyGaveUp)) {
          this.violate({
            invariant: 'noUnexpectedErrors',
            message: `${party.name} failed with ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`,
          });
        }
      },
    );
  }

  /**
   * Sends `request` to the bucket, where `apply` runs it; resolves or rejects as the party would see
   * it, through its fault. `apply` gets the keys a partial delete fails.
   */
  request<T>(
    party: Party,
    op: StoreOp,
    key: string,
    apply: (failing: ReadonlySet<string>) => T,
    detail: Pick<StoreRequest, 'keys' | 'body' | 'etag'> = {},
  ): Promise<T> {
    const rootWrite = (op === 'putIfMatch' || op === 'putIfAbsent') && key.endsWith('/metadata/root.json');
    const cutOff = this.cutOff(party, rootWrite);
    const fault = this.healed
      ? healedFault(this.choices, this.timing)
      : cutOff !== undefined
        ? partitionedFault(this.choices, this.timing, this.now, cutOff)
        : decideFault(this.choices, op, rootWrite, this.options.faults, this.timing, this.options.lateSpanMs);
    const request: StoreRequest = {
      id: this.requests++,
      party,
      op,
      key,
      ...detail,
      issuedAt: this.now,
      fault,
      context: party.context,
    };
    if (fault.kind !== 'none') this.count(`fault ${fault.kind}: ${requestClass(request)}`);
    const deadline = this.timing.operationDeadlineMs;
    return new Promise<T>((resolve, reject) => {
      let answered = false;
      const answer = (outcome: Outcome, delayMs: number, note?: string): void => {
        const event = this.scheduler.at(this.now + delayMs, () => {
          this.held.delete(event);
          if (answered) return;
          answered = true;
          if (note && this.trace.on) party.log(`  ↳ #${request.id} ${note}`);
          if ('ok' in outcome) resolve(outcome.ok as T);
          else reject(outcome.err);
        });
        if (delayMs > deadline) this.held.add(event);
      };
      const stuck = fault.kind === 'late-stuck' || (fault.kind === 'partitioned' && fault.requestDelayMs > deadline);
      if (stuck)
        answer(
          { err: unknownOutcome(request, 'no answer within the operation deadline') },
          deadline,
          'timed out (the request is still on its way)',
        );
      const arrival = this.scheduler.at(this.now + fault.requestDelayMs, () => {
        this.held.delete(arrival);
        if (fault.kind === 'refused' || fault.kind === 'conflict') {
          const err =
            fault.kind === 'conflict'
              ? new ConflictError(key)
              : unknownOutcome(request, '503 SlowDown after the SDK retries, not applied');
          this.traceRequest(request, { err }, false);
          if (!stuck) answer({ err }, fault.replyDelayMs);
          return;
        }
        const failing = fault.kind === 'partial-delete' ? this.failingKeys(detail.keys ?? []) : new Set<string>();
        const outcome = this.apply(request, apply, failing, false);
        if (stuck) return;
        if (fault.kind === 'lost-reply-gave-up')
          answer(
            { err: unknownOutcome(request, 'every answer lost') },
            fault.replyDelayMs,
            `answer lost: ${describe({ err: unknownOutcome(request, '') })}`,
          );
        else if (fault.kind === 'lost-reply-retried') {
          this.scheduler.at(this.now + Math.max(1, Math.floor(fault.replyDelayMs / 2)), () => {
            const retried = this.apply(request, apply, new Set(), true);
            answer(
              retried,
              Math.ceil(fault.replyDelayMs / 2),
              `answer lost, the SDK's retry answered ${describe(retried)}`,
            );
          });
        } else
          answer(
            outcome,
            fault.replyDelayMs,
            fault.kind === 'pause' ? `paused ${fault.replyDelayMs} ms after the answer` : undefined,
          );
      });
      if (fault.requestDelayMs > deadline) this.held.add(arrival);
    });
  }

  /** Ends every fault: requests from now on are quiet, and every held request and answer arrives now. */
  heal(): void {
    this.healed = true;
    for (const event of [...this.held]) {
      event.cancelled = true;
      this.held.delete(event);
      this.scheduler.at(this.now + 1, event.run);
    }
  }

  /** Lets the operator change the bucket directly (no request, no fault), the monitor watching. */
  operate<T>(change: () => T): T {
    this.applying = undefined;
    return change();
  }

  /** When the partition `party` is in now ends, if it is in one; a root write may start one. */
  private cutOff(party: Party, rootWrite: boolean): number | undefined {
    for (const partition of party.partitions) {
      let from = this.partitionStarts.get(partition);
      if (from === undefined && this.now >= partition.fromMs && (!partition.onRootWrite || rootWrite)) {
        from = partition.onRootWrite ? this.now : partition.fromMs;
        this.partitionStarts.set(partition, from);
        party.log(`cut off from the store for ${partition.lastsMs} ms`);
        this.count(`partition of a ${party.kind}${partition.onRootWrite ? ' from its root write' : ''}`);
      }
      if (from !== undefined && this.now < from + partition.lastsMs) return from + partition.lastsMs;
    }
    return undefined;
  }

  private failingKeys(keys: readonly string[]): Set<string> {
    const failing = new Set(keys.filter(() => this.choices.next(2) === 1));
    if (failing.size === 0 && keys.length > 0) failing.add(keys[0]!);
    return failing;
  }

  private apply<T>(
    request: StoreRequest,
    apply: (failing: ReadonlySet<string>) => T,
    failing: ReadonlySet<string>,
    retry: boolean,
  ): Outcome {
    this.applying = request;
    let outcome: Outcome;
    try {
      outcome = { ok: apply(failing) };
    } catch (err) {
      if (!(err instanceof StoreError)) throw err;
      outcome = { err };
    } finally {
      this.applying = undefined;
    }
    this.traceRequest(request, outcome, retry);
    this.monitor?.applied(request, outcome, retry);
    return outcome;
  }

  private traceRequest(request: StoreRequest, outcome: Outcome, retry: boolean): void {
    if (!this.trace.on) return;
    const { op, key, keys, fault } = request;
    const target =
      op === 'deleteMany'
        ? `${(keys ?? []).map(shortKey).join(' ')}`
        : op === 'list'
          ? `${shortKey(key)}*`
          : shortKey(key);
    const faulted =
      fault.kind === 'none'
        ? ''
        : ` [${fault.kind}${fault.requestDelayMs > this.timing.operationDeadlineMs ? ` +${fault.requestDelayMs} ms` : ''}]`;
    request.party.log(
      `#${request.id} ${retry ? 'retry of ' : ''}${op} ${target} → ${describe(outcome)}${retry ? '' : faulted}`,
    );
  }
}

/** What a request is, for the coverage counts: the party that sent it and the kind of object. */
export function requestClass({ party, op, key }: Pick<StoreRequest, 'party' | 'op' | 'key'>): string {
  const target = key.endsWith('/metadata/root.json')
    ? 'root'
    : key.endsWith('/lease.json')
      ? 'lease'
      : key.includes('/metadata/gc/')
        ? 'manifest'
        : key.includes('/metadata/compactions/')
          ? 'staged'
          : key.includes('/metadata/segments/')
            ? 'segment'
            : 'other';
  return `${party.kind} ${op} ${target}`;
}

/** An outcome in a few words for the trace. */
function describe(outcome: Outcome): string {
  if ('err' in outcome) return outcome.err.name.replace(/Error$/, '');
  const value = outcome.ok as Record<string, unknown> | undefined;
  if (value && typeof value === 'object') {
    if ('objects' in value)
      return `${(value.objects as unknown[]).length} objects, ${(value.commonPrefixes as unknown[]).length} prefixes${value.nextCursor ? ', more' : ''}`;
    if ('deleted' in value)
      return `deleted ${(value.deleted as unknown[]).length}${(value.failed as unknown[]).length ? `, failed ${(value.failed as unknown[]).length}` : ''}`;
    if ('etag' in value && typeof value.etag === 'string') return `ok ${value.etag.slice(1, 7)}`;
  }
  return 'ok';
}
