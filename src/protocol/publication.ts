/**
 * Publication (spec 5.4): each attempt reads the root its CAS will be conditional on, then refreshes
 * the lease, checks the inputs are still current, builds the new root (the inputs retired at the
 * heartbeat that refresh wrote, spec 6a.1), checks the budget and CASes the root. A CAS whose
 * answer was lost or refused may have landed, so before an attempt is judged (at the start of a
 * retried activity and after every failed CAS) the root is read to see whether it already holds this
 * job's publication; that read comes before the refresh, so nothing writes the lease after publication.
 */
import { setTimeout } from 'node:timers/promises';
import type { CompactionSettings } from '../config/settings';
import { TypedError } from '../errors';
import { leaseKey, rootKey, type FamilyGroup } from '../keys';
import { encodeRootForWrite, groupSegments, planPublication, rootIndex, type RootCodec, type RootState } from '../root';
import { AmbiguousError, ConflictError, PreconditionFailedError, type ObjectStore } from '../store';
import { LeaseLostError, refreshJobLease, type HeldLease } from './job-lease';
import { readLease, type JobRef } from './lease-read';
import { changeRoot, readRoot } from './root-io';

export type PublicationOutcome =
  | { readonly outcome: 'published'; readonly rootGeneration: number }
  | { readonly outcome: 'fenced'; readonly reason: string }
  | { readonly outcome: 'abandoned'; readonly missingInputs: readonly string[] }
  | { readonly outcome: 'superseded'; readonly lostRaces: number };

/**
 * The time since this attempt's refresh ran past the publication budget before the root CAS: the attempt published
 * nothing.
 */
export class PublicationBudgetExceededError extends TypedError {
  readonly failureType = 'PublicationBudgetExceeded';
}

export interface PublicationRequest extends JobRef {
  readonly group: FamilyGroup;
  readonly inputs: readonly string[];
  readonly outputs: readonly string[];
  /**
   * The job's staged tombstone segments (`CompactionOutputs.tombstones`): named beside the outputs
   * only when the group holds segments other than the inputs (see {@link publishedKeys}). Absent: none.
   */
  readonly tombstones?: readonly string[];
  /**
   * The highest seq of a tombstone in `tombstones` (`CompactionOutputs.tombstoneSeqFloor`); absent: unknown, and the
   * tombstone segments are always named.
   */
  readonly tombstoneSeqFloor?: number;
}

/**
 * The compactor returned no output and no tombstone segment for inputs that exist: publishing that would empty the
 * group.
 */
export class EmptyCompactionError extends TypedError {
  readonly failureType = 'EmptyCompaction';
}

export interface PublicationClock {
  /** Wall clock for the heartbeat written by the refresh. */
  readonly leaseClockMs: () => number;
  /** Monotonic clock for the budget. */
  readonly elapsedMs: () => number;
  /**
   * Waits between lost root races: a simulation's virtual time, or a timer.
   * @default node:timers/promises `setTimeout`
   */
  readonly sleep?: (ms: number) => Promise<void>;
  /**
   * Each wait's jitter, uniform in [0, 1): a simulation's seeded draws, or `Math.random`.
   * @default Math.random
   */
  readonly random?: () => number;
}

/** The waits between lost root races: exponential, with full jitter. */
export interface RaceBackoff {
  /** The most the first wait may be (`rootRaceBackoffMs`); each later one's most doubles. */
  readonly firstMs: number;
  /** The most any wait may be (`rootRaceBackoffMaxMs`). */
  readonly maxMs: number;
}

/** How a publication runs: its limits, its clocks and the root's codec. */
export interface PublicationOptions {
  /** The most time from an attempt's lease refresh to its root CAS being sent (`publicationBudgetMs`). */
  readonly budgetMs: number;
  /** Root races lost before the job ends `superseded` (`maxRootRaces`). */
  readonly maxRootRaces: number;
  readonly raceBackoff: RaceBackoff;
  readonly clock: PublicationClock;
  /** How the root is read and written: the worker's, as for every root read and write. */
  readonly codec: RootCodec;
}

/** A worker's publication limits, from its settings. */
export const publicationLimits = (
  s: Pick<CompactionSettings, 'timing' | 'maxRootRaces' | 'rootRaceBackoffMs' | 'rootRaceBackoffMaxMs'>,
): Pick<PublicationOptions, 'budgetMs' | 'maxRootRaces' | 'raceBackoff'> => ({
  budgetMs: s.timing.publicationBudgetMs,
  maxRootRaces: s.maxRootRaces,
  raceBackoff: { firstMs: s.rootRaceBackoffMs, maxMs: s.rootRaceBackoffMaxMs },
});

