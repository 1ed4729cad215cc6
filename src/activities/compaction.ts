/**
 * The compaction job's activities: thin translations between Temporal (heartbeats, cancellation,
 * typed failures) and the protocol and compactor modules. A group's inputs travel in its input
 * list, under the job's prefix: the activities pass its reference, never the key list.
 */
import { Context } from '@temporalio/activity';
import { TemporalFailure } from '@temporalio/common';
import {
  MAX_RECURRING_ATTEMPTS,
  nextStreak,
  RecurringFailureError,
  type Compactor,
  type FailureStreak,
} from '../compactor';
import { runCompactionAttempt } from '../compactor/attempt';
import { checkInputs } from '../compactor/inputs';
import { heartbeatEveryMs, type CompactionSettings } from '../config';
import { firstLineOf, TypedError } from '../errors';
import { familyGroup, jobId, namespaceId, type FamilyGroup } from '../keys';
import { groupSegments, type RootCodec } from '../root';
import {
  createJobLease,
  publicationOfReclaimedJob,
  publicationLimits,
  publishCompaction,
  settlePublication,
  readInputListIfAny,
  readInputListUnderLease,
  readRoot,
  stopwatch,
  writeInputList,
  type HeldLease,
  type InputList,
  type InputListRef,
  type JobRef,
  type PublicationOutcome,
  type SettledPublication,
} from '../protocol';
import { storeIdentity, type ObjectStore } from '../store';
import { beatsAfterFirstInterval } from './beats';
import { attemptClock, keepLease } from './lease-keeper';
import { recordFence } from './metrics';
import type { StoreBound } from './store-binding';

export interface CompactionDeps {
  readonly store: ObjectStore;
  readonly settings: CompactionSettings;
  /** What `compactUnderLease` runs: the segment format's plug-in. */
  readonly compactor: Compactor;
  /** How the root is read and written, by publication and the collector alike; no default, so no path can forget it. */
  readonly rootCodec: RootCodec;
}

export interface JobInput extends StoreBound {
  readonly namespaceId: string;
  readonly jobId: string;
}

/**
 * What the workflow needs to know of the worker's settings; read once through a local activity, so replay sees the same
 * values.
 */
export interface WorkflowSettings {
  readonly ownerId: string;
  readonly heartbeatTimeoutMs: number;
  readonly leaseRefreshIntervalMs: number;
  readonly leaseExpiryMs: number;
  readonly publicationTimeoutMs: number;
  readonly operationDeadlineMs: number;
  readonly maxFencedRuns: number;
  /** The worker's store ({@link storeIdentity}): a run started without naming one works on it. */
  readonly store: string;
}

/** A job whose inputs `readGroup` fixed in its input list. */
export interface ListedJobInput extends JobInput {
  readonly inputList: InputListRef;
}

export interface CompactionOutput {
  readonly outputs: string[];
  /** The compactor's tombstone segments. */
  readonly tombstones: string[];
  /** The highest seq of a tombstone in them, when the compactor said (`CompactionOutputs.tombstoneSeqFloor`). */
  readonly tombstoneSeqFloor?: number;
  readonly progress: { readonly recordsOut: number; readonly bytesOut: number };
}

/**
 * The heartbeat details of the `compactUnderLease` activity: the lease as last held and the work's progress, one stream
 * for both.
 */
export interface LeasedProgress {
  readonly held: HeldLease;
  /** The compactor's own position (plain JSON), undefined before its first heartbeat. */
  readonly progress: unknown;
  /** How the latest attempts failed, while no progress was made since: the same error too often ends the job. */
  readonly recurring?: FailureStreak;
}

export interface LeasedCompactionOutput extends CompactionOutput {
  /** When the work returned, on the worker's wall clock: the keeper-stop bound is measured from it. */
  readonly workEndedAtMs: number;
}

/** How many of the inputs no longer current an abandoned publication names. */
const NAMED_MISSING_INPUTS = 10;

const job = (input: JobInput): JobRef => ({ namespaceId: namespaceId(input.namespaceId), jobId: jobId(input.jobId) });

