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
