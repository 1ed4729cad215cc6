/**
 * The collector's side of the lease (spec section 6), over the store port: decide a prefix's
 * owner at the pass's fixed clock, claim it, refresh the claim while its prefix is walked, and
 * delete the lease last. Owner decisions come from src/lease; nothing here reads a clock of its
 * own, so every decision of a pass is made at the same `nowMs`.
 */
import { TypedError } from '../errors';
import { leaseKey, type MetadataCompactionId, type NamespaceId } from '../keys';
import { claimLeaseState, claimUnleasedState, decideOwner, encodeLease, type LeaseState } from '../lease';
import {
  AmbiguousError,
  ConflictError,
  NotFoundError,
  PreconditionFailedError,
  type ObjectInfo,
  type ObjectStore,
} from '../store';
import { inBatches } from '../store/batches';
import { isDryRunEtag } from '../store/dry-run';
import { leaseReadOf, readLease, type JobRef, type LeaseRead } from '../protocol/lease-read';
import { deleterOf, type Deleter, type Deletion, type LeaseFacts } from './manifest';
import type { OwnerRules } from './rules';

const leaseFacts = (lease: LeaseState): LeaseFacts => ({ status: lease.status, heartbeatAtMs: lease.heartbeat_at_ms });

/**
 * The claim a pass holds on a prefix: the lease it wrote (`reaping`, its pass id), enough to refresh
 * it by CAS while it walks (spec 6.2) and to tell it from another pass's when the walk lists it.
 */
export interface HeldClaim {
  readonly etag: string;
  readonly startedAtMs: number;
  readonly heartbeatAtMs: number;
}

/**
 * Who owns a job prefix, as one pass sees it: the only ownership type of the collector. A survey
 * answers any of these; a claim settles `expired` and `none` into one of the others.
 */
export type PrefixOwner =
  /**
   * No lease: the prefix holds plain orphans; the pass claims it by creating a `reaping` lease before deleting there.
   */
  | { readonly owner: 'none' }
  /**
   * `reaping`, this pass's: claimed just now (or, in a dry run, would be), or earlier by an attempt of
   * this same pass. `lease`: the lease as read when it was claimed (for the manifest); `claim`: the
   * lease this pass wrote, when it knows it; `created`: the prefix had no lease and the pass created
   * its claim (its objects are reported as orphans'; the root is fenced all the same, since a lease
   * can be deleted under a live job).
   */
  | { readonly owner: 'collector'; readonly lease?: LeaseFacts; readonly claim?: HeldClaim; readonly created?: true }
  /** `reaping`, claimed by another pass whose claim has not expired: that pass owns the prefix; this one leaves it. */
  | { readonly owner: 'another_pass'; readonly passId: string }
  /** Live, or the job refreshed between our read and our claim (`raced`): retain the whole prefix. */
  | { readonly owner: 'job'; readonly raced: boolean }
  /**
   * An expired `active` lease, or another pass's expired claim, as one GET read it, still to be
   * claimed: the claim's CAS uses this ETag, and `lease` is the text read (it travels through
   * workflow history), so the claim needs no second GET.
   */
  | { readonly owner: 'expired'; readonly etag: string; readonly lease: string }
  /** Undecodable, or names another job or namespace than its key: the namespace's pass fails. */
  | { readonly owner: 'corrupt'; readonly key: string; readonly reason: string };

/** An owner the pass acts on without a claim. */
export type SettledOwner = Exclude<PrefixOwner, { owner: 'expired' | 'none' }>;
export type ExpiredLease = Extract<PrefixOwner, { owner: 'expired' }>;
/** What a survey saw of a prefix the pass may claim: an expired lease, or none. */
export type ClaimableOwner = Extract<PrefixOwner, { owner: 'expired' | 'none' }>;

const heldClaim = (lease: LeaseState, etag: string): HeldClaim => ({
  etag,
  startedAtMs: lease.started_at_ms,
  heartbeatAtMs: lease.heartbeat_at_ms,
});

function ownerOf(found: LeaseRead, rules: OwnerRules, key: string): PrefixOwner {
  const decision = decideOwner(found, rules.nowMs, rules.leaseExpiryMs, rules.passId);
  if (decision.owner === 'corrupt') return { owner: 'corrupt', key, reason: decision.reason };
  if (decision.owner === 'job') return { owner: 'job', raced: false };
  if (decision.owner === 'none') return { owner: 'none' };
  if (decision.owner === 'another_pass') return { owner: 'another_pass', passId: decision.passId };
  // decideOwner answers `collector` and `expired` only for a lease that was read, so this GET's ETag and bytes exist.
  const read = found as Extract<LeaseRead, { etag: string }>;
  if (decision.owner === 'collector') return { owner: 'collector', claim: heldClaim(read.lease, read.etag) };
  return { owner: 'expired', etag: read.etag, lease: new TextDecoder().decode(read.bytes) };
}

/** Each ambiguous claim is settled by a fresh read; bounded, so a flapping store surfaces as a retryable failure. */
const MAX_CLAIM_READS = 5;

