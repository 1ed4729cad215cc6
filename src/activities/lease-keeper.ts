/**
 * The lease keeper: refreshes a job's lease by CAS beside its work, in the work's own activity
 * attempt, and puts the lease as held into the attempt's heartbeat details.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Context } from '@temporalio/activity';
import { ApplicationFailure, ApplicationFailureCategory } from '@temporalio/common';
import { heartbeatEveryMs, type CompactionSettings } from '../config';
import { ACTIVITY_BACKOFF, backoffDelayMs } from '../config/retry';
import { firstLineOf, TypedError } from '../errors';
import { leaseKey } from '../keys';
import { LeaseLostError, refreshJobLease, type HeldLease, type JobRef } from '../protocol';
import type { ObjectStore } from '../store';
import { recordFence, recordRefresh } from './metrics';

/** A clock that cannot jump backwards within an attempt: the wall clock at its start plus monotonic elapsed time. */
export function attemptClock(): () => number {
  const wallAtStart = Date.now();
  const monotonicAtStart = performance.now();
  return () => wallAtStart + (performance.now() - monotonicAtStart);
}

export interface KeeperHooks {
  /** Aborted when the work has ended: the keeper returns at its next look, which is never during a refresh. */
  readonly stop: AbortSignal;
  /** Puts the lease as now held into the attempt's heartbeat details. */
  readonly beat: (held: HeldLease) => void;
}

/** The lease a keeper refreshes, and where. */
export interface KeptLease {
  readonly store: ObjectStore;
  readonly settings: CompactionSettings;
  readonly ref: JobRef;
  /** The lease as the attempt holds it at the start: its create or claim, or its predecessor's heartbeat details. */
  readonly from: HeldLease;
}

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
export async function keepLease(
  ctx: Context,
  { store, settings, ref, from }: KeptLease,
  { stop, beat }: KeeperHooks,
): Promise<void> {
  const { timing } = settings;
  const beatEveryMs = heartbeatEveryMs(settings);
  const troubleBeatMs = settings.heartbeatTimeoutMs / 3;
  let held = from;
  const clock = attemptClock();
  // When the held heartbeat was written, on this attempt's clock: never later than now, since an
  // earlier attempt's host clock may run ahead of ours (that would only postpone the refresh).
  let beatAtMs = Math.min(held.lease.heartbeat_at_ms, clock());
  const beats = keeperBeats(ctx, clock, stop, () => beat(held));
  beats.record();
  // The stop is looked at only between refreshes: a stopped keeper has no refresh in flight
  // once it returns, so none can land beside the publication's own.
  for (let failures = 0; ;) {
    // Between refreshes the keeper beats only as often as its heartbeat timeout needs (at the default timeout, never).
    await beats.waitBeating(beatAtMs + timing.leaseRefreshIntervalMs, beatEveryMs);
    if (stop.aborted) return;
    const started = performance.now();
    const sentAtMs = clock();
    try {
      held = await beats.beatingDuring(refreshJobLease(store, ref, held, clock), troubleBeatMs);
    } catch (err) {
      // A refresh sent later than this could land after the lease expired, when a collector may have claimed it.
      const lastSendMs = beatAtMs + timing.leaseExpiryMs - timing.operationDeadlineMs;
      const retrying = !(err instanceof TypedError && !err.retryable);
      const lost = leaseLostBy(err, ref, retrying && clock() >= lastSendMs);
      if (lost) {
        recordFence();
        // Expected (the job is fenced and runs again as a new one): BENIGN, logged at DEBUG.
        throw ApplicationFailure.create({
          message: lost.message,
          type: lost.failureType,
          nonRetryable: !lost.retryable,
          category: ApplicationFailureCategory.BENIGN,
        });
      }
      if (!retrying) throw err;
      // The refresh is due at once after the wait: the lease's heartbeat has not moved. A write
      // that landed unseen is found by the next CAS (412, re-read, adopt).
      await beats.waitBeating(
        Math.min(clock() + backoffDelayMs(ACTIVITY_BACKOFF, failures++), lastSendMs),
        troubleBeatMs,
      );
      continue;
    }
    failures = 0;
    recordRefresh(performance.now() - started);
    beatAtMs = Math.min(held.lease.heartbeat_at_ms, sentAtMs);
    beats.record();
  }
}

/**
 * The keeper's heartbeats on the attempt's clock: `record` puts the lease as held into the details
 * now; the waits beat at a cadence meanwhile, so no wait outlasts the heartbeat timeout.
 */
function keeperBeats(ctx: Context, clock: () => number, stop: AbortSignal, beat: () => void) {
  // Combined once for the keeper's life: a signal combined per sleep stays listed in both sources until a full
  // collection, and a keeper sleeps for most of its job.
  const wake = AbortSignal.any([stop, ctx.cancellationSignal]);
  let lastBeatMs = 0;
  const record = () => {
    beat();
    lastBeatMs = clock();
  };
  return {
    record,
    /**
     * Waits until `untilMs` on the attempt's clock (or the stop), beating every `everyMs` meanwhile; the activity's
     * cancellation rejects with its CancelledFailure, as `Context.sleep` does. Its sleeps are inline: a keeper waits
     * for most of its job, and every async frame it keeps costs the worker memory per held lease.
     */
    async waitBeating(untilMs: number, everyMs: number): Promise<void> {
      while (clock() < untilMs && !stop.aborted) {
        const beatDue = lastBeatMs + everyMs;
        try {
          await sleep(Math.max(0, Math.min(beatDue, untilMs) - clock()), undefined, { signal: wake });
        } catch (err) {
          if (ctx.cancellationSignal.aborted) throw ctx.cancellationSignal.reason;
          if (!stop.aborted) throw err;
        }
        if (clock() >= beatDue) record();
      }
    },
    /** `refresh`, beating every `everyMs` until it settles: one can take a deadline per request. */
    async beatingDuring<T>(refresh: Promise<T>, everyMs: number): Promise<T> {
      const timer = setInterval(record, everyMs);
      try {
        return await refresh;
      } finally {
        clearInterval(timer);
      }
    },
  };
}

/**
 * The lease lost by a failed refresh: the store's own verdict, or a retryable failure past the last
 * moment a refresh could still be sent (`pastLastSend`); undefined while the lease may still be held.
 */
function leaseLostBy(err: unknown, ref: JobRef, pastLastSend: boolean): LeaseLostError | undefined {
  if (err instanceof LeaseLostError) return err;
  if (!pastLastSend) return undefined;
  return new LeaseLostError(
    leaseKey(ref.namespaceId, ref.jobId),
    `not refreshed before it would expire, the last refresh failing with: ${firstLineOf(err)}`,
  );
}
