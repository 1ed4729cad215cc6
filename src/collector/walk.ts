/**
 * The collector's side of the lease (spec section 6), over the store port: discover namespaces
 * and job prefixes, decide and claim a prefix's owner at the pass's fixed clock, reclaim the
 * prefix, delete the lease it claimed. Owner decisions come from src/lease; nothing here reads a
 * clock of its own, so every decision of a pass is made at the same `nowMs`.
 */
import { TypedError } from '../errors';
import {
  compactionsPrefix,
  jobPrefix,
  leaseKey,
  rootKey,
  NAMESPACES_PREFIX,
  parseCompactionKey,
  parseJobPrefix,
  parseNamespacePrefix,
  type MetadataCompactionId,
  type NamespaceId,
} from '../keys';
import { claimLeaseState, claimUnleasedState, decideOwner, encodeLease, type LeaseState } from '../lease';
import {
  MAX_COLLECTED_ROOT_BYTES,
  MAX_ROOT_BYTES,
  RootCorruptError,
  RootTooLargeError,
  type RootCodec,
  type RootState,
} from '../root';
import {
  AFTER_ALL_UNDER,
  AmbiguousError,
  ConflictError,
  NotFoundError,
  PreconditionFailedError,
  StoreError,
  type DeleteFailure,
  type ObjectInfo,
  type ObjectStore,
  ObjectTooLargeError,
} from '../store';
import { isDryRunEtag } from '../store/dry-run';
import { leaseReadOf, readLease, type JobRef, type LeaseRead } from '../protocol/lease-read';
import { readRoot, RootLostError, RootMissingError, type ReadRoot } from '../protocol/root-io';
import { judgeRoot, RootWentBackError } from './judged-root';
import { isRetainedByRoot } from './retired';
import type { OwnerRules, ReclaimOptions } from './rules';
import { inBatches } from '../store/batches';
import { deleterOf, type Deleter, type Deletion, type DeletionRule, type LeaseFacts, type PartWait } from './manifest';

const leaseFacts = (lease: LeaseState): LeaseFacts => ({ status: lease.status, heartbeatAtMs: lease.heartbeat_at_ms });

/**
 * A position ending in `/` is a common prefix: resuming after it must skip everything under it too.
 * The one exception is an object whose key is the listed prefix itself (a folder marker): skipping
 * "under" it would skip every child of the prefix.
 */
const startAfter = (prefix: string, position: string | undefined): string | undefined =>
  position === undefined || position === prefix || !position.endsWith('/') ? position : position + AFTER_ALL_UNDER;

export interface ChildrenPage<T> {
  readonly found: T[];
  /** Keys and common prefixes under the listed prefix that are not of the grammar: retained and reported. */
  readonly unrecognised: string[];
  /** Where the next page starts (exclusive); undefined when this was the last page. */
  readonly next: string | undefined;
}

/** One page of the immediate children of `prefix` (delimiter `/`), resumable after any key or common prefix. */
async function listChildren<T>(
  store: ObjectStore,
  prefix: string,
  after: string | undefined,
  limit: number,
  parse: (commonPrefix: string) => T | undefined,
): Promise<ChildrenPage<T>> {
  const page = await store.list({ prefix, delimiter: '/', startAfter: startAfter(prefix, after), maxKeys: limit });
  const found: T[] = [];
  const unrecognised = page.objects.map((o) => o.key);
  for (const p of page.commonPrefixes) {
    const parsed = parse(p);
    if (parsed === undefined) unrecognised.push(p);
    else found.push(parsed);
  }
  const last = [...page.commonPrefixes, ...page.objects.map((o) => o.key)].sort().at(-1);
  return { found, unrecognised, next: page.nextCursor === undefined ? undefined : last };
}

export const listNamespaces = (
  store: ObjectStore,
  after: string | undefined,
  limit: number,
): Promise<ChildrenPage<NamespaceId>> => listChildren(store, NAMESPACES_PREFIX, after, limit, parseNamespacePrefix);

