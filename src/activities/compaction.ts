/**
 * The compaction job's activities: thin translations between Temporal (heartbeats, cancellation,
 * typed failures) and the protocol and compactor modules.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { Context } from '@temporalio/activity';
import { recordFence, recordRefresh } from './metrics';
import { ApplicationFailure } from '@temporalio/common';
import { checkStagedKeys, referenceCompactor, stagedStore, type Compactor } from '../compactor';
import { asInputError, checkInputs } from '../compactor/inputs';
import { heartbeatEveryMs, type CompactionSettings } from '../config';
import { familyGroup, jobId, namespaceId, type FamilyGroup, type MetadataCompactionId, type NamespaceId } from '../keys';
import { groupSegments, jsonRootCodec, type RootCodec } from '../root';
import {
  createJobLease,
  LeaseLostError,
  publishCompaction,
  readRoot,
  refreshJobLease,
  type HeldLease,
  type PublicationOutcome,
} from '../protocol';
import type { ObjectStore, StreamedObject } from '../store';

export interface CompactionDeps {
  readonly store: ObjectStore;
  readonly settings: CompactionSettings;
  /** What `compactSegments` runs: the segment format's plug-in; default {@link referenceCompactor}. */
  readonly compactor?: Compactor;
  /** How the root is read and written, by publication and the collector alike; default {@link jsonRootCodec}. */
  readonly rootCodec?: RootCodec;
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
  /** Absent in the recorded settings of runs that started before it was added. */
  readonly leaseExpiryMs?: number;
  readonly publicationTimeoutMs: number;
  readonly operationDeadlineMs: number;
  readonly maxFencedRuns: number;
}