/**
 * Decides the owner from one GET, claiming nothing. At the pass's fixed clock a live lease stays
 * live for the whole pass (a refresh only moves its heartbeat forward), so the decision holds
 * however late the pass acts on it; an expired one is claimed later with this read's ETag.
 */
export async function surveyLease(store: ObjectStore, job: JobRef, rules: OwnerRules): Promise<PrefixOwner> {
  return ownerOf(await readLease(store, job), rules, leaseKey(job.namespaceId, job.jobId));
}

const isUnclear = (err: unknown): boolean =>
  err instanceof PreconditionFailedError ||
  err instanceof NotFoundError ||
  err instanceof ConflictError ||
  err instanceof AmbiguousError;

/** What a claim starts from and stamps its lease with. */
export interface ClaimOptions {
  /** A survey's earlier read of the lease: the claim's CAS uses its ETag, and needs no GET of its own. */
  readonly seen?: ClaimableOwner;
  /** The wall clock the claim is stamped at. */
  readonly clockMs?: () => number;
}

/**
 * Claims the prefix for pass `rules.passId` (spec 6.2), deciding the owner from one GET (or from
 * `seen`, a survey's earlier read of the same lease): an expired lease (a job's, or another pass's
 * claim that was not refreshed) is claimed by CAS with the ETag of that same read, and a prefix with
 * no lease by creating a `reaping` lease (put-if-absent), so no job can create its own there
 * afterwards. The claim names this pass and its clock (`clockMs`), so its bytes are its own: a
 * refused (412/404/409) or ambiguous write is settled by a fresh read, never guessed, and the read
 * tells this pass's claim (its reply was lost, the SDK's retry refused) from another pass's, which
 * that pass owns; `active` with a newer heartbeat than the one claimed is a job that refreshed in
 * between, live for this pass however old that heartbeat is at the pass's clock. A dry run's store
 * records the claim instead of making it, and answers as if it landed.
 */
export async function claimLease(
  store: ObjectStore,
  job: JobRef,
  rules: OwnerRules,
  { seen, clockMs = Date.now }: ClaimOptions = {},
): Promise<SettledOwner> {
  const key = leaseKey(job.namespaceId, job.jobId);
  let lastError: unknown;
  let claimedHeartbeatMs: number | undefined;
  for (let read = 0; read < MAX_CLAIM_READS; read++) {
    const found: LeaseRead =
      read === 0 && seen?.owner === 'expired'
        ? leaseReadOf({ body: new TextEncoder().encode(seen.lease), etag: seen.etag }, job)
        : read === 0 && seen?.owner === 'none'
          ? { missing: true }
          : await readLease(store, job);
    const owner = ownerOf(found, rules, key);
    if (owner.owner === 'job') return { owner: 'job', raced: claimedHeartbeatMs !== undefined };
    if (owner.owner !== 'expired' && owner.owner !== 'none') return owner;
    try {
      if (owner.owner === 'none') {
        const claim = claimUnleasedState({ ...job, passId: rules.passId, nowMs: clockMs() });
        const { etag } = await store.putIfAbsent(key, encodeLease(claim));
        return { owner: 'collector', claim: heldClaim(claim, etag), created: true };
      }
      const { lease } = found as Extract<LeaseRead, { etag: string }>;
      if (claimedHeartbeatMs !== undefined && lease.status === 'active' && lease.heartbeat_at_ms > claimedHeartbeatMs)
        return { owner: 'job', raced: true };
      claimedHeartbeatMs = lease.heartbeat_at_ms;
      const claim = claimLeaseState(lease, rules.passId, clockMs());
      const { etag } = await store.putIfMatch(key, encodeLease(claim), owner.etag);
      return { owner: 'collector', lease: leaseFacts(lease), claim: heldClaim(claim, etag) };
    } catch (err) {
      if (!isUnclear(err)) throw err;
      lastError = err;
    }
  }
  throw lastError;
}

/** Another party took a claim this pass held while it walked the prefix (its refresh met another's lease, or none). */
export class ClaimLostError extends TypedError {
  readonly failureType = 'ClaimLost';
  constructor(
    readonly key: string,
    readonly reason: string,
  ) {
    super(`claim ${key} lost while walking its prefix: ${reason}; the prefix is left to its owner`);
  }
}

/**
 * Refreshes this pass's claim by CAS (a later heartbeat at `clockMs`), as a job refreshes its lease:
 * a claim older than the lease expiry is another pass's to take over. An unclear answer is settled
 * by a re-read: this pass's claim (its own bytes, or an earlier refresh of its own) is adopted; a
 * lease that is gone ends the claim (`undefined`): only a claim's holder deletes a reaping lease, and
 * only after its walk, so the prefix was reclaimed (by an earlier attempt of this walk, or by a pass
 * that took the claim over); anything else is {@link ClaimLostError}.
 */
