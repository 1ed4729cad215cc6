/**
 * The compactor plug-in: how a worker turns a group's inputs into staged output segments. A
 * metadata service with its own segment format implements {@link Compactor}; the reference
 * (`referenceCompactor`, gzip NDJSON `.mseg`) is the default and is built on the same interface.
 * The lease, publication and the collector never look inside a segment: they see only keys.
 */
import { createHash } from 'node:crypto';
import { firstLineOf, quoted, TypedError } from '../errors';
import { isInputListKeyOf, parseCompactionKey, segmentId, stagedSegmentKey, type FamilyGroup } from '../keys';
import type { JobRef } from '../protocol';
import { NotFoundError, type ObjectStore } from '../store';
import { inBatches } from '../store/batches';
import type { SegmentFormatVersion } from '../segments';

/** The job a compactor works for: its output goes under this job's prefix and nowhere else. */
export interface CompactionJob extends JobRef {
  readonly group: FamilyGroup;
}

/** What bounds a compaction's memory, whatever the width of its group. */
export interface MergeLimits {
  /** Uncompressed bytes at which an output segment, or a part of an intermediate run, is closed. */
  readonly targetSegmentBytes: number;
  /** Most sources (inputs or intermediate runs) one merge reads at once: each holds read windows and inflate state. */
  readonly maxFanIn: number;
  /**
   * The segment format the reference compactor writes its outputs in (its intermediate runs are always v2); it reads
   * both. Default `DEFAULT_SEGMENT_FORMAT_VERSION`.
   */
  readonly segmentFormat?: SegmentFormatVersion;
}

/**
 * The store as a compactor sees it: reads of any key (its inputs, its own staged output), writes only
 * of staged segment keys of its job, so a plug-in cannot write where the collector or a reader would
 * trust it. A refused write throws {@link OutsideJobPrefixError} before anything is sent.
 */
export type StagedStore = Pick<ObjectStore, 'get' | 'getStream' | 'head' | 'put'>;

/**
 * The staged segment key of `name` in `job`: `seg_` + the first 32 hex of `sha256("{job_id}/{name}")`.
 * A compactor names each output by something its resumed attempt names the same way (an index, a
 * run and part), so a retry rewrites the same key and never leaves a twin.
 */
export function stagedOutputKey(job: JobRef, name: string, extension: string): string {
  const digest = createHash('sha256').update(`${job.jobId}/${name}`).digest('hex');
  return stagedSegmentKey(job.namespaceId, job.jobId, segmentId(`seg_${digest.slice(0, 32)}`), extension);
}

/** A compactor broke a rule the worker enforces on it, with `key`: a plug-in's bug, which no retry fixes. */
export abstract class CompactorRuleError extends TypedError {
  constructor(
    readonly key: string,
    readonly job: JobRef,
    what: string,
    fix: string,
  ) {
    super(
      `the compactor of job ${job.jobId} (namespace ${job.namespaceId}) ${what.replace('KEY', () => quoted(key))}: ${fix}`,
    );
  }
}

/** A compactor wrote, or returned as output, a key that is not a staged segment of its own job. */
export class OutsideJobPrefixError extends CompactorRuleError {
  readonly failureType = 'OutsideJobPrefix';
  constructor(key: string, job: JobRef) {
    super(
      key,
      job,
      'used KEY, which is not a staged segment key of its job',
      'name every output with stagedOutputKey(job, name, extension)',
    );
  }
}

/**
 * A compactor wrote after its attempt had returned: publication may already trust that attempt's outputs, so nothing
 * may change under them.
 */
export class WriteAfterAttemptError extends CompactorRuleError {
  readonly failureType = 'WriteAfterAttempt';
  constructor(key: string, job: JobRef) {
    super(key, job, 'wrote KEY after its attempt had returned', 'await every put before compact() returns or throws');
  }
}

/** A compactor returned an output that is not in the store: publication would name a missing key. */
export class OutputMissingError extends CompactorRuleError {
  readonly failureType = 'OutputMissing';
  constructor(key: string, job: JobRef) {
    super(
      key,
      job,
      'returned KEY as an output, which is not in the store',
      'write (and await) every output before returning it',
    );
  }
}

/**
 * Whether `key` is a staged segment key under `job`'s prefix, other than the job's input lists (the worker's, not
 * the compactor's).
 */
const isStagedKeyOf = (job: JobRef, key: string): boolean => {
  const parsed = parseCompactionKey(key);
  return (
    parsed.kind === 'staged_segment' &&
    parsed.namespaceId === job.namespaceId &&
    parsed.jobId === job.jobId &&
    !isInputListKeyOf(job.namespaceId, job.jobId, key)
  );
};

/** Throws {@link OutsideJobPrefixError} for the first of `keys` outside the job's staged segments. */
export function checkStagedKeys(job: JobRef, keys: readonly string[]): void {
  const outside = keys.find((key) => !isStagedKeyOf(job, key));
  if (outside !== undefined) throw new OutsideJobPrefixError(outside, job);
}

