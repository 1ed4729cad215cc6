/** Reading a lease: bytes and ETag from one GET, decoded strictly. */
import { leaseKey, type MetadataCompactionId, type NamespaceId } from '../keys';
import { decodeLease, LeaseCorruptError, MAX_LEASE_BYTES, type LeaseState } from '../lease';
import { NotFoundError, ObjectTooLargeError, type ObjectStore } from '../store';

export interface JobRef {
  readonly namespaceId: NamespaceId;
  readonly jobId: MetadataCompactionId;
}

export type LeaseRead =
  /** `lastModified`: the store's, when the bytes came from a GET (not handed on from an earlier read). */
  | { readonly lease: LeaseState; readonly etag: string; readonly bytes: Uint8Array; readonly lastModified?: Date }
  | { readonly missing: true }
  | { readonly corrupt: string };

/** One GET; a missing lease and a corrupt one are outcomes, transient store failures are thrown. */
export async function readLease(store: ObjectStore, job: JobRef): Promise<LeaseRead> {
  const key = leaseKey(job.namespaceId, job.jobId);
  try {
    return leaseReadOf(await store.get(key, { maxBytes: MAX_LEASE_BYTES }), job);
  } catch (err) {
    if (err instanceof NotFoundError) return { missing: true };
    if (err instanceof ObjectTooLargeError) return { corrupt: new LeaseCorruptError(key, err.message).message };
    throw err;
  }
}

/**
 * Decodes bytes read earlier (and handed on, e.g. through workflow history) exactly as {@link readLease} decodes a GET.
 */
export function leaseReadOf(
  object: { readonly body: Uint8Array; readonly etag: string; readonly lastModified?: Date | undefined },
  job: JobRef,
): LeaseRead {
  try {
    return {
      lease: decodeLease(object.body, job),
      etag: object.etag,
      bytes: object.body,
      ...(object.lastModified && { lastModified: object.lastModified }),
    };
  } catch (err) {
    if (err instanceof LeaseCorruptError) return { corrupt: err.message };
    throw err;
  }
}