/** Async, so a raw namespace id rejects like any other failure instead of throwing before a promise exists. */
export const listJobPrefixes = async (
  store: ObjectStore,
  ns: NamespaceId,
  after: string | undefined,
  limit: number,
): Promise<ChildrenPage<MetadataCompactionId>> =>
  listChildren(store, compactionsPrefix(ns), after, limit, (p) => parseJobPrefix(ns, p));

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
  seen?: ClaimableOwner,
  clockMs: () => number = Date.now,
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
  passId: string,
  held: HeldClaim,
  clockMs: () => number,
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

/** Why a namespace's root cannot be trusted; the namespace's pass then claims and deletes nothing. */
export interface RootProblem {
  readonly key: string;
  /**
   * `oversize`: readable to the collector only, past what readers accept; only its superseded segments
   * are reclaimed, to shrink it. `went_back`: older than a root a pass already judged (spec 6c.5); a
   * root missing where one was judged is `missing`, its reason naming the restore.
   */
  readonly problem: 'missing' | 'corrupt' | 'unreadable' | 'oversize' | 'went_back';
  readonly reason: string;
}

/**
 * Reads the root once and says what is wrong with it, if anything, or the generation the pass judges
 * the namespace by (recorded first: {@link judgeRoot}). Retention wins: without a root to read there
 * is no telling referenced segments from unreferenced ones, so a namespace whose root is missing,
 * corrupt, unreadable (after the store's own retries) or older than one a pass judged is skipped for the pass. A root
 * over the readers' limit (up to {@link MAX_COLLECTED_ROOT_BYTES}) is `oversize`: its job prefixes
 * wait, and its superseded segments are reclaimed, which is what shrinks it.
 */
export async function findRootProblem(
  store: ObjectStore,
  ns: NamespaceId,
  codec: RootCodec,
): Promise<{ readonly problem: RootProblem } | { readonly generation: number }> {
  try {
    const judged = await judgeRoot(store, ns, codec, MAX_COLLECTED_ROOT_BYTES);
    const oversize = oversizeProblem(ns, judged.bytes);
    return oversize ? { problem: oversize } : { generation: judged.root.generation };
  } catch (err) {
    const problem = rootProblemOf(err, ns);
    if (problem) return { problem };
    throw err;
  }
}

/** The problem of a root of `bytes` that the collector read, if it is past what readers accept. */
export const oversizeProblem = (ns: NamespaceId, bytes: number): RootProblem | undefined =>
  bytes > MAX_ROOT_BYTES
    ? { key: rootKey(ns), problem: 'oversize', reason: new RootTooLargeError(ns, bytes, false).message }
    : undefined;

/** What a failed read of the root says about it; undefined for a failure that is not about the root (a bug). */
export function rootProblemOf(err: unknown, ns: NamespaceId): RootProblem | undefined {
  const key = rootKey(ns);
  if (err instanceof RootMissingError || err instanceof RootLostError)
    return { key, problem: 'missing', reason: err.message };
  if (err instanceof RootWentBackError) return { key, problem: 'went_back', reason: err.message };
  if (err instanceof RootCorruptError || err instanceof ObjectTooLargeError)
    return { key, problem: 'corrupt', reason: err.message };
  if (err instanceof StoreError) return { key, problem: 'unreadable', reason: err.message };
  return undefined;
}

/** A DeleteObjects request reported per-key errors; the keys were not deleted. Retryable: deletes are idempotent. */
export class DeleteFailedError extends TypedError {
  readonly failureType = 'DeleteFailed';
  constructor(
    readonly prefix: string,
    readonly failures: readonly DeleteFailure[],
  ) {
    const shown = failures.slice(0, 3).map((f) => `${f.key} (${f.code}: ${f.message})`);
    super(`${failures.length} deletes under ${prefix} failed: ${shown.join(', ')}${failures.length > 3 ? ', …' : ''}`);
  }
}

/** A lease's deletion as its manifest line names it: `lease`, as the claim read it. */
const leaseDeletion = (object: ObjectInfo, lease: LeaseFacts | undefined): Deletion => ({
  object,
  rule: 'lease',
  read: lease ? { lease } : {},
});

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
  deletes: Deleter = deleterOf(store, undefined),
  lease?: LeaseFacts,
  claim?: HeldClaim,
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