/** `store` narrowed to what a compactor of `job` may do: the writer is enforced here, not trusted. */
export function stagedStore(store: ObjectStore, job: JobRef): StagedStore {
  return {
    get: (key, options) => store.get(key, options),
    getStream: (key, options) => store.getStream(key, options),
    head: (key) => store.head(key),
    put: async (key, body) => {
      checkStagedKeys(job, [key]);
      return store.put(key, body);
    },
  };
}

/** The writes of one attempt: its staged store, and the end that closes it. */
export interface AttemptWrites {
  readonly store: StagedStore;
  /**
   * Ends the attempt's writes: every later `put` is refused with {@link WriteAfterAttemptError}, and
   * the puts still in flight are waited for, so no write of the attempt lands after it ended.
   */
  end(): Promise<void>;
}

/** {@link stagedStore} for one attempt, whose writes end with {@link AttemptWrites.end}. */
export function attemptWrites(store: ObjectStore, job: JobRef): AttemptWrites {
  const staged = stagedStore(store, job);
  const inFlight = new Set<Promise<unknown>>();
  let ended = false;
  return {
    store: {
      ...staged,
      put: (key, body) => {
        if (ended) return Promise.reject(new WriteAfterAttemptError(key, job));
        const written = staged.put(key, body);
        const settled: Promise<boolean> = written.then(
          () => inFlight.delete(settled),
          () => inFlight.delete(settled),
        );
        inFlight.add(settled);
        return written;
      },
    },
    end: async () => {
      ended = true;
      await Promise.all([...inFlight]);
    },
  };
}

/** Outputs looked up at once: the DeleteObjects parallelism of the S3 adapter. */
const OUTPUT_CHECK_CONCURRENCY = 8;

/**
 * Throws {@link OutputMissingError} for the first of `outputs` the store does not hold (one HEAD each,
 * a GetObject grant the worker has on staged segments): publication names only keys that exist.
 */
export async function checkOutputsExist(
  store: Pick<ObjectStore, 'head'>,
  job: JobRef,
  outputs: readonly string[],
): Promise<void> {
  await inBatches(outputs, 1, OUTPUT_CHECK_CONCURRENCY, async ([key]) => {
    try {
      await store.head(key as string);
    } catch (err) {
      throw err instanceof NotFoundError ? new OutputMissingError(key as string, job) : err;
    }
  });
}

/**
 * Heartbeat details are stored by Temporal with every beat and handed to every retried attempt: progress is a position,
 * never the data.
 */
export const MAX_PROGRESS_BYTES = 64 * 1024;

/**
 * A compactor heartbeated progress that cannot travel in heartbeat details: larger than {@link MAX_PROGRESS_BYTES}, or
 * not JSON.
 */
export class ProgressRefusedError extends TypedError {
  readonly failureType = 'ProgressRefused';
  constructor(
    readonly job: JobRef,
    reason: string,
    fix: string,
  ) {
    super(`the compactor of job ${job.jobId} (namespace ${job.namespaceId}) heartbeated progress ${reason}: ${fix}`);
  }
}

/**
 * A retried attempt was handed progress that is not its compactor's own (another format module's,
 * another version's, or no progress shape at all). It ends the job: read as a position, it could
 * mean "nothing left to do" and publish an empty group; the next job starts over.
 */
export class ProgressMismatchError extends TypedError {
  readonly failureType = 'ProgressMismatch';
  constructor(
    readonly job: JobRef,
    resume: unknown,
    expected: string,
  ) {
    super(
      `job ${job.jobId} (namespace ${job.namespaceId}) was resumed from progress that is not ${expected} (${describeResume(resume)}): ` +
        'it was heartbeated by another compactor or another version of it; the job ends and the next job starts over',
    );
  }
}

/** The start of a resume's JSON, for a message: enough to tell whose progress it is. */
const describeResume = (resume: unknown): string => {
  let text: string | undefined;
  try {
    text = JSON.stringify(resume);
  } catch {
    text = undefined;
  }
  text ??= typeof resume;
  return text.length > 120 ? `${text.slice(0, 120)}…` : text;
};

/**
 * The JSON of `progress`, or {@link ProgressRefusedError} when it is not JSON or larger than {@link
 * MAX_PROGRESS_BYTES}.
 */
export function checkProgress(job: JobRef, progress: unknown): string {
  const notJson = (what: string) =>
    new ProgressRefusedError(
      job,
      `that is not JSON (${what})`,
      'heartbeat details travel as JSON: make progress numbers, strings, arrays and plain objects (a BigInt as a string, no cycles)',
    );
  let text: string | undefined;
  try {
    text = JSON.stringify(progress);
  } catch (err) {
    // V8 draws a cycle's path over several lines.
    throw notJson(firstLineOf(err));
  }
  if (text === undefined) throw notJson(`a ${typeof progress}`);
  const bytes = Buffer.byteLength(text);
  if (bytes > MAX_PROGRESS_BYTES) {
    throw new ProgressRefusedError(
      job,
      `of ${bytes} bytes of JSON, over the limit of ${MAX_PROGRESS_BYTES} (MAX_PROGRESS_BYTES)`,
      "keep progress a small position (an output index, a last key) and put bulk state in staged objects under the job's prefix (stagedOutputKey)",
    );
  }
  return text;
}