export async function refreshClaim(
  store: ObjectStore,
  job: JobRef,
  held: HeldClaim,
  { passId, clockMs }: { readonly passId: string; readonly clockMs: () => number },
): Promise<HeldClaim | undefined> {
  const key = leaseKey(job.namespaceId, job.jobId);
  const current = {
    job_id: job.jobId,
    namespace_id: job.namespaceId,
    owner_id: passId,
    status: 'reaping',
    started_at_ms: held.startedAtMs,
    heartbeat_at_ms: held.heartbeatAtMs,
  } as const;
  const next = claimLeaseState(current, passId, clockMs());
  try {
    return heldClaim(next, (await store.putIfMatch(key, encodeLease(next), held.etag)).etag);
  } catch (err) {
    if (!isUnclear(err)) throw err;
  }
  const read = await readLease(store, job);
  if ('missing' in read) return undefined;
  if ('lease' in read && read.lease.status === 'reaping' && read.lease.owner_id === passId)
    return heldClaim(read.lease, read.etag);
  throw new ClaimLostError(
    key,
    'corrupt' in read ? read.corrupt : `it is ${read.lease.status}, owner ${read.lease.owner_id}`,
  );
}

/** A lease's deletion as its manifest line names it: `lease`, as the claim read it. */
export const leaseDeletion = (object: ObjectInfo, lease: LeaseFacts | undefined): Deletion => ({
  object,
  rule: 'lease',
  read: lease ? { lease } : {},
});

/** How a lease is released: the deleter that records it, the lease as the claim read it, and the claim. */
export interface LeaseRelease {
  /** Records the lease's line before it goes; a deleter of its own (no manifest) by default. */
  readonly deletes?: Deleter;
  /** The lease as the claim read it, for the manifest. */
  readonly lease?: LeaseFacts;
  /** The claim as this pass wrote it. */
  readonly claim?: HeldClaim;
}

/**
 * Deletes the lease this pass owns, after its manifest line: the line the walk of its prefix
 * recorded with its last batch (from the walk's listing), else one of its own, from the read below.
 * Called after the prefix was walked, also when the walk failed. `lease`: the lease as the claim read it.
 * The lease is read, and deleted only while it is still this pass's claim, and only in the version
 * read (a conditional delete): a delete that lands late, after another pass took the claim over (this
 * pass stalled past the expiry) or after the lease was re-created, finds another ETag and deletes
 * nothing. A refused delete is settled by a fresh read, as a refused claim is: this pass's claim in
 * another version (a refresh of its own landed late) is deleted in that one; another's is that
 * party's to release, and the answer is `false`. A lease already gone needs nothing (`true`). On a
 * store that ignores the condition (`store check`: conditional delete `ignored`) the read is the only
 * check, and a delete that lands after another write removes it (docs/stores.md).
 */
export async function deleteLease(
  store: ObjectStore,
  job: JobRef,
  passId: string,
  { deletes = deleterOf(store, undefined), lease, claim }: LeaseRelease = {},
): Promise<boolean> {
  const key = leaseKey(job.namespaceId, job.jobId);
  // A dry run's claim was recorded, never written: the lease it would delete is the one it would have claimed, as the
  // store holds it.
  const dryRun = claim !== undefined && isDryRunEtag(claim.etag);
  let lastError: unknown;
  for (let read = 0; read < MAX_CLAIM_READS; read++) {
    const found = await readLease(store, job);
    if ('missing' in found) return true;
    if (!('lease' in found && (dryRun || (found.lease.status === 'reaping' && found.lease.owner_id === passId))))
      return false;
    const object: ObjectInfo = { key, size: found.bytes.length, etag: found.etag, lastModified: found.lastModified };
    try {
      await deletes.deleteIfMatch(leaseDeletion(object, lease), found.etag);
      return true;
    } catch (err) {
      if (!(err instanceof PreconditionFailedError || err instanceof ConflictError)) throw err;
      lastError = err;
    }
  }
  throw lastError;
}

/** A job prefix of a surveyed page and its owner at the pass's clock. */
export interface SurveyedPrefix {
  readonly jobId: MetadataCompactionId;
  readonly owner: PrefixOwner;
}

/** Leases read in parallel by one survey: the DeleteObjects parallelism of the S3 adapter, for the same reason. */
const SURVEY_CONCURRENCY = 8;

/**
 * Reads the lease of every job of a page once, {@link SURVEY_CONCURRENCY} at a time, and decides each owner; claims
 * nothing.
 */
export async function surveyLeases(
  store: ObjectStore,
  { namespaceId: ns, jobIds }: { readonly namespaceId: NamespaceId; readonly jobIds: readonly MetadataCompactionId[] },
  rules: OwnerRules,
  onRead: () => void = () => {},
): Promise<SurveyedPrefix[]> {
  const pages = await inBatches(jobIds, 1, SURVEY_CONCURRENCY, (batch) =>
    Promise.all(
      batch.map(async (jobId) => {
        const owner = await surveyLease(store, { namespaceId: ns, jobId }, rules);
        onRead();
        return { jobId, owner };
      }),
    ),
  );
  return pages.flat();
}