/**
 * How a walk's deletions are recorded: the rule of its prefix and the lease that made it the collector's, and the claim
 * it refreshes.
 */
export interface PrefixRule {
  readonly rule: Extract<DeletionRule, 'claimed_prefix' | 'orphaned_prefix'>;
  readonly lease?: LeaseFacts;
  /** This pass's claim on the prefix, refreshed while the walk lasts; absent for a walk of a prefix no one owns. */
  readonly claim?: HeldClaim;
}

/** What the walk of one prefix did; counts are exact for a walk that was not interrupted. */
export interface ReclaimTally {
  readonly objectsDeleted: number;
  readonly bytesDeleted: number;
  readonly retainedReferenced: number;
  readonly retainedYoung: number;
  readonly retainedUnrecognised: number;
  /** The first unrecognised keys, up to the pass's report limit. */
  readonly unrecognisedKeys: readonly string[];
}

export const EMPTY_TALLY: ReclaimTally = Object.freeze({
  objectsDeleted: 0,
  bytesDeleted: 0,
  retainedReferenced: 0,
  retainedYoung: 0,
  retainedUnrecognised: 0,
  unrecognisedKeys: [],
});

/** Where a walk stands: every key up to `after` is settled and counted in `tally`. Travels in Temporal heartbeats. */
export interface ReclaimPosition {
  readonly after: string | undefined;
  readonly tally: ReclaimTally;
}

export const START_OF_WALK: ReclaimPosition = Object.freeze({ after: undefined, tally: EMPTY_TALLY });

/**
 * Where an attempt of a walk starts: the position a retried attempt's predecessor heartbeated (it is
 * past `from`), else the command's `from`, else the beginning of the prefix.
 */
export const reclaimPositionFrom = (details: unknown, from: ReclaimPosition = START_OF_WALK): ReclaimPosition =>
  details === undefined || details === null ? from : (details as ReclaimPosition);

/** A missing or future `LastModified` means young: retention wins every unclear age. */
const isOldEnough = (o: ObjectInfo, options: ReclaimOptions): boolean =>
  o.lastModified !== undefined &&
  options.nowMs - o.lastModified.getTime() >= options.stagingGraceMs &&
  o.lastModified.getTime() <= options.nowMs;

const deletionTally = (deleted: readonly ObjectInfo[]): ReclaimTally => ({
  ...EMPTY_TALLY,
  objectsDeleted: deleted.length,
  bytesDeleted: deleted.reduce((n, o) => n + o.size, 0),
});

type Mutable<T> = { -readonly [K in keyof T]: T[K] };

function addTally(a: ReclaimTally, b: ReclaimTally, limit: number): ReclaimTally {
  return {
    objectsDeleted: a.objectsDeleted + b.objectsDeleted,
    bytesDeleted: a.bytesDeleted + b.bytesDeleted,
    retainedReferenced: a.retainedReferenced + b.retainedReferenced,
    retainedYoung: a.retainedYoung + b.retainedYoung,
    retainedUnrecognised: a.retainedUnrecognised + b.retainedUnrecognised,
    unrecognisedKeys: [...a.unrecognisedKeys, ...b.unrecognisedKeys].slice(0, limit),
  };
}

/** A delete batch's fate: what it settled up to `upTo`, or the failure and what it deleted before it. */
type FlushOutcome =
  | { readonly upTo: string | undefined; readonly settled: ReclaimTally; readonly ended?: true }
  | { readonly error: unknown; readonly deleted: ReclaimTally };

