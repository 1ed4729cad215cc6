/**
 * When a failing compaction stops being retried. Its attempts have no count limit (they span every
 * worker restart of a job that may run for hours), so an error that no retry can fix, such as a
 * record that cannot be re-encoded, would hold its group and refresh its lease forever. The same
 * untyped error on consecutive attempts with no progress between them ends the job instead.
 */
import { TypedError } from '../errors';
import type { JobRef } from '../protocol';

/** Consecutive failed attempts, the latest included, that end the job when they failed alike without progress. */
export const MAX_RECURRING_ATTEMPTS = 3;

/** The failure of the latest attempts, kept in heartbeat details: one line of text and a count, never the data. */
export interface FailureStreak {
  /**
   * The error's name and the first line of its message (which names the input or record at fault, where the error
   * does).
   */
  readonly error: string;
  /** Consecutive attempts that ended with it, with no progress heartbeated between them. */
  readonly attempts: number;
}

/**
 * The streak after an attempt that failed with `error`, following `previous` (undefined when the last attempt made
 * progress).
 */
export const nextStreak = (previous: FailureStreak | undefined, error: string): FailureStreak => ({
  error,
  attempts: previous?.error === error ? previous.attempts + 1 : 1,
});

/** The same error ended {@link MAX_RECURRING_ATTEMPTS} attempts in a row without progress: retrying cannot help. */
export class RecurringFailureError extends TypedError {
  readonly failureType = 'RecurringFailure';
  constructor(
    readonly job: JobRef,
    readonly streak: FailureStreak,
  ) {
    super(
      `job ${job.jobId} (namespace ${job.namespaceId}) failed ${streak.attempts} attempts in a row with the same error and no progress: ${streak.error}. ` +
        'Retrying cannot help: the job ends and leaves its lease to expire; fix the input or record it names, then start the compaction again',
    );
  }
}
