/**
 * The job's side of the lease (spec section 5): create before the first output object, refresh
 * by compare-and-swap, and decide every unclear outcome by re-reading, never by guessing.
 */
import { TypedError } from '../errors';
import { leaseKey } from '../keys';
import { createLeaseState, encodeLease, nextHeartbeatMs, refreshLeaseState, type LeaseState } from '../lease';
import { AmbiguousError, ConflictError, NotFoundError, PreconditionFailedError, type ObjectStore } from '../store';
import { readLease, type JobRef } from './lease-read';

/** The lease as this job last wrote or adopted it, with the ETag of that version. */
export interface HeldLease {
  readonly lease: LeaseState;
  readonly etag: string;
}

/** The job has lost its prefix for good: the lease was claimed, deleted or is unreadable. It publishes nothing. */
export class LeaseLostError extends TypedError {
  readonly failureType = 'LeaseLost';
  constructor(
    readonly key: string,
    readonly reason: string,
  ) {
    super(`lease ${key} lost: ${reason}`);
  }
}

/** Put-if-absent found another job's lease under a fresh job id: an internal error; the job writes nothing. */
export class JobIdCollisionError extends TypedError {
  readonly failureType = 'JobIdCollision';
}

/**
 * Creates the lease with put-if-absent. `startedAtMs` is fixed by the caller, so a retried create
 * writes the same bytes and recognises its own earlier write after a lost response; if a collector
 * has claimed that write since, the job has lost its lease ({@link LeaseLostError}).
 */
export async function createJobLease(
  store: ObjectStore,
  job: JobRef & { ownerId: string; startedAtMs: number },
): Promise<HeldLease> {
  const lease = createLeaseState({
    jobId: job.jobId,
    namespaceId: job.namespaceId,
    ownerId: job.ownerId,
    nowMs: job.startedAtMs,
  });
  const key = leaseKey(job.namespaceId, job.jobId);
  try {
    return { lease, etag: (await store.putIfAbsent(key, encodeLease(lease))).etag };
  } catch (err) {
    if (!(err instanceof PreconditionFailedError || err instanceof ConflictError || err instanceof AmbiguousError))
      throw err;
    const read = await readLease(store, job);
    if ('lease' in read && read.lease.owner_id === lease.owner_id && read.lease.started_at_ms === lease.started_at_ms) {
      // Our own create landed; a collector may have claimed it since (the retry came after expiry).
      if (read.lease.status === 'reaping')
        throw new LeaseLostError(key, 'a collector claimed it before its create was confirmed');
      return { lease: read.lease, etag: read.etag };
    }
    // No lease after a 409 or an unknown outcome: the create did not land (or not yet); retrying it is safe.
    if ('missing' in read && (err instanceof AmbiguousError || err instanceof ConflictError)) throw err;
    // A 412 proves a lease stood at this fresh job id; only a collector deletes one, after claiming it. Either it
    // was this job's own earlier create (landed, its answer lost, expired and reclaimed before this retry) or a
    // colliding job's: either way the prefix is not this job's, and running again as a new job is the answer.
    if ('missing' in read)
      throw new LeaseLostError(
        key,
        'a lease stood here when the create was retried and has since been claimed and deleted',
      );
    // A collector claims a prefix with no lease by creating one `reaping` before it deletes there: the prefix is its.
    if ('lease' in read && read.lease.status === 'reaping')
      throw new LeaseLostError(
        key,
        `collector pass ${read.lease.owner_id} claimed the prefix before the lease was created`,
      );
    throw new JobIdCollisionError(`${key} already exists and is not this job's lease: job id collision`);
  }
}

/**
 * Each re-read either settles the outcome or adopts a newer version of this job's own lease; bounded so a flapping
 * store surfaces.
 */
const MAX_REFRESH_ROUNDS = 5;

/**
 * One refresh: CAS a strictly later heartbeat. On 412/404/409 or an unknown outcome, re-read once:
 * missing or `reaping` → {@link LeaseLostError}; `active` (only this job writes `active` for its id)
 * → our write landed, or adopt that ETag and CAS again.
 */
export async function refreshJobLease(
  store: ObjectStore,
  job: JobRef,
  held: HeldLease,
  clockMs: () => number,
): Promise<HeldLease> {
  const key = leaseKey(job.namespaceId, job.jobId);
  let current = held;
  let lastError: unknown;
  for (let round = 0; round < MAX_REFRESH_ROUNDS; round++) {
    const next = refreshLeaseState(current.lease, nextHeartbeatMs(current.lease, clockMs()));
    const bytes = encodeLease(next);
    try {
      return { lease: next, etag: (await store.putIfMatch(key, bytes, current.etag)).etag };
    } catch (err) {
      const unclear =
        err instanceof PreconditionFailedError ||
        err instanceof NotFoundError ||
        err instanceof ConflictError ||
        err instanceof AmbiguousError;
      if (!unclear) throw err;
      lastError = err;
    }
    const read = await readLease(store, job);
    if ('missing' in read) throw new LeaseLostError(key, 'the lease is gone');
    if ('corrupt' in read) throw new LeaseLostError(key, read.corrupt);
    if (read.lease.status === 'reaping') throw new LeaseLostError(key, 'a collector claimed it');
    if (sameBytes(read.bytes, bytes)) return { lease: next, etag: read.etag };
    current = { lease: read.lease, etag: read.etag };
  }
  throw lastError;
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((v, i) => v === b[i]);
}