/**
 * Walks a prefix this pass owns and deletes each staged segment that is old
 * enough and not referenced by the root, which is re-read before every delete batch (candidate
 * selection may be stale, deletion may not). The lease and unrecognised keys are never deleted here;
 * the lease of a claimed prefix, as this walk listed it, is recorded in its last batch's part, so
 * {@link deleteLease} after the walk writes no part of its own. A walk that holds a claim
 * (`why.claim`) refreshes it by CAS before a batch once it is a refresh interval old, stops with
 * {@link ClaimLostError} if another party took it, and ends, deleting nothing more, if the lease is
 * gone (its holder deleted it after a finished walk).
 * `onProgress` receives the position after every page, so a retried walk resumes there; the
 * position only moves past keys whose fate is settled. `awaitLastPart`: how the last batch, after
 * which the walk has nothing else to do, waits for its manifest part (in a page, out of its lane);
 * earlier batches wait for theirs while the walk lists on.
 *
 * The prefix is one listing in key order: resumed with `StartAfter`, continued with the listing's
 * own cursor. One batch is deleted while the next pages are listed, and batches settle in key order.
 * (Continuing by cursor lets MinIO stream one listing; a fresh `StartAfter` per page, or parallel
 * listings of key ranges, made it read the prefix's whole directory again for every page.) A
 * failure stops the walk at its next page; it then reports where it stands and rethrows.
 */
export async function reclaimPrefix(
  store: ObjectStore,
  job: JobRef,
  options: ReclaimOptions,
  walk: PrefixWalk,
): Promise<ReclaimTally> {
  const {
    codec,
    deletes = deleterOf(store, undefined),
    why = { rule: 'orphaned_prefix' },
    awaitLastPart,
    clockMs = Date.now,
  } = walk;
  const onProgress = walk.onProgress ?? (() => {});
  const resume = walk.from ?? START_OF_WALK;
  const lastDeletes = awaitLastPart ? deletes.awaitingPartsWith(awaitLastPart) : deletes;
  const prefix = jobPrefix(job.namespaceId, job.jobId);
  let claim = why.claim;
  let position = resume;
  let failure: { readonly error: unknown } | undefined;
  let claimEnded = false;

  const deleteBatch = async (
    batch: readonly ObjectInfo[],
    batchRetained: ReclaimTally,
    upTo: string | undefined,
    last: boolean,
    later: readonly Deletion[],
  ): Promise<FlushOutcome> => {
    const through = last ? lastDeletes : deletes;
    let deleted: ObjectInfo[] = [];
    try {
      let referencedCount = 0;
      // A claim is refreshed before a batch once it is a refresh interval old: a claim older than the expiry is another
      // pass's to take over.
      if (claim && clockMs() - claim.heartbeatAtMs >= options.leaseRefreshIntervalMs) {
        claim = await refreshClaim(store, job, options.passId, claim, clockMs);
        // The claim ended with its lease: the prefix was reclaimed, and this walk deletes nothing more.
        if (!claim) return { upTo, settled: batchRetained, ended: true };
      }
      if (batch.length) {
        // A missing root is no evidence that nothing is referenced: readRoot throws, and nothing is deleted.
        const root = atLeast(await readRoot(store, job.namespaceId, codec), walk.minRootGeneration);
        const doomed = batch.filter((o) => !isRetainedByRoot(root, o.key, options));
        referencedCount = batch.length - doomed.length;
        const read = { ...(why.lease && { lease: why.lease }), rootGeneration: root.generation };
        const { failed } = await through(
          doomed.map((object) => ({ object, rule: why.rule, read })),
          later,
        );
        const failedKeys = new Set(failed.map((f) => f.key));
        deleted = doomed.filter((o) => !failedKeys.has(o.key));
        if (failed.length) throw new DeleteFailedError(prefix, failed);
      } else if (later.length) await through([], later);
      return {
        upTo,
        settled: addTally(
          { ...batchRetained, retainedReferenced: referencedCount },
          deletionTally(deleted),
          options.reportLimit,
        ),
      };
    } catch (error) {
      return { error, deleted: deletionTally(deleted) };
    }
  };

  let inFlight: Promise<FlushOutcome> | undefined;
  /** Waits for the batch in flight and moves the position past it; a failed batch fails the walk. */
  const settle = async (): Promise<void> => {
    const outcome = await inFlight;
    inFlight = undefined;
    if (outcome === undefined) return;
    if ('error' in outcome) {
      // Deletions are counted now (those keys will not be listed again); the rest of the batch is walked again on
      // retry.
      position = { ...position, tally: addTally(position.tally, outcome.deleted, options.reportLimit) };
      failure ??= { error: outcome.error };
    } else {
      position = { after: outcome.upTo, tally: addTally(position.tally, outcome.settled, options.reportLimit) };
      claimEnded ||= outcome.ended === true;
    }
  };

  let listedUpTo = resume.after;
  let cursor: string | undefined;
  let candidates: ObjectInfo[] = [];
  /** The lease of a claimed prefix as this attempt listed it (a walk resumed past it records none). */
  let lease: ObjectInfo | undefined;
  let retained: Mutable<ReclaimTally> & { unrecognisedKeys: string[] } = { ...EMPTY_TALLY, unrecognisedKeys: [] };
  try {
    while (!failure) {
      const page = await store.list(cursor === undefined ? { prefix, startAfter: listedUpTo } : { prefix, cursor });
      for (const o of page.objects) {
        const parsed = parseCompactionKey(o.key);
        if (parsed.kind === 'lease' && parsed.jobId === job.jobId) {
          if (why.rule === 'claimed_prefix') lease = o;
          continue;
        }
        // Only a staged segment of this very job may go; anything else under the prefix is retained and reported.
        if (parsed.kind !== 'staged_segment' || parsed.jobId !== job.jobId || parsed.namespaceId !== job.namespaceId) {
          retained.retainedUnrecognised++;
          if (retained.unrecognisedKeys.length < options.reportLimit) retained.unrecognisedKeys.push(o.key);
        } else if (isOldEnough(o, options)) candidates.push(o);
        else retained.retainedYoung++;
      }
      listedUpTo = page.objects.at(-1)?.key ?? listedUpTo;
      cursor = page.nextCursor;
      const last = cursor === undefined;
      if (last || candidates.length >= options.keysPerFlush) {
        await settle();
        if (failure || claimEnded) break;
        inFlight = deleteBatch(
          candidates,
          retained,
          listedUpTo,
          last,
          last && lease ? [leaseDeletion(lease, why.lease)] : [],
        );
        candidates = [];
        retained = { ...EMPTY_TALLY, unrecognisedKeys: [] };
      }
      if (last) break;
      onProgress(position);
    }
  } catch (error) {
    failure ??= { error };
  }
  // A failed listing still settles the batch in flight: no delete outlives its walk.
  await settle();
  onProgress(position);
  if (failure) throw failure.error;
  return position.tally;
}

