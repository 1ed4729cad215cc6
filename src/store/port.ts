/**
 * The object-store port: the few operations the protocol needs, with S3's conditional-write
 * semantics. Activities depend on this interface only; adapters translate their backend's
 * failures into the typed errors below and nothing else.
 */
import { TypedError } from '../errors';

/**
 * Body, ETag and LastModified of one object, all from the same read: a second read could pair new bytes with an old
 * ETag.
 */
export interface StoredObject {
  readonly key: string;
  readonly body: Uint8Array;
  readonly etag: string;
  /** The store's own clock; undefined when the store gave none (treated as young by the collector). */
  readonly lastModified: Date | undefined;
}

export interface StreamedObject {
  readonly key: string;
  readonly body: AsyncIterable<Uint8Array>;
  readonly etag: string;
  readonly lastModified: Date | undefined;
}

export interface ObjectInfo {
  readonly key: string;
  readonly size: number;
  readonly etag: string | undefined;
  readonly lastModified: Date | undefined;
}

export interface ListRequest {
  readonly prefix: string;
  /** List keys strictly after this one (a resumed walk). */
  readonly startAfter?: string;
  /** Roll keys up to common prefixes at this delimiter (discovery of namespaces and job prefixes). */
  readonly delimiter?: string;
  /** Opaque cursor from the previous page. */
  readonly cursor?: string;
  /** At most 1000, like S3. */
  readonly maxKeys?: number;
}

/** One page of an ascending listing. */
export interface ListPage {
  readonly objects: readonly ObjectInfo[];
  readonly commonPrefixes: readonly string[];
  /** Present when there is another page. */
  readonly nextCursor: string | undefined;
}

export interface DeleteFailure {
  readonly key: string;
  readonly code: string;
  readonly message: string;
}

/** Outcome of a batched delete: a missing key counts as deleted, every other per-key error is reported. */
export interface DeleteResult {
  readonly deleted: readonly string[];
  readonly failed: readonly DeleteFailure[];
}

/**
 * The bucket's versioning: with `enabled` (or `suspended`, for objects written while it was enabled)
 * a deletion leaves a noncurrent version that still costs storage until a lifecycle rule expires it
 * (docs/operations.md). `unknown`: the store would not say (e.g. no `s3:GetBucketVersioning` grant).
 */
export type BucketVersioning = 'enabled' | 'suspended' | 'unversioned' | 'unknown';

/**
 * Appended to a prefix, sorts after every key under it (listings order keys as UTF-8 bytes, like S3): resuming after a
 * common prefix skips it whole.
 */
export const AFTER_ALL_UNDER = '\u{10FFFF}';

/** S3 caps a DeleteObjects request and a listing page at 1000 keys. */
export const MAX_KEYS_PER_REQUEST = 1000;

/** How {@link ObjectStore.getStream} reads, for a store that reads an object in windows (S3: ranged GETs). */
export interface StreamOptions {
  /**
   * Windows this many times the store's own (a whole number, at least 1; the store caps a window): a
   * caller that reads few streams at once spends the memory many would hold on fewer, larger requests.
   */
  readonly windowMultiple?: number;
  /**
   * Only bytes [start, end) of the object (end clamped to its size): a merge of one key range reads
   * the blocks that hold it, and a reader of a block index the object's tail. Absent: the whole object.
   */
  readonly range?: ByteRange;
}

/** Bytes [start, end) of an object: whole numbers, start < end. */
export interface ByteRange {
  readonly start: number;
  readonly end: number;
}

