/**
 * The compaction job's activities: thin translations between Temporal (heartbeats, cancellation,
 * typed failures) and the protocol and compactor modules.
 */
import { Context } from '@temporalio/activity';
import { recordFence, recordRefresh } from './metrics';
import { ApplicationFailure } from '@temporalio/common';
import { compactGroup, NO_PROGRESS, outputSegmentKeys, type CompactionProgress, type Compactor } from '../compactor';
import type { CompactionSettings } from '../config';
import { familyGroup, jobId, namespaceId, type FamilyGroup, type MetadataCompactionId, type NamespaceId } from '../keys';
import { groupSegments } from '../root';
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

export interface CompactionDeps {
  readonly store: ObjectStore;
  readonly settings: CompactionSettings;
  /** What `compactSegments` runs; {@link compactGroup} unless a benchmark or test passes a test compactor. */
  readonly compactor?: Compactor;
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
  readonly publicationTimeoutMs: number;
  readonly operationDeadlineMs: number;
  readonly maxFencedRuns: number;
}

export interface CompactionOutput {
  readonly outputs: string[];
  readonly progress: CompactionProgress;
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

export function createCompactionActivities({ store, settings, compactor = compactGroup }: CompactionDeps) {
  const { timing } = settings;
  return {
    async compactionSettings(): Promise<WorkflowSettings> {
      return {
        ownerId: settings.ownerId,
        heartbeatTimeoutMs: settings.heartbeatTimeoutMs,
        leaseRefreshIntervalMs: timing.leaseRefreshIntervalMs,
        publicationTimeoutMs: timing.publicationBudgetMs + 4 * timing.operationDeadlineMs,
        operationDeadlineMs: timing.operationDeadlineMs,
        maxFencedRuns: settings.maxFencedRuns,
      };
    },

    /** The group's current segments: the job's inputs, fixed before its lease exists. */
    async readGroup(input: { namespaceId: string; group: string }): Promise<{ inputs: string[] }> {
      const { root } = await readRoot(store, namespaceId(input.namespaceId));
      return { inputs: [...groupSegments(root, familyGroup(input.group))] };
    },

    async createLease(input: JobInput & { ownerId: string; startedAtMs: number }): Promise<HeldLease> {
      return createJobLease(store, { ...job(input), ownerId: input.ownerId, startedAtMs: input.startedAtMs });
    },

    /**
     * Keeps the lease alive by CAS until cancelled, each refresh due one interval after the heartbeat
     * last written. The ETag and heartbeat it holds travel in Temporal heartbeat details, so a
     * retried attempt adopts the lease it left, and refreshes at once when that heartbeat is already
     * an interval old (its predecessor died before refreshing): waiting a full interval from its own
     * start would leave the lease unrefreshed for up to two intervals plus the heartbeat timeout.
     */
    async holdLease(input: JobInput & { held: HeldLease }): Promise<never> {
      const ctx = Context.current();
      const ref = job(input);
      let held = (ctx.info.heartbeatDetails as HeldLease | undefined) ?? input.held;
      const clock = attemptClock();
      const beatEveryMs = Math.max(200, Math.min(timing.leaseRefreshIntervalMs, settings.heartbeatTimeoutMs) / 3);
      // When the held heartbeat was written, on this attempt's clock: never later than now, since an
      // earlier attempt's host clock may run ahead of ours (that would only postpone the refresh).
      let beatAtMs = Math.min(held.lease.heartbeat_at_ms, clock());
      ctx.heartbeat(held);
      for (;;) {
        // Temporal heartbeats more often than the lease is refreshed: that is how cancellation and a dead worker are noticed.
        const refreshAt = beatAtMs + timing.leaseRefreshIntervalMs;
        while (clock() < refreshAt) {
          await ctx.sleep(Math.min(beatEveryMs, refreshAt - clock()));
          ctx.heartbeat(held);
        }
        const started = performance.now();
        const sentAtMs = clock();
        try {
          held = await refreshJobLease(store, ref, held, clock);
        } catch (err) {
          if (!(err instanceof LeaseLostError)) throw err;
          recordFence();
          throw ApplicationFailure.nonRetryable(err.message, 'LeaseLost');
        }
        recordRefresh(performance.now() - started);
        beatAtMs = Math.min(held.lease.heartbeat_at_ms, sentAtMs);
        ctx.heartbeat(held);
      }
    },

    async compactSegments(input: JobInput & { group: string; inputs: string[] }): Promise<CompactionOutput> {
      const ctx = Context.current();
      const ref = job(input);
      const resume = (ctx.info.heartbeatDetails as CompactionProgress | undefined) ?? NO_PROGRESS;
      ctx.heartbeat(resume);
      let latest = resume;
      const progress = await compactor(store, ref, input.inputs, settings.targetSegmentBytes, resume, {
        onSegmentFinished: (p) => {
          latest = p;
          ctx.heartbeat(p);
        },
        onRecords: () => {
          ctx.heartbeat(latest);
          if (ctx.cancellationSignal.aborted) throw ctx.cancellationSignal.reason;
        },
      });
      return { outputs: outputSegmentKeys(ref, progress), progress };
    },

    async publish(input: JobInput & { group: string; inputs: string[]; outputs: string[] }): Promise<PublicationOutcome> {
      const start = performance.now();
      const outcome = await publishCompaction(
        store,
        { ...job(input), group: familyGroup(input.group) as FamilyGroup, inputs: input.inputs, outputs: input.outputs },
        { budgetMs: timing.publicationBudgetMs, maxRootRaces: settings.maxRootRaces },
        { leaseClockMs: attemptClock(), elapsedMs: () => performance.now() - start },
        Context.current().info.attempt > 1,
      );
      if (outcome.outcome === 'fenced') recordFence();
      return outcome;
    },
  };
}

export type CompactionActivities = ReturnType<typeof createCompactionActivities>;
