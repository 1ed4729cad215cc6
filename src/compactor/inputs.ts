/**
 * The checks a group's inputs pass before a job takes its lease: each listed once, present, and no
 * larger than a segment may be. Bad input ends the job with a typed error naming the key; retrying
 * cannot make a missing object appear, and a job that retries keeps its group's workflow id taken.
 */
import { TypedError } from '../errors';
import { NotFoundError, type ObjectStore } from '../store';
import { inBatches } from '../store/batches';

/** An input the root names is not in the store (deleted, or a lost write of the metadata service). */
export class InputMissingError extends TypedError {
  override readonly name = 'InputMissingError';
  readonly failureType = 'InputMissing';
  readonly retryable = false;
  constructor(
    readonly key: string,
    readonly group: string,
  ) {
    super(`input segment ${key} of group ${group} is missing from the store though the root names it: restore it or remove it from the group in the root, then start the compaction again`);
  }
}

/** An input larger than `COMPACTION_MAX_INPUT_SEGMENT_BYTES`: refused from its size alone, before a byte of it is read. */
export class InputTooLargeError extends TypedError {
  override readonly name = 'InputTooLargeError';
  readonly failureType = 'InputTooLarge';
  readonly retryable = false;
  constructor(
    readonly key: string,
    readonly size: number,
    readonly maxBytes: number,
  ) {
    super(`input segment ${key} is ${size} bytes, more than COMPACTION_MAX_INPUT_SEGMENT_BYTES (${maxBytes}): check what was written there, or raise the limit`);
  }
}

/** The group lists one segment more than once: merging it twice is harmless, but a root that does so was written wrongly. */
export class DuplicateInputError extends TypedError {
  override readonly name = 'DuplicateInputError';
  readonly failureType = 'InvalidInput';
  readonly retryable = false;
  constructor(
    readonly key: string,
    readonly group: string,
  ) {
    super(`group ${group} lists input segment ${key} more than once: fix the group in the root, then start the compaction again`);
  }
}

/** HEAD requests in flight at once: the check takes a few round trips, not one per input, and leaves the socket pool to the job. */
const HEAD_CONCURRENCY = 16;

/** Throws on the first input listed twice, missing, or larger than `maxBytes`. */
export async function checkInputs(store: ObjectStore, group: string, inputs: readonly string[], maxBytes: number): Promise<void> {
  const seen = new Set<string>();
  for (const key of inputs) {
    if (seen.has(key)) throw new DuplicateInputError(key, group);
    seen.add(key);
  }
  await inBatches(inputs, 1, HEAD_CONCURRENCY, async (batch) => {
    for (const key of batch) {
      const info = await store.head(key).catch((err: unknown) => {
        throw asInputError(err, group, inputs);
      });
      if (info.size > maxBytes) throw new InputTooLargeError(key, info.size, maxBytes);
    }
  });
}

/** A store's NotFound for one of the job's inputs is {@link InputMissingError}; any other error is returned as it is. */
export const asInputError = (err: unknown, group: string, inputs: readonly string[]): unknown =>
  err instanceof NotFoundError && inputs.includes(err.key) ? new InputMissingError(err.key, group) : err;
