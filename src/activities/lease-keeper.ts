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

export interface KeeperHooks {
  /** Aborted when the work has ended: the keeper returns at its next look, which is never during a refresh. */
  readonly stop: AbortSignal;
  /** Puts the lease as now held into the attempt's heartbeat details. */
  readonly beat: (held: HeldLease) => void;
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
  store: ObjectStore,
  settings: CompactionSettings,
  ref: JobRef,
  from: HeldLease,
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
  for (let failures = 0; ;) {
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
        err instanceof LeaseLostError
          ? err
          : retrying && clock() >= lastSendMs
            ? new LeaseLostError(
                leaseKey(ref.namespaceId, ref.jobId),
                `not refreshed before it would expire, the last refresh failing with: ${firstLineOf(err)}`,
              )
            : undefined;
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
      await waitBeating(Math.min(clock() + backoffDelayMs(ACTIVITY_BACKOFF, failures++), lastSendMs), troubleBeatMs);
      continue;
    }
    failures = 0;
    recordRefresh(performance.now() - started);
    beatAtMs = Math.min(held.lease.heartbeat_at_ms, sentAtMs);
    record();
  }
}
