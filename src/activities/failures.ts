/**
 * Translation of the package's typed errors into Temporal failures with a stable `type`, so retry
 * policies and operators can name them. Only corruption, invalid input and broken configuration
 * are non-retryable; everything else is retried by Temporal.
 */
import { ApplicationFailure, TemporalFailure } from '@temporalio/common';

/** Failure types that retrying cannot fix. */
export const NON_RETRYABLE_TYPES = [
  'LeaseLost',
  'LeaseCorrupt',
  'RootCorrupt',
  'RootMissing',
  'SegmentCorrupt',
  'InputMissing',
  'InputTooLarge',
  'InvalidInput',
  'JobIdCollision',
  'StoreConfig',
  'TimingConfig',
  'InvalidSettings',
] as const;
export type NonRetryableType = (typeof NON_RETRYABLE_TYPES)[number];

const TYPE_BY_ERROR_NAME: Record<string, NonRetryableType> = {
  LeaseLostError: 'LeaseLost',
  LeaseCorruptError: 'LeaseCorrupt',
  RootCorruptError: 'RootCorrupt',
  RootMissingError: 'RootMissing',
  SegmentCorruptError: 'SegmentCorrupt',
  InputMissingError: 'InputMissing',
  InputTooLargeError: 'InputTooLarge',
  DuplicateInputError: 'InvalidInput',
  InvalidKeyError: 'InvalidInput',
  JobIdCollisionError: 'JobIdCollision',
  StoreConfigError: 'StoreConfig',
  TimingConfigError: 'TimingConfig',
  SettingsError: 'InvalidSettings',
};

/** A typed error becomes a non-retryable failure of its type; other errors stay retryable, typed by their name. */
export function toFailure(err: unknown): unknown {
  // Temporal's own failures (cancellation above all) must reach the SDK unchanged.
  if (!(err instanceof Error) || err instanceof TemporalFailure) return err;
  const type = TYPE_BY_ERROR_NAME[err.name];
  if (type) return ApplicationFailure.create({ type, message: err.message, nonRetryable: true, cause: err });
  return ApplicationFailure.create({ type: err.name, message: err.message, nonRetryable: false, cause: err });
}

/** Wraps every activity of a set so that its typed errors reach Temporal as typed failures. */
export function withTypedFailures<T extends Record<string, (...args: never[]) => Promise<unknown>>>(activities: T): T {
  const wrapped: Record<string, unknown> = {};
  for (const [name, fn] of Object.entries(activities)) {
    wrapped[name] = async (...args: never[]) => {
      try {
        return await fn(...args);
      } catch (err) {
        throw toFailure(err);
      }
    };
  }
  return wrapped as T;
}
