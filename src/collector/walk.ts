/**
 * The walk of a job prefix this pass owns (spec section 6): delete each staged segment that is old
 * enough and that the root, re-read before every batch, does not protect; refresh the claim while
 * it lasts. Decisions are made at the pass's fixed clock.
 */
import { jobPrefix, parseCompactionKey } from '../keys';
import type { RootCodec } from '../root';
import type { ObjectInfo, ObjectStore } from '../store';
import { readRoot } from '../protocol/root-io';
import type { JobRef } from '../protocol/lease-read';
import { leaseDeletion, refreshClaim, type HeldClaim } from './claim';
import {
  DeleteFailedError,
  deleterOf,
  type Deleter,
  type Deletion,
  type DeletionRule,
  type LeaseFacts,
  type PartWait,
} from './manifest';
import { isRetainedByRoot } from './retired';
import { EMPTY_WALK_COUNTS, type WalkCounts } from './report';
import { atLeast } from './root-problem';
import type { ReclaimOptions } from './rules';

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
export interface ReclaimTally extends WalkCounts {
  readonly objectsDeleted: number;
}

export const EMPTY_TALLY: ReclaimTally = Object.freeze({ ...EMPTY_WALK_COUNTS, objectsDeleted: 0 });

/** Where a walk stands: every key up to `after` is settled and counted in `tally`. Travels in Temporal heartbeats. */
export interface ReclaimPosition {
  readonly after: string | undefined;
  readonly tally: ReclaimTally;
}