/** The object-store port: everything the protocol asks of a store, which each adapter implements (docs/stores.md). */
export interface ObjectStore {
  /** For logs and errors: the backend and its bucket or file, never a credential. */
  readonly description: string;
  /**
   * What a run records as the store it works on, the same for every client of the same objects:
   * S3's bucket and endpoint, the embedded store's absolute file. A worker bound to another store
   * (see {@link sameStore}) refuses the run's activities (`StoreMismatchError`). Optional: an adapter
   * without it is named by its {@link description}.
   */
  identity?(): Promise<string>;
  /** Throws {@link NotFoundError}; {@link ObjectTooLargeError} when larger than `maxBytes` (nothing is read). */
  get(key: string, options?: { maxBytes?: number }): Promise<StoredObject>;
  /**
   * Streams the body (segments are read this way, so memory stays bounded); ETag and LastModified
   * from the same version, every byte too ({@link ObjectChangedError} otherwise). An open stream holds
   * no connection while it is not being read, so any number may be open at once.
   */
  getStream(key: string, options?: StreamOptions): Promise<StreamedObject>;
  /** An object's ETag, size and LastModified without its body; throws {@link NotFoundError}. */
  head(key: string): Promise<ObjectInfo>;
  /** Create only if absent (`If-None-Match: *`); {@link PreconditionFailedError} when it exists. */
  putIfAbsent(key: string, body: Uint8Array): Promise<{ etag: string }>;
  /**
   * Compare-and-swap (`If-Match`): {@link PreconditionFailedError}, {@link NotFoundError} (never creates), {@link
   * ConflictError}.
   */
  putIfMatch(key: string, body: Uint8Array, etag: string): Promise<{ etag: string }>;
  /** Unconditional write, for immutable objects under a fresh key (segments). */
  put(key: string, body: Uint8Array): Promise<{ etag: string }>;
  /** One page of the keys under a prefix, in key order; `nextCursor` when there is another. */
  list(request: ListRequest): Promise<ListPage>;
  /**
   * Deletes in requests of at most {@link MAX_KEYS_PER_REQUEST} keys; per-key errors are returned, not thrown, except a
   * denied key ({@link StoreConfigError}).
   */
  deleteMany(keys: readonly string[]): Promise<DeleteResult>;
  /**
   * Conditional delete (`If-Match` on DeleteObject): deletes `key` only while its ETag is `etag`, so a
   * delete that lands late cannot remove a version written since. Resolves once that version is gone:
   * deleted now, or already missing (a 404, as the SDK's retry of a delete that landed meets).
   * {@link PreconditionFailedError} when another version is there, which stays; {@link ConflictError};
   * {@link AmbiguousError}. A store that ignores the condition deletes whatever is there: `store check`
   * reports it (`conditionalDelete`), docs/stores.md says what that leaves open.
   */
  deleteIfMatch(key: string, etag: string): Promise<void>;
  /** Checks that the bucket exists and the credentials work; throws {@link StoreConfigError} naming the setting. */
  verifyAccess(): Promise<void>;
  /** Whether deletions leave noncurrent versions behind; never throws (`unknown` instead). */
  versioning(): Promise<BucketVersioning>;
  /** Releases the adapter's sockets or file; no call after it. */
  close(): Promise<void>;
}

/** What a run records as the store it works on: the adapter's {@link ObjectStore.identity}, else its description. */
export const storeIdentity = async (store: ObjectStore): Promise<string> =>
  store.identity ? store.identity() : store.description;

/**
 * Whether two identities name the same store: the same bucket (or file), whatever endpoint each
 * reaches it at. The endpoint is recorded so a message says where each side looks, but one bucket is
 * often reached at several (a VPC endpoint, a proxy): only the name decides.
 */
export const sameStore = (a: string, b: string): boolean => storeName(a) === storeName(b);
const storeName = (identity: string): string =>
  identity.startsWith('s3://') ? identity.replace(/ at \S+$/, '') : identity;

/** Base of every store failure; `key` names the object (or bucket) concerned. */
export abstract class StoreError extends TypedError {
  constructor(
    readonly key: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** The key holds no object: a read of a missing key, or a conditional write whose object is gone. */
export class NotFoundError extends StoreError {
  readonly failureType = 'NotFound';
  constructor(key: string) {
    super(key, `${key}: not found`);
  }
}

/** 412: the object changed (CAS) or exists (create). */
export class PreconditionFailedError extends StoreError {
  readonly failureType = 'PreconditionFailed';
  constructor(key: string) {
    super(key, `${key}: precondition failed`);
  }
}

/** 409 ConditionalRequestConflict: a concurrent conditional write; outcome unknown until re-read. */
export class ConflictError extends StoreError {
  readonly failureType = 'Conflict';
  constructor(key: string) {
    super(key, `${key}: concurrent conditional write (409)`);
  }
}

/** Timeout, 5xx after retries, lost response: the write may or may not have landed. Re-read, never guess. */
export class AmbiguousError extends StoreError {
  readonly failureType = 'Ambiguous';
  constructor(key: string, reason: string, options?: { cause?: unknown }) {
    super(key, `${key}: outcome unknown (${reason})`, options);
  }
}

/** A read failed for a transient reason (timeout, 5xx, connection): retry later. */
export class StoreUnavailableError extends StoreError {
  readonly failureType = 'StoreUnavailable';
  constructor(key: string, reason: string, options?: { cause?: unknown }) {
    super(key, `${key}: store unavailable (${reason})`, options);
  }
}

/**
 * An object read in several requests changed between them (its ETag or size is no longer the first
 * request's): the bytes read so far belong to another version. Inputs are immutable, so this is a
 * writer breaking the protocol. Retryable as a store error; a compaction makes it InputChanged,
 * which is not (a retry would resume from progress made of the old version).
 */
export class ObjectChangedError extends StoreError {
  readonly failureType = 'ObjectChanged';
  constructor(
    key: string,
    readonly etag: string,
  ) {
    super(key, `${key}: changed while being read (no longer ETag ${etag}); an immutable object was rewritten`);
  }
}

/** The object is larger than the caller allows (e.g. a 100 MB object at a lease key); nothing was read. */
export class ObjectTooLargeError extends StoreError {
  readonly failureType = 'ObjectTooLarge';
  constructor(
    key: string,
    readonly size: number,
    readonly maxBytes: number,
  ) {
    super(key, `${key}: ${size} bytes exceeds the limit of ${maxBytes}`);
  }
}

/** A setting is wrong (missing bucket, rejected credentials, unreachable endpoint); `setting` names it. */
export class StoreConfigError extends StoreError {
  readonly failureType = 'StoreConfig';
  constructor(
    readonly setting: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(setting, message, options);
  }
}
