/**
 * The compaction job's activities: thin translations between Temporal (heartbeats, cancellation,
 * typed failures) and the protocol and compactor modules.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { Context } from '@temporalio/activity';
import { recordFence, recordRefresh } from './metrics';
import { ApplicationFailure, TemporalFailure } from '@temporalio/common';
import { attemptWrites, checkOutputsExist, checkStagedKeys, MAX_RECURRING_ATTEMPTS, nextStreak, RecurringFailureError, referenceCompactor, withCheckedProgress, type CompactionOutputs, type Compactor, type FailureStreak } from '../compactor';
import { asInputError, checkInputs, pinnedInputs } from '../compactor/inputs';
import { heartbeatEveryMs, type CompactionSettings } from '../config';
import { ACTIVITY_BACKOFF, backoffDelayMs } from '../config/retry';
import { firstLineOf, TypedError } from '../errors';
import { familyGroup, jobId, leaseKey, namespaceId, type FamilyGroup, type MetadataCompactionId, type NamespaceId } from '../keys';
import { groupSegments, type RootCodec } from '../root';
import {
  createJobLease,
  LeaseLostError,
  publishCompaction,
  readRoot,
  refreshJobLease,
  type HeldLease,
  type PublicationOutcome,
} from '../protocol';
import type { ObjectStore } from '../store';
import { attemptStore } from '../store/attempt';

export interface CompactionDeps {
  readonly store: ObjectStore;
  readonly settings: CompactionSettings;
  /** What `compactUnderLease` runs: the segment format's plug-in. */
  readonly compactor: Compactor;
  /** How the root is read and written, by publication and the collector alike; no default, so no path can forget it. */
  readonly rootCodec: RootCodec;
}

export interface JobInput {
  readonly namespaceId: string;
  readonly jobId: string;
}

/** What the workflow needs to know of the worker's settings; read once through a local activity, so replay sees the same values. */
export interface WorkflowSettings {
  readonly ownerId: string;
  readonly heartbeatTimeoutMs: number;
  readonly leaseRefreshIntervalMs: number;
  readonly leaseExpiryMs: number;
  readonly publicationTimeoutMs: number;
  readonly operationDeadlineMs: number;
  readonly maxFencedRuns: number;
}

/** A job's inputs as `readGroup` fixed them. */
export interface PinnedGroup {
  readonly group: string;
  readonly inputs: string[];
  /** The ETag of each input when the group was read, in the order of `inputs`. */
  readonly etags: string[];
}

export interface CompactionOutput {
  readonly outputs: string[];
  /** The compactor's tombstone segments. */
  readonly tombstones: string[];
  /** Named `progress` since the first histories: their recorded results hold these two counts under it. */
  readonly progress: { readonly recordsOut: number; readonly bytesOut: number };
}

const job = (input: JobInput): { namespaceId: NamespaceId; jobId: MetadataCompactionId } => ({
  namespaceId: namespaceId(input.namespaceId),
  jobId: jobId(input.jobId),
});

/** A clock that cannot jump backwards within an attempt: the wall clock at its start plus monotonic elapsed time. */
function attemptClock(): () => number {
  const wallAtStart = Date.now();
  const monotonicAtStart = performance.now();
  return () => wallAtStart + (performance.now() - monotonicAtStart);
}

/** The heartbeat details of {@link compactUnderLease}: the lease as last held and the work's progress, one stream for both. */
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

/**
 * Sleeps `ms`, ending early when `stop` aborts (resolves) or the activity is cancelled (rejects with
 * the activity's CancelledFailure, as `Context.sleep` does).
 */
async function sleepUnless(ctx: Context, ms: number, stop: AbortSignal): Promise<void> {
  try {
    await sleep(ms, undefined, { signal: AbortSignal.any([stop, ctx.cancellationSignal]) });
  } catch (err) {
    if (ctx.cancellationSignal.aborted) throw ctx.cancellationSignal.reason;
    if (!stop.aborted) throw err;
  }
}

interface KeeperHooks {
  /** Aborted when the work has ended: the keeper returns at its next look, which is never during a refresh. */
  readonly stop: AbortSignal;
  /** Puts the lease as now held into the attempt's heartbeat details. */
  readonly beat: (held: HeldLease) => void;
}