/**
 * Runs `attempt` with `heartbeat` behind {@link checkProgress}: a refused progress throws and never
 * reaches the heartbeat details, and fails the attempt even when the compactor caught the throw and
 * went on (a retried attempt would resume from older progress and heartbeat the same again).
 */
export async function withCheckedProgress<T>(
  job: JobRef,
  heartbeat: (progress?: unknown) => void,
  attempt: (checked: (progress?: unknown) => void) => Promise<T>,
): Promise<T> {
  let refused: ProgressRefusedError | undefined;
  const checked = (progress?: unknown) => {
    if (progress !== undefined) {
      try {
        checkProgress(job, progress);
      } catch (err) {
        refused ??= err as ProgressRefusedError;
        throw err;
      }
    }
    heartbeat(progress);
  };
  let result: T;
  try {
    result = await attempt(checked);
  } catch (err) {
    throw refused ?? err;
  }
  if (refused) throw refused;
  return result;
}

/** One attempt of a compaction, as the worker hands it to a {@link Compactor}. */
export interface CompactionAttempt<P> {
  /** The job: its namespace, group and id, which name the prefix its outputs go under. */
  readonly job: CompactionJob;
  /**
   * The group's segments when the job started, in the root's order (a later one wins a tie, by the reference's rule).
   */
  readonly inputs: readonly string[];
  /**
   * The store to read inputs from and stage outputs to; it refuses writes outside the job's staged segment keys and
   * after the attempt ended.
   */
  readonly store: StagedStore;
  /** The worker's bounds on the merge: output size, fan-in, output format. */
  readonly limits: MergeLimits;
  /**
   * The progress the last attempt heartbeated, or undefined on the first attempt. Unchecked: it may
   * come from another compactor or another version of this one (a retry on another worker), so a
   * compactor checks it is its own before trusting it, and throws {@link ProgressMismatchError} if not.
   */
  readonly resume: P | undefined;
  /**
   * Records `progress` (when given) in the activity's heartbeat details, where a retried attempt
   * finds it as `resume`, and throws the cancellation when the job was cancelled (its lease lost).
   * A bare `heartbeat()` only beats: the progress last recorded stays what a retry resumes from.
   * Call it after each finished output and every few thousand records. Progress must be plain JSON
   * of at most {@link MAX_PROGRESS_BYTES} (Temporal heartbeat details): a position, never the data.
   * Other progress throws {@link ProgressRefusedError}, which fails the job.
   */
  heartbeat(progress?: P): void;
}

/** What a compaction produced: the staged keys to publish, in the order the group should list them. */
export interface CompactionOutputs {
  readonly outputs: readonly string[];
  /**
   * Staged segments holding the tombstones left out of `outputs` (every key whose newest record
   * in the inputs is a tombstone, by the format's own rule). Publication names them beside the
   * outputs when the group holds segments registered since the job read it, one of which may hold
   * an older version of a deleted key; otherwise they stay unreferenced and go with the job's
   * prefix. Absent: `outputs` hold every tombstone that wins its key.
   */
  readonly tombstones?: readonly string[];
  /**
   * The highest `seq` of a tombstone in `tombstones`. A publication that leaves the tombstone
   * segments out (the group holds only the inputs) raises the group's sequence floor to it in the
   * same root write (spec 6c.3), so no older version of a deleted key registered later can come back.
   * Absent with tombstone segments: publication always names them, and the tombstones are kept.
   */
  readonly tombstoneSeqFloor?: number;
  /** Records written to `outputs`, as the run's result reports them. */
  readonly recordsOut: number;
  /** Bytes of `outputs` as stored. */
  readonly bytesOut: number;
}

/**
 * A segment format's compactor. Guarantees it must keep (checked by `checkFormat`): output keys are
 * a function of the job and the inputs alone (so a resumed attempt writes no twins), writes go only
 * to staged segment keys of its job (enforced by the store it is given), progress fits in heartbeat
 * details (enforced by the heartbeat it is given), and a resumed attempt returns the same outputs
 * as an uninterrupted one. A worker holds a compactor of any progress type: `resume` is whatever
 * the previous attempt heartbeated.
 *
 * What it may drop: any record that does not win its key (a newer one does), and a winning
 * tombstone only by writing it to a segment of `tombstones`. Every other winner is in `outputs`. A
 * reader of the group then sees the same before and after publication, whatever was registered
 * during the job; a compaction of inputs holding any record returns at least one key in the two
 * lists, and publication refuses one that returns none (a compactor that lost its work).
 */
export interface Compactor<P = unknown> {
  /** Merges the attempt's inputs into staged outputs, resuming from `attempt.resume` when given. */
  compact(attempt: CompactionAttempt<P>): Promise<CompactionOutputs>;
}