/** Every attempt first reads the root and asks whether an earlier one (a retried activity's too) already published. */
export async function publishCompaction(
  store: ObjectStore,
  request: PublicationRequest,
  options: PublicationOptions,
): Promise<PublicationOutcome> {
  const { clock, codec, ...limits } = options;
  // Inputs hold at least one record each, and every key's winner is in an output or a tombstone
  // segment: nothing at all means the compactor lost its work (e.g. progress it misread), and
  // publishing it would retire every input. Refused before anything is written; the group stays.
  if (request.inputs.length > 0 && request.outputs.length === 0 && !request.tombstones?.length) {
    throw new EmptyCompactionError(
      `job ${request.jobId} compacted ${request.inputs.length} input segments of group ${request.group} (namespace ${request.namespaceId}) into no output and no tombstone segment: nothing is published; check the compactor and its progress, then start the compaction again`,
    );
  }
  // The ids are checked before any request: a raw id cast to a brand fails here (InvalidKeyError).
  leaseKey(request.namespaceId, request.jobId);
  // Every root this activity sent by CAS: with no outputs, the only evidence that one landed.
  const sent: RootState[] = [];
  const { sleep = setTimeout, random = Math.random } = clock;
  for (let race = 0; ; race++) {
    // The losers of one CAS would all read the root again at once and race again: each waits a random
    // time first, so the next round's reads spread out. Before the read, so the budget (counted from
    // the refresh) does not spend it; the last lost race only reads whether its CAS landed after all.
    if (race > 0 && race < limits.maxRootRaces) await sleep(raceDelayMs(limits.raceBackoff, race, random));
    // WARN: the root the CAS is conditional on is read before the refresh. A claim of the lease comes
    // after a refresh that succeeded, and the collector fences the root after its claim and before it
    // deletes anything (spec 6b), so a CAS on a root read before the refresh fails its precondition
    // however late it arrives; read after the refresh, it could be read after the fence.
    const current = await readRoot(store, request.namespaceId, codec);
    // An earlier round's CAS, or an earlier activity attempt's, may have landed; judged before the
    // refresh, so nothing writes the lease after publication.
    if (holdsPublication(current.root, request, sent, codec))
      return { outcome: 'published', rootGeneration: current.root.generation };
    // Checked after the read: the last race's CAS may have landed too.
    if (race === limits.maxRootRaces) return { outcome: 'superseded', lostRaces: race };
    const read = await readLease(store, request);
    if ('missing' in read) return { outcome: 'fenced', reason: 'the lease is gone' };
    if ('corrupt' in read) return { outcome: 'fenced', reason: read.corrupt };
    if (read.lease.status === 'reaping') return { outcome: 'fenced', reason: 'a collector claimed the lease' };
    // The budget runs from before the refresh is sent: it bounds the work an attempt can waste on a
    // lease that may expire, not the safety of the CAS (the order above gives that).
    const refreshSentAt = clock.elapsedMs();
    let held: HeldLease;
    try {
      held = await refreshJobLease(store, request, read, clock.leaseClockMs);
    } catch (err) {
      if (err instanceof LeaseLostError) return { outcome: 'fenced', reason: err.reason };
      throw err;
    }
    // The inputs retire at this attempt's lease clock (spec 6a.1): the heartbeat the refresh wrote.
    // WARN: which keys to name is decided on the root the CAS below is conditional on: a segment
    // registered after this read fails the CAS, and the next round decides again.
    const published = publishedKeys(current.root, request);
    const plan = planPublication(current.root, {
      group: request.group,
      inputs: request.inputs,
      outputs: published.keys,
      retiredAtMs: held.lease.heartbeat_at_ms,
      seqFloor: published.seqFloor,
    });
    if (plan.kind === 'abandoned') return { outcome: 'abandoned', missingInputs: plan.missingInputs };
    // Encoded before the budget is checked, which then counts it. A root readers would refuse is never
    // written: the job fails (RootTooLarge), its outputs left to the collector.
    const bytes = encodeRootForWrite(codec, plan.root);
    const spent = clock.elapsedMs() - refreshSentAt;
    if (spent > limits.budgetMs) {
      throw new PublicationBudgetExceededError(
        `${spent.toFixed(0)} ms since the refresh exceeds the publication budget of ${limits.budgetMs} ms`,
      );
    }
    sent.push(plan.root);
    try {
      await store.putIfMatch(rootKey(request.namespaceId), bytes, current.etag);
      return { outcome: 'published', rootGeneration: plan.root.generation };
    } catch (err) {
      // A lost race, or our own write answered late: 412 is what the SDK's retry meets after a lost
      // response, and an unknown outcome may have landed. The next round reads the root first.
      if (!(err instanceof AmbiguousError || err instanceof PreconditionFailedError || err instanceof ConflictError))
        throw err;
    }
  }
}

/**
 * The wait after `lost` root races (from 1): full jitter, uniform up to `firstMs` × 2^(lost − 1) and
 * never more than `maxMs`, so `n` losers spread over a window that grows until they fit in it.
 */
export const raceDelayMs = (backoff: RaceBackoff, lost: number, random: () => number): number =>
  Math.floor(random() * Math.min(backoff.maxMs, backoff.firstMs * 2 ** (lost - 1)));

/** What a settled publication came to: the root names it, or it is certain never to. */
export type SettledPublication =
  | { readonly outcome: 'published'; readonly rootGeneration: number }
  | { readonly outcome: 'unpublished'; readonly rootGeneration: number };