export function createCompactionActivities({ store, settings, compactor, rootCodec }: CompactionDeps) {
  const { timing } = settings;
  const beatEveryMs = heartbeatEveryMs(settings);
  const troubleBeatMs = settings.heartbeatTimeoutMs / 3;

  /**
   * Refreshes the lease by CAS until `stop`, each refresh due one interval after the heartbeat last
   * written. A retried attempt starts from the lease its predecessor left in heartbeat details and
   * refreshes at once when that heartbeat is already an interval old (its predecessor died before
   * refreshing): waiting a full interval from its own start would leave the lease unrefreshed for up
   * to two intervals plus the heartbeat timeout. While a refresh is in flight or failing, the keeper
   * beats every third of the heartbeat timeout: a store in trouble must not time out a healthy
   * attempt and leave it running as a zombie beside its retry. A failing refresh that could no longer
   * be sent a deadline before the lease expires ends the attempt as a lost lease.
   */
  async function keepLease(ctx: Context, ref: ReturnType<typeof job>, from: HeldLease, { stop, beat }: KeeperHooks): Promise<void> {
    let held = from;
    const clock = attemptClock();
    // When the held heartbeat was written, on this attempt's clock: never later than now, since an
    // earlier attempt's host clock may run ahead of ours (that would only postpone the refresh).
    let beatAtMs = Math.min(held.lease.heartbeat_at_ms, clock());
    let lastBeatMs = 0;
    const record = () => {
      beat(held);
      lastBeatMs = clock();
    };
    /** Waits until `untilMs` on the attempt's clock (or the stop), beating every `everyMs` meanwhile. */
    const waitBeating = async (untilMs: number, everyMs: number) => {
      while (clock() < untilMs && !stop.aborted) {
        const beatDue = lastBeatMs + everyMs;
        await sleepUnless(ctx, Math.max(0, Math.min(beatDue, untilMs) - clock()), stop);
        if (clock() >= beatDue) record();
      }
    };
    /** `refresh`, beating every third of the heartbeat timeout until it settles: one can take a deadline per request. */
    const beatingDuring = async <T>(refresh: Promise<T>): Promise<T> => {
      const timer = setInterval(record, troubleBeatMs);
      try {
        return await refresh;
      } finally {
        clearInterval(timer);
      }
    };
    record();
    // The stop is looked at only between refreshes: a stopped keeper has no refresh in flight
    // once it returns, so none can land beside the publication's own.
    for (let failures = 0; ; ) {
      // Between refreshes the keeper beats only as often as its heartbeat timeout needs (at the default timeout, never).
      await waitBeating(beatAtMs + timing.leaseRefreshIntervalMs, beatEveryMs);
      if (stop.aborted) return;
      const started = performance.now();
      const sentAtMs = clock();
      try {
        held = await beatingDuring(refreshJobLease(store, ref, held, clock));
      } catch (err) {
        // A refresh sent later than this could land after the lease expired, when a collector may have claimed it.
        const lastSendMs = beatAtMs + timing.leaseExpiryMs - timing.operationDeadlineMs;
        const retrying = !(err instanceof TypedError && !err.retryable);
        const lost =
          err instanceof LeaseLostError ? err
          : retrying && clock() >= lastSendMs ? new LeaseLostError(leaseKey(ref.namespaceId, ref.jobId), `not refreshed before it would expire, the last refresh failing with: ${firstLineOf(err)}`)
          : undefined;
        if (lost) {
          recordFence();
          throw ApplicationFailure.nonRetryable(lost.message, 'LeaseLost');
        }
        if (!retrying) throw err;
        // The refresh is due at once after the wait: the lease's heartbeat has not moved. A write
        // that landed unseen is found by the next CAS (412, re-read, adopt).
        await waitBeating(Math.min(clock() + backoffDelayMs(ACTIVITY_BACKOFF, failures++), lastSendMs), troubleBeatMs);
        continue;
      }
      failures = 0;
      recordRefresh(performance.now() - started);
      beatAtMs = Math.min(held.lease.heartbeat_at_ms, sentAtMs);
      record();
    }
  }

  /**
   * Runs the compactor over the attempt's store, narrowed to its job's staged segments: every body it
   * opened is closed when it ends, a vanished input reads as one, an input read at another version
   * than `readGroup` saw (its ETag in `etags`) ends the job, a plug-in's progress is checked before
   * it reaches the heartbeat details, and the outputs it returns are checked to be its own staged
   * segments, written and in the store (publication trusts them: a plug-in's are checked, not
   * believed). Its writes end when it returns or throws: later puts are refused, those in flight
   * are waited for, so no write lands under an output once the attempt has handed it on.
   */
  async function compact(ref: ReturnType<typeof job>, input: PinnedGroup, resume: unknown, heartbeat: (progress?: unknown) => void): Promise<CompactionOutputs> {
    const attempt = attemptStore(store);
    const writes = attemptWrites(attempt.store, ref);
    let result: CompactionOutputs;
    try {
      const run = (beat: typeof heartbeat) =>
        compactor.compact({
          job: { ...ref, group: familyGroup(input.group) },
          inputs: input.inputs,
          store: pinnedInputs(writes.store, input.group, input.inputs, input.etags),
          limits: settings,
          resume,
          heartbeat: beat,
        });
      // A plug-in's progress is checked against MAX_PROGRESS_BYTES. The reference compactor's is bounded
      // by its merge plan, one number per intermediate run (4 KB at 100,000 inputs and the default
      // fan-in), and may pass it only at fan-in 2 to 4 with tens of thousands of inputs: not refused.
      result = compactor === referenceCompactor ? await run(heartbeat) : await withCheckedProgress(ref, heartbeat, run);
    } catch (err) {
      // An input deleted or rewritten after readGroup checked it: the same clear end as one missing from the start.
      throw asInputError(err, input.group, input.inputs);
    } finally {
      await writes.end();
      await attempt.closeBodies();
    }
    const written = [...result.outputs, ...(result.tombstones ?? [])];
    checkStagedKeys(ref, written);
    await checkOutputsExist(store, ref, written);
    return result;
  }

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
      };
    },

    /**
     * The group's current segments: the job's inputs, fixed and checked (listed once, present, not too
     * large) before its lease exists, with the ETag of each, which every later read of it must match.
     */
    async readGroup(input: { namespaceId: string; group: string }): Promise<{ inputs: string[]; etags: string[] }> {
      const { root } = await readRoot(store, namespaceId(input.namespaceId), rootCodec);
      const inputs = [...groupSegments(root, familyGroup(input.group))];
      const etags = await checkInputs(store, input.group, inputs, settings.maxInputSegmentBytes);
      return { inputs, etags };
    },

    async createLease(input: JobInput & { ownerId: string; startedAtMs: number }): Promise<HeldLease> {
      return createJobLease(store, { ...job(input), ownerId: input.ownerId, startedAtMs: input.startedAtMs });
    },

    /**
     * The job's work and its lease keeper in one attempt: one activity slot and one heartbeat stream
     * per job ({@link LeasedProgress}), so a retried attempt adopts the lease and resumes the work from
     * the same details. The keeper stops here when the work returns, once no refresh is in flight:
     * nothing writes the lease after the attempt ends (the publication's refresh is the next write).
     * A failed refresh is retried while the work goes on; a lost lease or the attempt's cancellation
     * ends the work at its next record batch, and the attempt fails with the keeper's reason.
     */
    async compactUnderLease(input: JobInput & PinnedGroup & { held: HeldLease }): Promise<LeasedCompactionOutput> {
      const ctx = Context.current();
      const ref = job(input);
      const resumed = ctx.info.heartbeatDetails as LeasedProgress | undefined;
      let held = resumed?.held ?? input.held;
      let progress = resumed?.progress;
      let recurring = resumed?.recurring;
      const resumedAt = JSON.stringify(progress);
      // Every beat carries the latest of all three; the worker's heartbeat throttle sends at most one per beat interval.
      const beat = () => ctx.heartbeat({ held, progress, recurring } satisfies LeasedProgress);
      /**
       * The work's failure, or {@link RecurringFailureError} when an untyped error (a typed one decided
       * its own retryability) ended this attempt as it ended the ones before, with no progress since.
       * Otherwise the streak goes into the failure's last heartbeat, which the next attempt resumes from.
       */
      const endIfRecurring = (err: unknown): unknown => {
        if (!(err instanceof Error) || err instanceof TypedError || err instanceof TemporalFailure) return err;
        recurring = nextStreak(recurring, `${err.name}: ${firstLineOf(err)}`);
        if (recurring.attempts >= MAX_RECURRING_ATTEMPTS) return new RecurringFailureError(ref, recurring);
        beat();
        return err;
      };
      const workEnded = new AbortController();
      const keeperEnded = new AbortController();
      const keeping = keepLease(ctx, ref, held, {
        stop: workEnded.signal,
        beat: (h) => {
          held = h;
          beat();
        },
      }).catch((err: unknown) => {
        keeperEnded.abort(err);
        throw err;
      });
      let workEndedAtMs = 0;
      const working = compact(ref, input, progress, (p) => {
        if (p !== undefined) progress = p;
        if (recurring && JSON.stringify(progress) !== resumedAt) recurring = undefined;
        beat();
        if (keeperEnded.signal.aborted) throw keeperEnded.signal.reason;
      }).finally(() => {
        workEndedAtMs = Date.now();
        workEnded.abort();
      });
      const [worked, kept] = await Promise.allSettled([working, keeping]);
      // The keeper's failure comes first: the work's, if any, followed from it.
      if (kept.status === 'rejected') throw kept.reason;
      if (worked.status === 'rejected') throw endIfRecurring(worked.reason);
      const { outputs, tombstones = [], recordsOut, bytesOut } = worked.value;
      return { outputs: [...outputs], tombstones: [...tombstones], progress: { recordsOut, bytesOut }, workEndedAtMs };
    },

    async publish(input: JobInput & { group: string; inputs: string[]; outputs: string[]; tombstones: string[] }): Promise<PublicationOutcome> {
      const start = performance.now();
      const outcome = await publishCompaction(
        store,
        { ...job(input), group: familyGroup(input.group) as FamilyGroup, inputs: input.inputs, outputs: input.outputs, tombstones: input.tombstones },
        { budgetMs: timing.publicationBudgetMs, maxRootRaces: settings.maxRootRaces },
        { leaseClockMs: attemptClock(), elapsedMs: () => performance.now() - start },
        Context.current().info.attempt > 1,
        rootCodec,
      );
      if (outcome.outcome === 'fenced') recordFence();
      return outcome;
    },
  };
}

export type CompactionActivities = ReturnType<typeof createCompactionActivities>;