export const START_OF_WALK: ReclaimPosition = Object.freeze({ after: undefined, tally: EMPTY_TALLY });

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
  const walker = walkerOf(store, job, options, walk);
  const { why } = walker;
  const onProgress = walk.onProgress ?? (() => {});
  const resume = walk.from ?? START_OF_WALK;
  const prefix = jobPrefix(job.namespaceId, job.jobId);
  let position = resume;
  let failure: { readonly error: unknown } | undefined;
  let claimEnded = false;
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
  let retained = emptyRetained();
  try {
    while (!failure) {
      const page = await store.list(cursor === undefined ? { prefix, startAfter: listedUpTo } : { prefix, cursor });
      for (const o of page.objects) {
        const fate = listedFate(o, job, options);
        if (fate === 'lease' && why.rule === 'claimed_prefix') lease = o;
        else if (fate === 'candidate') candidates.push(o);
        else if (fate === 'young') retained.retainedYoung++;
        else if (fate === 'unrecognised') {
          retained.retainedUnrecognised++;
          if (retained.unrecognisedKeys.length < options.reportLimit) retained.unrecognisedKeys.push(o.key);
        }
      }
      listedUpTo = page.objects.at(-1)?.key ?? listedUpTo;
      cursor = page.nextCursor;
      const last = cursor === undefined;
      if (last || candidates.length >= options.keysPerFlush) {
        await settle();
        if (failure || claimEnded) break;
        const later = last && lease ? [leaseDeletion(lease, why.lease)] : [];
        inFlight = deleteBatch(walker, { candidates, retained, upTo: listedUpTo, last, later });
        candidates = [];
        retained = emptyRetained();
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

/** What one walk works with, and the claim it holds, which its batches refresh. */
interface Walker {
  readonly store: ObjectStore;
  readonly job: JobRef;
  readonly options: ReclaimOptions;
  readonly why: PrefixRule;
  readonly codec: RootCodec;
  readonly clockMs: () => number;
  readonly minRootGeneration: number | undefined;
  readonly deletes: Deleter;
  /** How the last batch deletes: waiting for its part as the walk says (in a page, out of its lane). */
  readonly lastDeletes: Deleter;
  claim: HeldClaim | undefined;
}

function walkerOf(store: ObjectStore, job: JobRef, options: ReclaimOptions, walk: PrefixWalk): Walker {
  const { deletes = deleterOf(store, undefined), why = { rule: 'orphaned_prefix' }, awaitLastPart } = walk;
  return {
    store,
    job,
    options,
    why,
    codec: walk.codec,
    clockMs: walk.clockMs ?? Date.now,
    minRootGeneration: walk.minRootGeneration,
    deletes,
    lastDeletes: awaitLastPart ? deletes.awaitingPartsWith(awaitLastPart) : deletes,
    claim: why.claim,
  };
}

/** One delete batch of a walk: its candidates, what its pages retained, how far it settles the walk. */
interface Batch {
  readonly candidates: readonly ObjectInfo[];
  readonly retained: ReclaimTally;
  readonly upTo: string | undefined;
  /** The walk's last batch: nothing else to do meanwhile. */
  readonly last: boolean;
  /** Recorded in the batch's part, deleted later (the prefix's lease). */
  readonly later: readonly Deletion[];
}

const emptyRetained = (): Mutable<ReclaimTally> & { unrecognisedKeys: string[] } => ({
  ...EMPTY_TALLY,
  unrecognisedKeys: [],
});

/**
 * What the walk does with a listed object: the prefix's own lease, a delete candidate, or retained as young or
 * unrecognised. Only a staged segment of this very job may go; anything else under the prefix is retained and reported.
 */
function listedFate(
  o: ObjectInfo,
  job: JobRef,
  options: ReclaimOptions,
): 'lease' | 'candidate' | 'young' | 'unrecognised' {
  const parsed = parseCompactionKey(o.key);
  if (parsed.kind === 'lease' && parsed.jobId === job.jobId) return 'lease';
  if (parsed.kind !== 'staged_segment' || parsed.jobId !== job.jobId || parsed.namespaceId !== job.namespaceId)
    return 'unrecognised';
  return isOldEnough(o, options) ? 'candidate' : 'young';
}

/**
 * Deletes a batch of the walk: refreshes the claim first once it is a refresh interval old (a claim older than the
 * expiry is another pass's to take over), re-reads the root, and deletes the candidates it does not protect.
 */
async function deleteBatch(walker: Walker, batch: Batch): Promise<FlushOutcome> {
  const { store, job, options, why, clockMs } = walker;
  const { candidates, retained, upTo, last, later } = batch;
  const through = last ? walker.lastDeletes : walker.deletes;
  let deleted: ObjectInfo[] = [];
  try {
    let referencedCount = 0;
    if (walker.claim && clockMs() - walker.claim.heartbeatAtMs >= options.leaseRefreshIntervalMs) {
      walker.claim = await refreshClaim(store, job, walker.claim, { passId: options.passId, clockMs });
      // The claim ended with its lease: the prefix was reclaimed, and this walk deletes nothing more.
      if (!walker.claim) return { upTo, settled: retained, ended: true };
    }
    if (candidates.length) {
      // A missing root is no evidence that nothing is referenced: readRoot throws, and nothing is deleted.
      const root = atLeast(await readRoot(store, job.namespaceId, walker.codec), walker.minRootGeneration);
      const doomed = candidates.filter((o) => !isRetainedByRoot(root, o.key, options));
      referencedCount = candidates.length - doomed.length;
      const read = { ...(why.lease && { lease: why.lease }), rootGeneration: root.generation };
      const { failed } = await through(
        doomed.map((object) => ({ object, rule: why.rule, read })),
        later,
      );
      const failedKeys = new Set(failed.map((f) => f.key));
      deleted = doomed.filter((o) => !failedKeys.has(o.key));
      if (failed.length) throw new DeleteFailedError(jobPrefix(job.namespaceId, job.jobId), failed);
    } else if (later.length) await through([], later);
    const settled = { ...retained, retainedReferenced: referencedCount };
    return { upTo, settled: addTally(settled, deletionTally(deleted), options.reportLimit) };
  } catch (error) {
    return { error, deleted: deletionTally(deleted) };
  }
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
