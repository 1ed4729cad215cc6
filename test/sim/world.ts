/**
 * The simulated bucket: objects applied in the order the scheduler delivers requests, with S3's
 * semantics for what the protocol relies on. ETags are the MD5 of the body as S3 gives them for a
 * single-part upload (equal bytes, equal ETag: the protocol must change the bytes on every write);
 * `LastModified` is the store's clock (the simulation's time, to the millisecond) when the write
 * was applied; listings ascend in UTF-8 byte order; a deletion of a missing key succeeds, a
 * conditional one is refused (404, as S3 answers). A bucket that ignores conditional deletes (as
 * MinIO does, `store check`: conditional delete `ignored`) deletes whatever version is there.
 */
import { createHash } from 'node:crypto';
import {
  AFTER_ALL_UNDER,
  MAX_KEYS_PER_REQUEST,
  NotFoundError,
  ObjectTooLargeError,
  PreconditionFailedError,
  type DeleteResult,
  type ListPage,
  type ListRequest,
  type ConditionalDelete,
  type ObjectInfo,
  type StoredObject,
} from '../../src/store';

export interface SimObject {
  readonly body: Uint8Array;
  readonly etag: string;
  /** Store time when the write was applied. */
  readonly lastModified: number;
}

/** A change the bucket applied: what the invariants and the model watch. */
export type Change =
  | { readonly kind: 'write'; readonly key: string; readonly before: SimObject | undefined; readonly after: SimObject }
  | { readonly kind: 'delete'; readonly key: string; readonly before: SimObject };

const md5Etag = (body: Uint8Array): string => `"${createHash('md5').update(body).digest('hex')}"`;

/**
 * S3 compares keys as UTF-8 bytes; for the keys here (ASCII and the code point U+10FFFF) code point order is the same.
 */
function compareKeys(a: string, b: string): number {
  if (a === b) return 0;
  const [x, y] = [Buffer.from(a), Buffer.from(b)];
  return Buffer.compare(x, y);
}

export class World {
  private readonly objects = new Map<string, SimObject>();
  private sortedKeys: string[] | undefined;

  constructor(
    private readonly clock: () => number,
    private readonly onChange: (change: Change) => void,
    /** What the bucket does with `If-Match` on DeleteObject: S3's answer, or MinIO's (the condition ignored). */
    readonly conditionalDelete: ConditionalDelete = 'honoured',
  ) {}

  has(key: string): boolean {
    return this.objects.has(key);
  }

  peek(key: string): SimObject | undefined {
    return this.objects.get(key);
  }

  keys(): readonly string[] {
    this.sortedKeys ??= [...this.objects.keys()].sort(compareKeys);
    return this.sortedKeys;
  }

  get(key: string, maxBytes?: number): StoredObject {
    const object = this.require(key);
    if (maxBytes !== undefined && object.body.length > maxBytes)
      throw new ObjectTooLargeError(key, object.body.length, maxBytes);
    return { key, body: new Uint8Array(object.body), etag: object.etag, lastModified: new Date(object.lastModified) };
  }

  head(key: string): ObjectInfo {
    return this.info(key, this.require(key));
  }

  putIfAbsent(key: string, body: Uint8Array): { etag: string } {
    if (this.objects.has(key)) throw new PreconditionFailedError(key);
    return this.write(key, body);
  }

  /** Never creates: `If-Match` on a missing key is a 404. */
  putIfMatch(key: string, body: Uint8Array, etag: string): { etag: string } {
    const current = this.objects.get(key);
    if (current === undefined) throw new NotFoundError(key);
    if (current.etag !== etag) throw new PreconditionFailedError(key);
    return this.write(key, body);
  }

  put(key: string, body: Uint8Array): { etag: string } {
    return this.write(key, body);
  }

  /**
   * One page of ListObjectsV2: `startAfter` compares keys, a cursor goes on after the last key or common prefix
   * returned.
   */
  list(request: ListRequest): ListPage {
    const { prefix, delimiter } = request;
    const limit = Math.min(request.maxKeys ?? MAX_KEYS_PER_REQUEST, MAX_KEYS_PER_REQUEST);
    let after = request.startAfter ?? '';
    if (request.cursor !== undefined)
      after =
        delimiter && request.cursor.endsWith(delimiter) && request.cursor !== prefix
          ? request.cursor + AFTER_ALL_UNDER
          : request.cursor;
    const objects: ObjectInfo[] = [];
    const commonPrefixes: string[] = [];
    let last: string | undefined;
    for (const key of this.keys()) {
      if (!key.startsWith(prefix) || compareKeys(key, after) <= 0) continue;
      const cut = delimiter ? key.indexOf(delimiter, prefix.length) : -1;
      const item = cut >= 0 ? key.slice(0, cut + delimiter!.length) : key;
      if (item === last) continue;
      if (objects.length + commonPrefixes.length === limit) return { objects, commonPrefixes, nextCursor: last };
      if (cut >= 0) commonPrefixes.push(item);
      else objects.push(this.info(key, this.objects.get(key)!));
      last = item;
    }
    return { objects, commonPrefixes, nextCursor: undefined };
  }

  /**
   * Deletes every key but those in `failing` (reported as S3 reports a per-key error); a missing key counts as deleted.
   */
  deleteMany(keys: readonly string[], failing: ReadonlySet<string> = new Set()): DeleteResult {
    const deleted: string[] = [];
    for (const key of keys) {
      if (failing.has(key)) continue;
      const before = this.objects.get(key);
      if (before !== undefined) {
        this.objects.delete(key);
        this.sortedKeys = undefined;
        this.onChange({ kind: 'delete', key, before });
      }
      deleted.push(key);
    }
    return {
      deleted,
      failed: keys
        .filter((k) => failing.has(k))
        .map((key) => ({ key, code: 'InternalError', message: 'We encountered an internal error. Please try again.' })),
    };
  }

  /**
   * S3's conditional delete: a 404 for a missing key, a 412 for another version, which stays. A bucket
   * that ignores the condition deletes the key as DeleteObject does without it: any version, and a
   * missing key counts as deleted.
   */
  deleteIfMatch(key: string, etag: string): void {
    if (this.conditionalDelete === 'ignored') {
      this.deleteMany([key]);
      return;
    }
    const current = this.require(key);
    if (current.etag !== etag) throw new PreconditionFailedError(key);
    this.deleteMany([key]);
  }

  private require(key: string): SimObject {
    const object = this.objects.get(key);
    if (object === undefined) throw new NotFoundError(key);
    return object;
  }

  private info(key: string, object: SimObject): ObjectInfo {
    return { key, size: object.body.length, etag: object.etag, lastModified: new Date(object.lastModified) };
  }

  private write(key: string, body: Uint8Array): { etag: string } {
    const before = this.objects.get(key);
    const after: SimObject = { body: new Uint8Array(body), etag: md5Etag(body), lastModified: this.clock() };
    if (before === undefined) this.sortedKeys = undefined;
    this.objects.set(key, after);
    this.onChange({ kind: 'write', key, before, after });
    return { etag: after.etag };
  }
}
