/**
 * The checks a group's inputs pass before a job takes its lease: present, and no larger than a
 * segment may be. Bad input ends the job with a typed error naming the key; retrying
 * cannot make a missing object appear, and a job that retries keeps its group's workflow id taken.
 */
import { TypedError } from '../errors';
import { NotFoundError, ObjectChangedError, type ObjectStore } from '../store';
import { inBatches } from '../store/batches';
import type { StagedStore } from './plugin';

/** An input the root names is not in the store (deleted, or a lost write of the metadata service). */
export class InputMissingError extends TypedError {
  readonly failureType = 'InputMissing';
  constructor(
    readonly key: string,
    readonly group: string,
  ) {
    super(
      `input segment ${key} of group ${group} is missing from the store though the root names it: restore it or remove it from the group in the root, then start the compaction again`,
    );
  }
}

/**
 * An input larger than `COMPACTION_MAX_INPUT_SEGMENT_BYTES`: refused from its size alone, before a byte of it is read.
 */
export class InputTooLargeError extends TypedError {
  readonly failureType = 'InputTooLarge';
  constructor(
    readonly key: string,
    readonly size: number,
    readonly maxBytes: number,
  ) {
    super(
      `input segment ${key} is ${size} bytes, more than COMPACTION_MAX_INPUT_SEGMENT_BYTES (${maxBytes}): check what was written there, or raise the limit`,
    );
  }
}

/**
 * An input is no longer the version the job read when it fixed its group: its ETag differs from the
 * one `readGroup` saw, or it changed while being read. Inputs are immutable, so a writer broke the
 * protocol. Not retryable: a retry resumes from progress made of the old bytes and would publish a
 * mix of both versions; the next job reads the group again and starts over.
 */
export class InputChangedError extends TypedError {
  readonly failureType = 'InputChanged';
  constructor(
    readonly key: string,
    readonly group: string,
    readonly pinnedEtag: string,
    readonly seenEtag: string | undefined,
  ) {
    super(
      `input segment ${key} of group ${group} changed since the job read its group (ETag ${pinnedEtag}, now ${seenEtag ?? 'changed while being read'}): ` +
        'inputs are immutable, so a writer rewrote it; the job ends without publishing, and the next job reads the group again from the start',
    );
  }
}

/**
 * HEAD requests in flight at once: the check takes a few round trips, not one per input, and leaves the socket pool to
 * the job.
 */
const HEAD_CONCURRENCY = 16;

/**
 * Throws on the first input missing, or larger than `maxBytes`; returns each input's ETag, in the
 * order of `inputs` (each listed once): the versions the job pins ({@link pinnedInputs}).
 */
export async function checkInputs(
  store: ObjectStore,
  group: string,
  inputs: readonly string[],
  maxBytes: number,
): Promise<string[]> {
  const etags = new Map<string, string>();
  await inBatches(inputs, 1, HEAD_CONCURRENCY, async (batch) => {
    for (const key of batch) {
      const info = await store.head(key).catch((err: unknown) => {
        throw asInputError(err, group, inputs);
      });
      if (info.size > maxBytes) throw new InputTooLargeError(key, info.size, maxBytes);
      // S3 and the embedded store always give one; a HEAD without it pins to "" and every read of the input fails as
      // changed.
      etags.set(key, info.etag ?? '');
    }
  });
  return inputs.map((key) => etags.get(key)!);
}

/**
 * A store's NotFound for one of the job's inputs is {@link InputMissingError}, its ObjectChanged
 * (the input changed between two reads of one stream) {@link InputChangedError}; any other error is
 * returned as it is.
 */
export function asInputError(err: unknown, group: string, inputs: readonly string[]): unknown {
  if (!(err instanceof NotFoundError || err instanceof ObjectChangedError) || !inputs.includes(err.key)) return err;
  return err instanceof NotFoundError
    ? new InputMissingError(err.key, group)
    : new InputChangedError(err.key, group, err.etag, undefined);
}

/**
 * `store` with the job's inputs pinned to the ETags `readGroup` saw (`etags[i]` of `inputs[i]`):
 * every read of an input (GET, stream, HEAD) whose ETag is another throws {@link InputChangedError}
 * before a byte of it reaches the compactor. A stream's later windows are read under `If-Match` of
 * its first (the store's own rule), so one comparison pins every byte of it.
 */
export function pinnedInputs(
  store: StagedStore,
  group: string,
  inputs: readonly string[],
  etags: readonly string[],
): StagedStore {
  const pins = new Map(inputs.map((key, i) => [key, etags[i]!]));
  const check = <T extends { etag: string | undefined }>(key: string, read: T): T => {
    const pinned = pins.get(key);
    if (pinned !== undefined && read.etag !== pinned) throw new InputChangedError(key, group, pinned, read.etag);
    return read;
  };
  return {
    get: async (key, options) => check(key, await store.get(key, options)),
    getStream: async (key, options) => check(key, await store.getStream(key, options)),
    head: async (key) => check(key, await store.head(key)),
    put: (key, body) => store.put(key, body),
  };
}