export interface CompactionOutput {
  readonly outputs: string[];
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

/**
 * The store as one compaction attempt sees it: every body it opened is closed when the attempt
 * ends. A merge that stops early (bad input, cancellation) leaves the other inputs' bodies unread,
 * and an unread S3 body fails later, at its request's deadline, with nobody listening: an uncaught
 * exception that would take down the worker and every lease keeper on it.
 */
function attemptStore(store: ObjectStore): { store: ObjectStore; closeBodies: () => Promise<void> } {
  const opened: Promise<StreamedObject>[] = [];
  const getStream = (key: string): Promise<StreamedObject> => {
    const object = store.getStream(key);
    opened.push(object);
    return object;
  };
  return {
    store: new Proxy(store, {
      get: (target, property) => {
        if (property === 'getStream') return getStream;
        const value: unknown = Reflect.get(target, property);
        return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
      },
    }),
    // Opens still under way when the attempt failed are waited for, so their bodies are closed too.
    // A stream is destroyed: returning a fresh iterator of a stream never read would not touch it.
    closeBodies: async () => {
      for (const object of await Promise.allSettled(opened)) {
        if (object.status !== 'fulfilled') continue;
        const body = object.value.body as AsyncIterable<Uint8Array> & { destroy?: () => void };
        if (body.destroy) body.destroy();
        else await body[Symbol.asyncIterator]().return?.();
      }
    },
  };
}

/** What a keeper that was stopped returns: it stopped because its job's work ended, not because the lease was lost. */
export interface KeeperStopped {
  readonly stopped: 'work ended';
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

export function createCompactionActivities({ store, settings, compactor = referenceCompactor, rootCodec = jsonRootCodec }: CompactionDeps) {
  const { timing } = settings;
  // The keepers running on this worker, by job: a job's work that ends here stops its keeper at once
  // instead of waiting for cancellation, which reaches an activity only in a heartbeat response.
  const keepers = new Map<MetadataCompactionId, AbortController>();
  const beatEveryMs = heartbeatEveryMs(settings);
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

    /** The group's current segments: the job's inputs, fixed and checked (listed once, present, not too large) before its lease exists. */
    async readGroup(input: { namespaceId: string; group: string }): Promise<{ inputs: string[] }> {
      const { root } = await readRoot(store, namespaceId(input.namespaceId), rootCodec);
      const inputs = [...groupSegments(root, familyGroup(input.group))];
      await checkInputs(store, input.group, inputs, settings.maxInputSegmentBytes);
      return { inputs };
    },

    async createLease(input: JobInput & { ownerId: string; startedAtMs: number }): Promise<HeldLease> {
      return createJobLease(store, { ...job(input), ownerId: input.ownerId, startedAtMs: input.startedAtMs });
    },

    /**
     * Keeps the lease alive by CAS until its job's work ends on this worker (then it returns
     * {@link KeeperStopped}) or it is cancelled, each refresh due one interval after the heartbeat
     * last written. The ETag and heartbeat it holds travel in Temporal heartbeat details, so a
     * retried attempt adopts the lease it left, and refreshes at once when that heartbeat is already
     * an interval old (its predecessor died before refreshing): waiting a full interval from its own
     * start would leave the lease unrefreshed for up to two intervals plus the heartbeat timeout.
     */
    async holdLease(input: JobInput & { held: HeldLease }): Promise<KeeperStopped> {
      const ctx = Context.current();
      const ref = job(input);
      const stop = new AbortController();
      keepers.set(ref.jobId, stop);
      try {
        let held = (ctx.info.heartbeatDetails as HeldLease | undefined) ?? input.held;
        const clock = attemptClock();
        // When the held heartbeat was written, on this attempt's clock: never later than now, since an
        // earlier attempt's host clock may run ahead of ours (that would only postpone the refresh).
        let beatAtMs = Math.min(held.lease.heartbeat_at_ms, clock());
        let lastBeatMs = 0;
        const beat = () => {
          ctx.heartbeat(held);
          lastBeatMs = clock();
        };
        beat();
        // The stop is looked at only between refreshes: a stopped keeper has no refresh in flight
        // once it returns, so none can land beside the publication's own.
        for (;;) {
          const refreshAt = beatAtMs + timing.leaseRefreshIntervalMs;
          while (clock() < refreshAt && !stop.signal.aborted) {
            // Between refreshes the keeper beats only as often as its heartbeat timeout needs (at the default timeout, never).
            const beatDue = lastBeatMs + beatEveryMs;
            await sleepUnless(ctx, Math.min(beatDue, refreshAt) - clock(), stop.signal);
            if (clock() >= beatDue) beat();
          }
          if (stop.signal.aborted) return { stopped: 'work ended' };
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
          beat();
        }
      } finally {
        if (keepers.get(ref.jobId) === stop) keepers.delete(ref.jobId);
      }
    },

    async compactSegments(input: JobInput & { group: string; inputs: string[] }): Promise<CompactionOutput> {
      const ctx = Context.current();
      const ref = job(input);
      let latest: unknown = ctx.info.heartbeatDetails;
      ctx.heartbeat(latest);
      const attempt = attemptStore(store);
      // Reading the first bytes of every input and skipping to the resume key emit no records, and
      // can outlast the heartbeat timeout on a wide group: beat on a timer too, not only when the
      // compactor calls (the worker's heartbeat throttle sends at most one of these per beat interval).
      const beat = setInterval(() => ctx.heartbeat(latest), beatEveryMs);
      const result = await compactor
        .compact({
          job: { ...ref, group: familyGroup(input.group) },
          inputs: input.inputs,
          store: stagedStore(attempt.store, ref),
          limits: settings,
          resume: latest,
          heartbeat: (progress) => {
            if (progress !== undefined) latest = progress;
            ctx.heartbeat(latest);
            if (ctx.cancellationSignal.aborted) throw ctx.cancellationSignal.reason;
          },
        })
        .catch((err: unknown) => {
          // An input deleted after readGroup checked it: the same clear end as one missing from the start.
          throw asInputError(err, input.group, input.inputs);
        })
        .finally(() => {
          clearInterval(beat);
          return attempt.closeBodies();
        });
      // Publication trusts the outputs to be this job's own staged segments: a plug-in's are checked, not believed.
      checkStagedKeys(ref, result.outputs);
      // The work is done: the keeper of this job, if it runs here, stops now (the workflow's
      // cancellation stays the way to stop one on another worker).
      keepers.get(ref.jobId)?.abort();
      return { outputs: [...result.outputs], progress: { recordsOut: result.recordsOut, bytesOut: result.bytesOut } };
    },

    async publish(input: JobInput & { group: string; inputs: string[]; outputs: string[] }): Promise<PublicationOutcome> {
      const start = performance.now();
      const outcome = await publishCompaction(
        store,
        { ...job(input), group: familyGroup(input.group) as FamilyGroup, inputs: input.inputs, outputs: input.outputs },
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