export function createCompactionActivities(deps: CompactionDeps) {
  const { store, settings } = deps;
  const { timing } = settings;
  return {
    async compactionSettings(): Promise<WorkflowSettings> {
      return {
        ownerId: settings.ownerId,
        heartbeatTimeoutMs: settings.heartbeatTimeoutMs,
        leaseRefreshIntervalMs: timing.leaseRefreshIntervalMs,
        leaseExpiryMs: timing.leaseExpiryMs,
        publicationTimeoutMs: timing.publicationBudgetMs + 4 * timing.operationDeadlineMs,
        operationDeadlineMs: timing.operationDeadlineMs,
        maxFencedRuns: settings.maxFencedRuns,
        store: await storeIdentity(store),
      };
    },

    /**
     * The group's current segments: the job's inputs, fixed and checked (each once, present, not too
     * large) before its lease exists, with the ETag of each, which every later read of it must match.
     * They go to the job's input list; undefined when the group has none (nothing is written).
     */
    async readGroup(input: JobInput & { group: string }): Promise<InputListRef | undefined> {
      return fixGroupInputs(deps, input);
    },

    async createLease(input: JobInput & { ownerId: string; startedAtMs: number }): Promise<HeldLease> {
      return createJobLease(store, { ...job(input), ownerId: input.ownerId, startedAtMs: input.startedAtMs });
    },

    /**
     * The job's work and its lease keeper in one attempt: one activity slot and one heartbeat stream
     * per job ({@link LeasedProgress}), so a retried attempt adopts the lease and resumes the work from
     * the same details. The keeper stops here when the work returns, once no refresh is in flight:
     * nothing writes the lease after the attempt ends (the publication's refresh is the next write).
     */
    async compactUnderLease(input: ListedJobInput & { held: HeldLease }): Promise<LeasedCompactionOutput> {
      const ref = job(input);
      return compactBesideKeeper(deps, ref, await readInputListUnderLease(store, ref, input.inputList), input.held);
    },

    /**
     * After the publication's attempts are spent: whether the root names this job's publication (a
     * CAS of it landed late), or, by a root write that fences every CAS the job sent, that it never will.
     */
    async settlePublication(
      input: JobInput & { group: string; outputs: string[]; tombstones: string[] },
    ): Promise<SettledPublication> {
      return settlePublication(
        store,
        {
          ...job(input),
          group: familyGroup(input.group),
          inputs: [],
          outputs: input.outputs,
          tombstones: input.tombstones,
        },
        deps.rootCodec,
      );
    },

    async publish(input: PublishInput): Promise<PublicationOutcome> {
      return publishJob(deps, input);
    },
  };
}

export type CompactionActivities = ReturnType<typeof createCompactionActivities>;

/** The `readGroup` activity: the group's segments from one root read, checked, in an input list of this attempt. */
async function fixGroupInputs(
  { store, settings, rootCodec }: CompactionDeps,
  input: JobInput & { group: string },
): Promise<InputListRef | undefined> {
  const { root } = await readRoot(store, namespaceId(input.namespaceId), rootCodec);
  const named = groupSegments(root, familyGroup(input.group));
  // A segment named twice (a writer that registered it again) is one input: merged once, and
  // publication replaces every mention of it. Refusing it would hold the group for good.
  const inputs = [...new Set(named)];
  if (inputs.length < named.length) {
    const twice = named.filter((key, i) => named.indexOf(key) !== i);
    Context.current().log.warn(
      `group ${input.group} of ${input.namespaceId} names ${twice.length} segment(s) more than once, compacted once each: ${twice.slice(0, 3).join(', ')}`,
    );
  }
  const etags = await checkInputs(store, input.group, inputs, settings.maxInputSegmentBytes);
  if (inputs.length === 0) return undefined;
  return writeInputList(store, job(input), Context.current().info.attempt, {
    group: input.group,
    inputs,
    etags,
  });
}

/** What the `publish` activity is given: the job, its input list, and what its work staged. */
type PublishInput = ListedJobInput & { outputs: string[]; tombstones: string[]; tombstoneSeqFloor?: number };

