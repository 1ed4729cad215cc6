/**
 * A job's input list: the inputs `readGroup` fixed for the job and the ETag each was read at,
 * written once under the job's prefix and read back by its compaction and its publication. Temporal
 * payloads carry only its reference ({@link InputListRef}): the keys and ETags of a group of
 * 100,000 inputs take about 15 MB, past Temporal's 2 MiB payload limit.
 */
import { createHash } from 'node:crypto';
import { quoted, TypedError } from '../errors';
import { inputListKey, leaseKey } from '../keys';
import { NotFoundError, ObjectTooLargeError, type ObjectStore } from '../store';
import { LeaseLostError } from './job-lease';
import type { JobRef } from './lease-read';

/** What travels through Temporal in place of the group's inputs: a few hundred bytes, whatever the group's width. */
export interface InputListRef {
  /** The list's key under the job's prefix ({@link inputListKey}). */
  readonly key: string;
  /** Its ETag as written: a read of another version is refused. */
  readonly etag: string;
  /** How many inputs it names. */
  readonly count: number;
  /** SHA-256 of its bytes (hex), checked on every read beside the ETag. */
  readonly sha256: string;
}

/** The job's inputs, in the group's order, with the ETag of each (`etags[i]` of `inputs[i]`). */
export interface InputList {
  readonly group: string;
  readonly inputs: readonly string[];
  readonly etags: readonly string[];
}

const KIND = 'compaction_inputs';
const FORMAT_VERSION = 1;
/** The largest input list read back: 100,000 inputs take about 15 MB. */
export const MAX_INPUT_LIST_BYTES = 64 * 1024 * 1024;

/**
 * The input list is gone, changed since it was written, or not one of this job's: its inputs are unknown, so the job
 * ends.
 */
export class InputListUnreadableError extends TypedError {
  readonly failureType = 'InputListUnreadable';
  constructor(
    readonly key: string,
    readonly reason: string,
    /** Deleted, rather than changed or another job's. */
    readonly gone = false,
  ) {
    super(
      `input list ${key} ${reason}: the job ends without publishing; start the compaction again, which reads the group afresh`,
    );
  }
}

const sha256 = (bytes: Uint8Array): string => createHash('sha256').update(bytes).digest('hex');

/** Writes the input list of attempt `attempt` of the job's group read (each attempt its own key: none overwritten). */
export async function writeInputList(
  store: ObjectStore,
  job: JobRef,
  attempt: number,
  list: InputList,
): Promise<InputListRef> {
  const key = inputListKey(job.namespaceId, job.jobId, attempt);
  const body = Buffer.from(
    JSON.stringify({
      kind: KIND,
      format_version: FORMAT_VERSION,
      namespace_id: job.namespaceId,
      job_id: job.jobId,
      group: list.group,
      inputs: list.inputs.map((input, i) => [input, list.etags[i]]),
    }),
  );
  const { etag } = await store.put(key, body);
  return { key, etag, count: list.inputs.length, sha256: sha256(body) };
}

/**
 * The input list `ref` names, as written: same ETag, same bytes, this job's, `ref.count` inputs. Anything else is an
 * {@link InputListUnreadableError}.
 */
export async function readInputList(store: ObjectStore, job: JobRef, ref: InputListRef): Promise<InputList> {
  const object = await store.get(ref.key, { maxBytes: MAX_INPUT_LIST_BYTES }).catch((err: unknown) => {
    if (err instanceof NotFoundError)
      throw new InputListUnreadableError(
        ref.key,
        'is gone (a collector reclaims the objects of a prefix with no lease once past the staging grace)',
        true,
      );
    if (err instanceof ObjectTooLargeError)
      throw new InputListUnreadableError(ref.key, `is larger than ${MAX_INPUT_LIST_BYTES} bytes`);
    throw err;
  });
  if (object.etag !== ref.etag)
    throw new InputListUnreadableError(ref.key, `changed since it was written (ETag ${ref.etag}, now ${object.etag})`);
  if (sha256(object.body) !== ref.sha256)
    throw new InputListUnreadableError(ref.key, 'does not hold the bytes written (SHA-256 differs)');
  const parsed = JSON.parse(Buffer.from(object.body).toString('utf8')) as {
    kind?: unknown;
    format_version?: unknown;
    namespace_id?: unknown;
    job_id?: unknown;
    group?: unknown;
    inputs?: unknown;
  };
  const inputs = parsed.inputs;
  const fits =
    parsed.kind === KIND &&
    parsed.format_version === FORMAT_VERSION &&
    parsed.namespace_id === job.namespaceId &&
    parsed.job_id === job.jobId &&
    typeof parsed.group === 'string' &&
    Array.isArray(inputs) &&
    inputs.length === ref.count &&
    inputs.every(
      (pair) => Array.isArray(pair) && pair.length === 2 && typeof pair[0] === 'string' && typeof pair[1] === 'string',
    );
  if (!fits)
    throw new InputListUnreadableError(
      ref.key,
      `is not the input list of job ${quoted(job.jobId)} with ${ref.count} inputs`,
    );
  const pairs = inputs as [string, string][];
  return { group: parsed.group as string, inputs: pairs.map(([key]) => key), etags: pairs.map(([, etag]) => etag) };
}

/**
 * {@link readInputList}, or undefined when the list is gone: only a collector deletes it, with the job's
 * prefix.
 */
export async function readInputListIfAny(
  store: ObjectStore,
  job: JobRef,
  ref: InputListRef,
): Promise<InputList | undefined> {
  return readInputList(store, job, ref).catch((err: unknown) => {
    if (err instanceof InputListUnreadableError && err.gone) return undefined;
    throw err;
  });
}

/**
 * {@link readInputList} for a job that holds its lease. The list is written before the lease,
 * so it is the one object of the job a collector may take for an orphan's (a prefix with no lease,
 * past the staging grace): when the job waited that long between reading its group and creating its
 * lease, say with no worker free. The job has then lost its prefix as a fenced job loses its lease:
 * a {@link LeaseLostError}, so it publishes nothing and a new job reads the group afresh.
 */
export async function readInputListUnderLease(store: ObjectStore, job: JobRef, ref: InputListRef): Promise<InputList> {
  const list = await readInputListIfAny(store, job, ref);
  if (list) return list;
  throw new LeaseLostError(
    leaseKey(job.namespaceId, job.jobId),
    `the job's input list ${ref.key} is gone: a collector reclaimed its prefix as an orphan's before the lease was created`,
  );
}
