/**
 * Per-request faults, chosen by the scenario's choices when a party sends the request. A request
 * travels to the store (its request delay), is applied or refused there, and its answer travels
 * back (its reply delay); each fault changes one of those legs, as S3 and the AWS SDK would:
 *
 * - `slow`: a request delay up to half the operation deadline (listings are slow more often);
 * - `late-stuck`: the request reaches the store after the operation deadline (a stuck connection, a
 *   proxy); the caller gave up at the deadline with an unknown outcome;
 * - `late-paused`: the same delay with the caller waiting for the answer (a process paused between
 *   its last check and the send);
 * - `refused`: 503 after the SDK's retries, nothing applied (a write reports it as unknown, as the
 *   S3 adapter does);
 * - `conflict`: 409 ConditionalRequestConflict on a conditional write or delete, nothing applied;
 * - `lost-reply-retried`: applied, the answer lost, and the SDK's retry of the same request applied
 *   in turn: the caller gets the retry's answer (the 412 of a conditional write that had landed);
 * - `lost-reply-gave-up`: applied, every answer lost: an unknown outcome;
 * - `partial-delete`: DeleteObjects reports an InternalError for some of its keys, not deleted;
 * - `pause`: the caller's process pauses after the answer arrived (any await may be followed by one);
 * - `partitioned`: sent while its party is cut off from the store (a scenario's partition): it
 *   arrives when the partition ends, in any order with the others held, and the caller gave up at
 *   the deadline. Faults of one request are independent; a partition holds every request of a party
 *   for a while, as a stuck proxy or a network partition does.
 */
import type { Timing } from '../../src/config';
import { between, pick, type Choices } from './choices';

export type StoreOp =
  'get' | 'getStream' | 'head' | 'putIfAbsent' | 'putIfMatch' | 'put' | 'list' | 'deleteMany' | 'deleteIfMatch';

export const FAULT_KINDS = [
  'slow',
  'late-stuck',
  'late-paused',
  'refused',
  'conflict',
  'lost-reply-retried',
  'lost-reply-gave-up',
  'partial-delete',
  'pause',
] as const;
export type FaultKind = 'none' | 'partitioned' | (typeof FAULT_KINDS)[number];

export interface Fault {
  readonly kind: FaultKind;
  /** From the send until the store applies (or refuses) the request. */
  readonly requestDelayMs: number;
  /** From the store's answer until the caller goes on. */
  readonly replyDelayMs: number;
}

/** How faulty a scenario's store is: the share of faulted requests, and which kinds may happen. */
export interface FaultProfile {
  /** Percent of requests with a fault. */
  readonly percent: number;
  /** Requests may reach the store after the operation deadline. */
  readonly late: boolean;
  /** Callers may pause after an answer, for up to this long (0: never). */
  readonly maxPauseMs: number;
  /**
   * Percent of root writes (every party's CAS of the namespace root) that reach the store late, when
   * `late`: the writes every fence is about, faulted far more often than the rest.
   */
  readonly lateRootPercent: number;
}

export const isWrite = (op: StoreOp): boolean =>
  op === 'put' || op === 'putIfAbsent' || op === 'putIfMatch' || op === 'deleteMany' || op === 'deleteIfMatch';
export const isConditional = (op: StoreOp): boolean =>
  op === 'putIfAbsent' || op === 'putIfMatch' || op === 'deleteIfMatch';

/** The relative weight of each fault kind among faulted requests, for `op`; 0 where the kind cannot happen. */
function weights(op: StoreOp, profile: FaultProfile): Record<(typeof FAULT_KINDS)[number], number> {
  return {
    slow: op === 'list' ? 12 : 4,
    'late-stuck': profile.late ? 1 : 0,
    'late-paused': profile.late ? 1 : 0,
    refused: 2,
    conflict: isConditional(op) ? 2 : 0,
    'lost-reply-retried': 3,
    'lost-reply-gave-up': 1,
    'partial-delete': op === 'deleteMany' ? 2 : 0,
    pause: profile.maxPauseMs > 0 ? 2 : 0,
  };
}

/**
 * How late past the deadline a late request arrives: as often within T (a publication's window of
 * doubt), within T and a lease expiry after it, or anywhere up to `lateSpanMs` (past every grace).
 */
const lateBy = (choices: Choices, timing: Timing, lateSpanMs: number): number =>
  pick(choices, [
    [1, () => between(choices, 1, timing.gcMinGraceMs)],
    [1, () => between(choices, timing.gcMinGraceMs, timing.gcMinGraceMs + timing.leaseExpiryMs)],
    [1, () => between(choices, 1, lateSpanMs)],
  ])();

/**
 * The fault of one request. A normal request takes up to a tenth of the operation deadline each
 * way; `late` ones reach the store up to `lateSpanMs` after the deadline.
 */
export function decideFault(
  choices: Choices,
  op: StoreOp,
  rootWrite: boolean,
  profile: FaultProfile,
  timing: Timing,
  lateSpanMs: number,
): Fault {
  const deadline = timing.operationDeadlineMs;
  const quick = Math.max(2, Math.floor(deadline / 10));
  const lateRoot =
    rootWrite && profile.late && profile.lateRootPercent > 0 && choices.next(100) < profile.lateRootPercent;
  const faulted = lateRoot || (profile.percent > 0 && choices.next(100) < profile.percent);
  const kind: FaultKind = lateRoot
    ? pick(choices, [
        [1, 'late-stuck'],
        [1, 'late-paused'],
      ])
    : faulted
      ? pick(
          choices,
          Object.entries(weights(op, profile)).map(([k, w]) => [w, k as FaultKind] as const),
        )
      : 'none';
  const requestDelayMs =
    kind === 'slow'
      ? between(choices, quick, deadline / 2)
      : kind === 'late-stuck' || kind === 'late-paused'
        ? deadline + lateBy(choices, timing, lateSpanMs)
        : between(choices, 1, quick);
  const replyDelayMs = kind === 'pause' ? between(choices, deadline, profile.maxPauseMs) : between(choices, 1, quick);
  return { kind, requestDelayMs, replyDelayMs };
}

/**
 * A request sent during a partition that ends at `untilMs`: it arrives just after, the caller having given up at the
 * deadline.
 */
export const partitionedFault = (choices: Choices, timing: Timing, nowMs: number, untilMs: number): Fault => ({
  kind: 'partitioned',
  requestDelayMs: untilMs - nowMs + between(choices, 1, Math.max(2, Math.floor(timing.operationDeadlineMs / 10))),
  replyDelayMs: 1,
});

/** A quiet request once faults have healed: short delays, nothing else. */
export const healedFault = (choices: Choices, timing: Timing): Fault => {
  const quick = Math.max(2, Math.floor(timing.operationDeadlineMs / 10));
  return { kind: 'none', requestDelayMs: between(choices, 1, quick), replyDelayMs: 1 };
};