/** The `publish` activity: by CAS, or, the job's input list reclaimed, the outcome the root shows. */
async function publishJob(
  { store, settings, rootCodec }: CompactionDeps,
  input: PublishInput,
): Promise<PublicationOutcome> {
  const elapsedMs = stopwatch();
  const ref = job(input);
  const list = await readInputListIfAny(store, ref, input.inputList);
  const outcome = list
    ? await publishCompaction(
        store,
        {
          ...ref,
          group: familyGroup(list.group) as FamilyGroup,
          inputs: list.inputs,
          outputs: input.outputs,
          tombstones: input.tombstones,
          ...(input.tombstoneSeqFloor !== undefined && { tombstoneSeqFloor: input.tombstoneSeqFloor }),
        },
        {
          ...publicationLimits(settings),
          clock: { leaseClockMs: attemptClock(), elapsedMs },
          codec: rootCodec,
        },
      )
    : await publicationOfReclaimedJob(
        store,
        { ...ref, outputs: input.outputs, tombstones: input.tombstones },
        rootCodec,
      );
  if (outcome.outcome === 'fenced') recordFence();
  // The inputs no longer current may be the whole group: a few name the case, the rest are in the input list.
  return outcome.outcome === 'abandoned'
    ? { ...outcome, missingInputs: outcome.missingInputs.slice(0, NAMED_MISSING_INPUTS) }
    : outcome;
}

/**
 * The work beside its keeper, in the current activity attempt. A failed refresh is retried while the
 * work goes on; a lost lease or the attempt's cancellation ends the work at its next record batch,
 * and the attempt fails with the keeper's reason.
 */
async function compactBesideKeeper(
  deps: CompactionDeps,
  ref: JobRef,
  inputs: InputList,
  from: HeldLease,
): Promise<LeasedCompactionOutput> {
  const ctx = Context.current();
  const resumed = ctx.info.heartbeatDetails as LeasedProgress | undefined;
  let held = resumed?.held ?? from;
  let progress = resumed?.progress;
  let recurring = resumed?.recurring;
  const resumedAt = JSON.stringify(progress);
  // Every beat carries the latest of all three; the worker's heartbeat throttle sends at most one per beat interval.
  const beats = beatsAfterFirstInterval(
    () => ctx.heartbeat({ held, progress, recurring } satisfies LeasedProgress),
    heartbeatEveryMs(deps.settings),
  );
  const beat = beats.beat;
  /**
   * The work's failure, or {@link RecurringFailureError} when an untyped error (a typed one decided
   * its own retryability) ended this attempt as it ended the ones before, with no progress since.
   * Otherwise the streak goes into the failure's last heartbeat, which the next attempt resumes from.
   */
  const endIfRecurring = (err: unknown): unknown => {
    if (!(err instanceof Error) || err instanceof TypedError || err instanceof TemporalFailure) return err;
    recurring = nextStreak(recurring, `${err.name}: ${firstLineOf(err)}`);
    if (recurring.attempts >= MAX_RECURRING_ATTEMPTS) return new RecurringFailureError(ref, recurring);
    beats.now();
    return err;
  };
  const workEnded = new AbortController();
  const keeperEnded = new AbortController();
  const keeping = keepLease(
    ctx,
    { store: deps.store, settings: deps.settings, ref, from: held },
    {
      stop: workEnded.signal,
      beat: (h) => {
        held = h;
        beat();
      },
    },
  ).catch((err: unknown) => {
    keeperEnded.abort(err);
    throw err;
  });
  let workEndedAtMs = 0;
  const working = runCompactionAttempt({
    store: deps.store,
    compactor: deps.compactor,
    job: ref,
    input: inputs,
    limits: deps.settings,
    resume: progress,
    heartbeat: (p) => {
      if (p !== undefined) progress = p;
      if (recurring && JSON.stringify(progress) !== resumedAt) recurring = undefined;
      beat();
      if (keeperEnded.signal.aborted) throw keeperEnded.signal.reason;
    },
  }).finally(() => {
    workEndedAtMs = Date.now();
    workEnded.abort();
  });
  const [worked, kept] = await Promise.allSettled([working, keeping]);
  beats.end(worked.status === 'rejected' || kept.status === 'rejected');
  // The keeper's failure comes first: the work's, if any, followed from it.
  if (kept.status === 'rejected') throw kept.reason;
  if (worked.status === 'rejected') throw endIfRecurring(worked.reason);
  const { outputs, tombstones = [], tombstoneSeqFloor, recordsOut, bytesOut } = worked.value;
  const floor = tombstoneSeqFloor === undefined ? {} : { tombstoneSeqFloor };
  return {
    outputs: [...outputs],
    tombstones: [...tombstones],
    ...floor,
    progress: { recordsOut, bytesOut },
    workEndedAtMs,
  };
}
