/** The lease on the wire: the envelope of kind `compaction_lease` around the seed's fields. */
import { bounded, TypedError } from '../errors';
import { z } from 'zod';
import { decodeEnvelope, describeIssues, encodeEnvelope } from '../envelope';
import type { MetadataCompactionId, NamespaceId } from '../keys';
import { leaseKey } from '../keys';
import type { LeaseState } from './state';

export const LEASE_KIND = 'compaction_lease';
/** A lease is a few hundred bytes; anything far larger at a lease key is corruption, not something to read. */
export const MAX_LEASE_BYTES = 64 * 1024;

/** The lease at `key` does not decode, or names another job or namespace than its key. */
export class LeaseCorruptError extends TypedError {
  readonly failureType = 'LeaseCorrupt';
  /**
   * What is wrong, {@link bounded}: a lease's bytes are anyone's, and the reason travels in survey results and reports.
   */
  readonly reason: string;
  constructor(
    readonly key: string,
    reason: string,
  ) {
    super(`lease ${key} is corrupt: ${bounded(reason)}`);
    this.reason = bounded(reason);
  }
}

const millis = z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER);
const payloadSchema = z.strictObject({
  job_id: z.string().regex(/^cmp_[0-9a-f]{32}$/),
  namespace_id: z.string().regex(/^[a-z0-9][a-z0-9_-]{0,62}$/),
  owner_id: z.string().min(1).max(256),
  status: z.enum(['active', 'reaping']),
  started_at_ms: millis,
  heartbeat_at_ms: millis,
});

/** Encodes in the seed's field order; the bytes change whenever status or heartbeat does. */
export function encodeLease(lease: LeaseState): Uint8Array {
  return encodeEnvelope(LEASE_KIND, {
    job_id: lease.job_id,
    namespace_id: lease.namespace_id,
    owner_id: lease.owner_id,
    status: lease.status,
    started_at_ms: lease.started_at_ms,
    heartbeat_at_ms: lease.heartbeat_at_ms,
  });
}

/** Decodes the lease read from `namespaces/{ns}/…/{job}/lease.json`; any defect is a {@link LeaseCorruptError}. */
export function decodeLease(
  bytes: Uint8Array,
  expected: { namespaceId: NamespaceId; jobId: MetadataCompactionId },
): LeaseState {
  const key = leaseKey(expected.namespaceId, expected.jobId);
  const corrupt = (reason: string) => new LeaseCorruptError(key, reason);
  if (bytes.length > MAX_LEASE_BYTES)
    throw corrupt(`${bytes.length} bytes, more than a lease can be (${MAX_LEASE_BYTES})`);
  const parsed = payloadSchema.safeParse(decodeEnvelope(LEASE_KIND, bytes, corrupt).payload);
  if (!parsed.success) throw corrupt(`payload: ${describeIssues(parsed.error)}`);
  const payload = parsed.data;
  if (payload.job_id !== expected.jobId) throw corrupt(`names job ${payload.job_id}, not the job of its key`);
  if (payload.namespace_id !== expected.namespaceId) {
    throw corrupt(`names namespace ${payload.namespace_id}, not the namespace of its key`);
  }
  if (payload.heartbeat_at_ms < payload.started_at_ms) throw corrupt('heartbeat_at_ms is before started_at_ms');
  return Object.freeze(payload as LeaseState);
}