/** Rounds of the settling CAS against other writers; each lost one is re-read and decided again. */
const MAX_SETTLE_ROUNDS = 10;

/**
 * Settles a publication whose attempts are spent (its activity timed out, the store failed it): a
 * CAS of it may still be in flight, held in a proxy or a paused process, and land later. Either the
 * root names it (published), or this write lands first: the root with its generation + 1 and nothing
 * else, so every CAS the job sent before fails its precondition however late it arrives, and the job
 * is certain to have published nothing. So a run never ends failed beside a root that names its
 * outputs. Throws when the store does not answer (then nothing is certain).
 */
export async function settlePublication(
  store: ObjectStore,
  request: JobRef & Pick<PublicationRequest, 'group' | 'inputs' | 'outputs' | 'tombstones'>,
  codec: RootCodec,
): Promise<SettledPublication> {
  const settled = await changeRoot(
    store,
    request.namespaceId,
    ({ root }) =>
      holdsPublication(root, request, [], codec)
        ? undefined
        : Object.freeze({ ...root, generation: root.generation + 1 }),
    { codec, maxRounds: MAX_SETTLE_ROUNDS },
  );
  if (!settled)
    throw new AmbiguousError(
      rootKey(request.namespaceId),
      `the root changed in each of ${MAX_SETTLE_ROUNDS} rounds while job ${request.jobId} settled its publication`,
    );
  return { outcome: settled.written ? 'unpublished' : 'published', rootGeneration: settled.root.generation };
}

/**
 * The outcome of a publication attempt that found its job's input list gone. Only a collector
 * deletes it, and only under a prefix it claimed (an expired lease) or found with no lease: so the
 * job is fenced, unless an earlier attempt's CAS landed before the collector came (a retry after a
 * lost reply or a long stall), which the root shows by naming every output, or every tombstone
 * segment. Nothing is written; with neither named nothing proves a publication, and a fenced job
 * only runs again.
 */
export async function publicationOfReclaimedJob(
  store: ObjectStore,
  request: JobRef & Pick<PublicationRequest, 'outputs' | 'tombstones'>,
  codec: RootCodec,
): Promise<PublicationOutcome> {
  const { root } = await readRoot(store, request.namespaceId, codec);
  const { referenced } = rootIndex(root);
  const named = request.outputs.length > 0 ? request.outputs : (request.tombstones ?? []);
  if (named.length > 0 && named.every((k) => referenced.has(k)))
    return { outcome: 'published', rootGeneration: root.generation };
  return { outcome: 'fenced', reason: "the job's input list is gone: a collector reclaimed its prefix" };
}

/**
 * The keys that replace the inputs in `root`, so that a reader's view of the group (the newest
 * record of each key, tombstones applied) is the same before and after the publication, and stays so
 * whatever is registered after it. The outputs hold no tombstone; that is exact only while the group
 * is the inputs alone. A segment registered since the job read the group may hold an older version of
 * a key the inputs deleted, so then the job's tombstone segments are named too, and keep deleting it.
 * Left out, the winning tombstones raise the group's sequence floor to the highest of them (`seqFloor`,
 * spec 6c.3), so no older version registered later can come back; when the compactor did not say how
 * high they go, the tombstone segments are named all the same.
 */
export function publishedKeys(
  root: RootState,
  request: PublicationRequest,
): { readonly keys: readonly string[]; readonly seqFloor?: number } {
  const inputs = new Set(request.inputs);
  const tombstones = request.tombstones ?? [];
  const late = groupSegments(root, request.group).some((k) => !inputs.has(k));
  if (late || (tombstones.length > 0 && request.tombstoneSeqFloor === undefined))
    return { keys: [...request.outputs, ...tombstones] };
  return { keys: request.outputs, ...(tombstones.length > 0 && { seqFloor: request.tombstoneSeqFloor }) };
}

/**
 * Whether `root` holds this job's publication. Output and tombstone segment keys live under the
 * job's prefix and only this job publishes them, so a group naming every output (or, with no
 * outputs, every tombstone segment) was written by this job's CAS. With neither named (every record
 * was a tombstone, and nothing was registered during the job) nothing in the root names the job:
 * only a root equal, byte for byte and generation included, to one this activity sent shows the
 * CAS landed (or a writer made exactly the same change). Anything else is not proof, and a
 * publication is never assumed.
 */
function holdsPublication(
  root: RootState,
  request: Pick<PublicationRequest, 'group' | 'outputs' | 'tombstones'>,
  sent: readonly RootState[],
  codec: RootCodec,
): boolean {
  const current = new Set(groupSegments(root, request.group));
  if (request.outputs.length > 0) return request.outputs.every((k) => current.has(k));
  const tombstones = request.tombstones ?? [];
  if (tombstones.length > 0 && tombstones.every((k) => current.has(k))) return true;
  const bytes = Buffer.from(codec.encode(root));
  return sent.some((candidate) => bytes.equals(codec.encode(candidate)));
}
