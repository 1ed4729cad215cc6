/**
 * Translation of the package's typed errors into Temporal failures with a stable `type`, so retry
 * policies and operators can name them. Each error class names its type, whose retryability
 * `FAILURE_TYPES` in src/errors decides; an error of no such class stays retryable, typed by its name.
 */
import { ApplicationFailure, ApplicationFailureCategory, TemporalFailure } from '@temporalio/common';
import { bounded, MESSAGE_LIMIT, TypedError } from '../errors';

/**
 * A typed error becomes a failure of its own type and retryability; other errors stay retryable,
 * typed by their name. Its message is {@link bounded}: it may quote what a bucket holds. A typed
 * error no retry can fix (bad input, a plug-in's refusal) is an expected outcome, not a fault: it is
 * BENIGN, which the worker logs at DEBUG instead of WARN with its stack and task token; the
 * workflow's failure states it once.
 */
export function toFailure(err: unknown): unknown {
  // Temporal's own failures (cancellation above all) must reach the SDK unchanged.
  if (!(err instanceof Error) || err instanceof TemporalFailure) return err;
  const typed = err instanceof TypedError ? err : undefined;
  const nonRetryable = typed ? !typed.retryable : false;
  return ApplicationFailure.create({
    type: typed?.failureType ?? err.name,
    message: bounded(err.message, MESSAGE_LIMIT),
    nonRetryable,
    cause: err,
    category: nonRetryable ? ApplicationFailureCategory.BENIGN : undefined,
  });
}

const throwAsFailure = (err: unknown): never => {
  throw toFailure(err);
};

/**
 * Wraps every activity of a set so that its typed errors reach Temporal as typed failures. A handler on the
 * activity's promise, not an async frame: a held lease's activity waits for its whole job, and each frame it keeps
 * costs the worker memory per job.
 */
export function withTypedFailures<T extends Record<string, (...args: never[]) => Promise<unknown>>>(activities: T): T {
  const wrapped: Record<string, unknown> = {};
  for (const [name, fn] of Object.entries(activities)) {
    wrapped[name] = (...args: never[]) => {
      try {
        return fn(...args).catch(throwAsFailure);
      } catch (err) {
        return Promise.reject(toFailure(err));
      }
    };
  }
  return wrapped as T;
}