/**
 * `read`'s root, unless it is older than `minGeneration` (the root the pass judged): then it went back, and nothing is
 * decided by it.
 */
export function atLeast(read: ReadRoot, minGeneration: number | undefined): RootState {
  if (minGeneration !== undefined && read.root.generation < minGeneration)
    throw new RootWentBackError(read.root.namespace_id, read.root.generation, minGeneration);
  return read.root;
}

/** How one walk of a prefix runs: the root codec, where it resumes, whom it tells, how it deletes and what it holds. */
export interface PrefixWalk {
  readonly codec: RootCodec;
  /** Where a walk an earlier attempt started goes on (its tally counted on); the beginning of the prefix by default. */
  readonly from?: ReclaimPosition;
  /** Receives the position after every page, so a retried walk resumes there. */
  readonly onProgress?: (position: ReclaimPosition) => void;
  /** How batches are deleted and recorded; a deleter of its own (no manifest) by default. */
  readonly deletes?: Deleter;
  /** The rule its deletions are recorded under, and the claim it holds; an unowned prefix's by default. */
  readonly why?: PrefixRule;
  /** How the last batch, after which the walk has nothing else to do, waits for its manifest part. */
  readonly awaitLastPart?: PartWait;
  /** The wall clock a held claim is refreshed at. */
  readonly clockMs?: () => number;
  /**
   * The generation of the root the pass judged the namespace by: a batch re-reads the root, and an older one deletes
   * nothing ({@link RootWentBackError}).
   */
  readonly minRootGeneration?: number;
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
  ns: NamespaceId,
  jobIds: readonly MetadataCompactionId[],
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
