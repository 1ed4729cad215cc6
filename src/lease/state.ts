/**
 * The lease and its legal transitions, as pure functions: no I/O, no clock of their own.
 * The lease says who owns one job's prefix and carries nothing else.
 */
import { TypedError } from '../errors';
import type { MetadataCompactionId, NamespaceId } from '../keys';

/**
 * Who owns the prefix: the job that wrote the lease (`active`) or the collector that claimed it (`reaping`, terminal).
 */
export type LeaseStatus = 'active' | 'reaping';

/** The seed's `MetadataCompactionLeaseState`, field for field and in the seed's order. */
export interface LeaseState {
  /** Job this lease belongs to, which is also the prefix its output sits under. */
  readonly job_id: MetadataCompactionId;
  /** Namespace whose family group the job is rebuilding. */
  readonly namespace_id: NamespaceId;
  /** Writer identity the job runs under, for an operator reading the object. */
  readonly owner_id: string;
  /** Who owns the prefix. */
  readonly status: LeaseStatus;
  /** Unix-millisecond stamp of the job's first lease write. */
  readonly started_at_ms: number;
  /** Unix-millisecond stamp of the most recent lease write, and the only input to expiry. */
  readonly heartbeat_at_ms: number;
}

/** A transition the protocol forbids (e.g. refreshing a `reaping` lease, a heartbeat that does not increase). */
export class LeaseTransitionError extends TypedError {
  readonly failureType = 'LeaseTransition';
}

/** The lease a job creates before its first output object: started and heartbeat are the same clock reading. */
export function createLeaseState(init: {
  jobId: MetadataCompactionId;
  namespaceId: NamespaceId;
  ownerId: string;
  nowMs: number;
}): LeaseState {
  return Object.freeze({
    job_id: init.jobId,
    namespace_id: init.namespaceId,
    owner_id: init.ownerId,
    status: 'active',
    started_at_ms: init.nowMs,
    heartbeat_at_ms: init.nowMs,
  });
}

/**
 * The job's refresh. The heartbeat must strictly increase: S3's ETag is the body's MD5, so a
 * write of identical bytes would keep the ETag and defeat the compare-and-swap.
 */
export function refreshLeaseState(lease: LeaseState, heartbeatAtMs: number): LeaseState {
  if (lease.status !== 'active')
    throw new LeaseTransitionError(`cannot refresh a ${lease.status} lease of ${lease.job_id}`);
  if (!(heartbeatAtMs > lease.heartbeat_at_ms)) {
    throw new LeaseTransitionError(
      `heartbeat of ${lease.job_id} must increase: ${heartbeatAtMs} is not after ${lease.heartbeat_at_ms}`,
    );
  }
  return Object.freeze({ ...lease, heartbeat_at_ms: heartbeatAtMs });
}

/** The heartbeat a job writes next: its monotonic clock reading, but never less than one past the last one. */
export const nextHeartbeatMs = (lease: LeaseState, clockMs: number): number =>
  Math.max(Math.floor(clockMs), lease.heartbeat_at_ms + 1);

/**
 * A collector pass's claim: `reaping`, `owner_id` the pass's id and `heartbeat_at_ms` the claim's
 * clock (the seed: "the stamp of the most recent lease write"; the collector writes it now). Naming
 * the pass makes every claim's bytes its own, so a re-read after an unclear answer tells this pass's
 * claim from another's, and only one pass ever owns the prefix. From `active` (an expired job) or
 * from `reaping` (the claim of a pass that stopped refreshing it: a take-over); a pass refreshing its
 * own claim is the same transition.
 */
export function claimLeaseState(lease: LeaseState, passId: string, clockMs: number): LeaseState {
  if (passId.length === 0) throw new LeaseTransitionError(`a claim of ${lease.job_id} must name its pass`);
  return Object.freeze({
    ...lease,
    status: 'reaping',
    owner_id: passId,
    heartbeat_at_ms: nextHeartbeatMs(lease, clockMs),
  });
}

/**
 * The lease a pass writes by put-if-absent on a job prefix that has none, so that it owns the prefix
 * before it deletes under it: a job that creates its lease afterwards finds it claimed and is fenced.
 */
export function claimUnleasedState(init: {
  jobId: MetadataCompactionId;
  namespaceId: NamespaceId;
  passId: string;
  nowMs: number;
}): LeaseState {
  return Object.freeze({ ...createLeaseState({ ...init, ownerId: init.passId }), status: 'reaping' });
}

/** An `active` lease is live while `now <= heartbeat_at_ms + expiry`; a `reaping` lease is never live for a job. */
export const isLeaseLive = (lease: LeaseState, nowMs: number, expiryMs: number): boolean =>
  lease.status === 'active' && nowMs <= lease.heartbeat_at_ms + expiryMs;

/** What a collector pass concludes about a job prefix from one read of its lease (spec 6.2). */
export type OwnerDecision =
  | { readonly owner: 'none' }
  | { readonly owner: 'corrupt'; readonly reason: string }
  /** `reaping`, claimed by this pass: finish its own claim (a retried activity, a lost reply). */
  | { readonly owner: 'collector' }
  /** `reaping`, claimed by another pass whose claim has not expired: that pass owns the prefix. */
  | { readonly owner: 'another_pass'; readonly passId: string }
  | { readonly owner: 'job' }
  /** An expired `active` lease, or another pass's expired claim: try to claim it. */
  | { readonly owner: 'expired'; readonly lease: LeaseState };

/** Decides the owner of a job prefix at the pass's fixed clock for pass `passId`; `expired` means: try to claim it. */
export function decideOwner(
  read: { readonly lease: LeaseState } | { readonly missing: true } | { readonly corrupt: string },
  nowMs: number,
  expiryMs: number,
  passId: string,
): OwnerDecision {
  if ('missing' in read) return { owner: 'none' };
  if ('corrupt' in read) return { owner: 'corrupt', reason: read.corrupt };
  const { lease } = read;
  const expired = nowMs > lease.heartbeat_at_ms + expiryMs;
  if (lease.status === 'reaping') {
    if (lease.owner_id === passId) return { owner: 'collector' };
    return expired ? { owner: 'expired', lease } : { owner: 'another_pass', passId: lease.owner_id };
  }
  return expired ? { owner: 'expired', lease } : { owner: 'job' };
}
