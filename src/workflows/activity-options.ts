/**
 * The activity policy of both workflows: their timeouts and their retry policy, written once.
 * Deterministic and free of Node imports, so workflow code imports it.
 */
import type { ActivityOptions, Duration, RetryPolicy } from '@temporalio/common';
import { NON_RETRYABLE_FAILURE_TYPES } from '../errors';
import { ACTIVITY_BACKOFF } from '../config/retry';
import type { CompactionSettings } from '../config/settings';
import type { Timing } from '../config/timing';

/** The worker's settings the policy is made of; a run takes them once, from its first worker. */
export type ActivitySettings = Pick<Timing, 'operationDeadlineMs'> & Pick<CompactionSettings, 'heartbeatTimeoutMs'>;

/**
 * The retry policy of every activity: the backoff of src/config/retry, no retry of a failure type no
 * retry can fix, and at most `maximumAttempts` attempts (unset: no limit).
 */
export function activityRetry(maximumAttempts?: number): RetryPolicy {
  const { initialIntervalMs, backoffCoefficient, maximumIntervalMs } = ACTIVITY_BACKOFF;
  return {
    initialInterval: initialIntervalMs,
    backoffCoefficient,
    maximumInterval: maximumIntervalMs,
    nonRetryableErrorTypes: [...NON_RETRYABLE_FAILURE_TYPES],
    ...(maximumAttempts !== undefined && { maximumAttempts }),
  };
}

/** How activities of each kind run under `settings`. */
export function activityOptions(settings: ActivitySettings) {
  return {
    /**
     * A few store calls, unheartbeated: each call retries within its operation deadline, so four
     * deadlines and 10 s of slack bound an attempt that is not lost.
     */
    short: (maximumAttempts?: number): ActivityOptions => ({
      startToCloseTimeout: 4 * settings.operationDeadlineMs + 10_000,
      retry: activityRetry(maximumAttempts),
    }),
    /** Many store calls, as long as `startToCloseTimeout`: its heartbeats tell a dead worker from long work. */
    heartbeated: (startToCloseTimeout: Duration, maximumAttempts?: number): ActivityOptions => ({
      startToCloseTimeout,
      heartbeatTimeout: settings.heartbeatTimeoutMs,
      retry: activityRetry(maximumAttempts),
    }),
  };
}
