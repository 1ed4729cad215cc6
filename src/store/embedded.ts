/**
 * Embedded adapter on SQLite (Node's built-in `node:sqlite`), for zero-setup runs. Every
 * conditional write is one immediate transaction, so compare-and-swap stays correct across
 * processes sharing the file; ETags are random per write (stricter than S3's MD5: even identical
 * bytes get a new one).
 *
 * An object is stored in chunks of {@link CHUNK_BYTES}: the first in `objects.body`, the rest in
 * `object_chunks`, each row carrying the object's ETag. A stream reads one chunk at a time, so
 * memory stays bounded however large the object.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import type { DatabaseSync, StatementSync } from 'node:sqlite';
import {
  AFTER_ALL_UNDER,
  MAX_KEYS_PER_REQUEST,
  NotFoundError,
  ObjectChangedError,
  ObjectTooLargeError,
  PreconditionFailedError,
  StoreConfigError,
  type DeleteResult,
  type BucketVersioning,
  type ListPage,
  type ListRequest,
  type ObjectInfo,
  type ObjectStore,
  type StoredObject,
  type StreamedObject,
  type StreamOptions,
} from './port';
import { EMBEDDED_STORE_SETTINGS } from '../config/declaration';
import { inSixteenths, withinRange } from './slices';

/** Where the embedded store's SQLite file is. */
export interface EmbeddedStoreOptions {
  /** Database file; created with its folder when missing. `:memory:` for a private in-process store. */
  readonly path: string;
}

/** Environment variable naming the embedded store's file. */
export const EMBEDDED_ENV = EMBEDDED_STORE_SETTINGS.path.env;

/** The embedded store: one SQLite file (node:sqlite) that several processes share, for a single host. */
export function createEmbeddedObjectStore(options: EmbeddedStoreOptions): ObjectStore {
  return new EmbeddedObjectStore(options.path);
}

interface Row {
  key: string;
  body: Uint8Array;
  etag: string;
  size: number;
  last_modified_ms: number;
}

type Info = Omit<Row, 'body'>;

/**
 * `node:sqlite` looked up at run time rather than imported: on a Node without it (20) the package
 * still loads, S3 still works, and opening the embedded store says what to change.
 */
function openDatabase(path: string): DatabaseSync {
  const sqlite = process.getBuiltinModule('node:sqlite');
  if (!sqlite) {
    throw new StoreConfigError(
      EMBEDDED_ENV,
      `the embedded store needs node:sqlite, which Node ${process.version} lacks: run Node 24 (the engine this package is tested on), or use S3 (COMPACTION_S3_BUCKET)`,
    );
  }
  try {
    return new sqlite.DatabaseSync(path);
  } catch (err) {
    throw new StoreConfigError(EMBEDDED_ENV, `cannot open the embedded store at ${path}: ${(err as Error).message}`, {
      cause: err,
    });
  }
}

/** Bytes per stored chunk: what a stream holds in memory at once. */
export const CHUNK_BYTES = 1024 * 1024;

const newEtag = () => `"${randomBytes(16).toString('hex')}"`;

class EmbeddedObjectStore implements ObjectStore {
  readonly description: string;
  private readonly db: DatabaseSync;
  private readonly statements: Record<
    'get' | 'head' | 'etag' | 'upsert' | 'list' | 'delete' | 'chunk' | 'chunks' | 'insertChunk' | 'deleteChunks',
    StatementSync
  >;

  private readonly file: string;

  constructor(path: string) {
    this.description = `embedded:${path}`;
    // An in-memory database is this store object's alone.
    this.file = path === ':memory:' ? `:memory: ${randomBytes(8).toString('hex')}` : resolve(path);
    if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true });
    this.db = openDatabase(path);
    // WAL with synchronous NORMAL: a commit survives the crash of any process (the protocol's
    // failure model: killed workers), not a power cut; no fsync per write, which made each write
    // about 10x slower (bench/embedded-store.ts). better-sqlite3 built SQLite this way by default.
    this.db.exec('PRAGMA journal_mode = WAL');
    this.db.exec('PRAGMA synchronous = NORMAL');
    this.db.exec('PRAGMA busy_timeout = 10000');
    this.db.exec(`CREATE TABLE IF NOT EXISTS objects (
      key TEXT PRIMARY KEY COLLATE BINARY,
      body BLOB NOT NULL,
      etag TEXT NOT NULL,
      size INTEGER NOT NULL,
      last_modified_ms INTEGER NOT NULL
    ) WITHOUT ROWID`);
    this.db.exec(`CREATE TABLE IF NOT EXISTS object_chunks (
      key TEXT NOT NULL COLLATE BINARY,
      idx INTEGER NOT NULL,
      etag TEXT NOT NULL,
      bytes BLOB NOT NULL,
      PRIMARY KEY (key, idx)
    )`);
    this.statements = {
      get: this.db.prepare('SELECT * FROM objects WHERE key = ?'),
      head: this.db.prepare('SELECT key, etag, size, last_modified_ms FROM objects WHERE key = ?'),
      etag: this.db.prepare('SELECT etag FROM objects WHERE key = ?'),
      upsert: this.db.prepare(
        `INSERT INTO objects (key, body, etag, size, last_modified_ms) VALUES (@key, @body, @etag, @size, @now)
         ON CONFLICT (key) DO UPDATE SET body = @body, etag = @etag, size = @size, last_modified_ms = @now`,
      ),
      list: this.db.prepare(
        `SELECT key, etag, size, last_modified_ms FROM objects
         WHERE key > @after AND substr(key, 1, length(@prefix)) = @prefix ORDER BY key LIMIT @limit`,
      ),
      delete: this.db.prepare('DELETE FROM objects WHERE key = ?'),
      chunk: this.db.prepare('SELECT bytes FROM object_chunks WHERE key = @key AND idx = @idx AND etag = @etag'),
      chunks: this.db.prepare('SELECT bytes FROM object_chunks WHERE key = ? ORDER BY idx'),
      insertChunk: this.db.prepare(
        'INSERT INTO object_chunks (key, idx, etag, bytes) VALUES (@key, @idx, @etag, @bytes)',
      ),
      deleteChunks: this.db.prepare('DELETE FROM object_chunks WHERE key = ?'),
    };
  }

  async get(key: string, options: { maxBytes?: number } = {}): Promise<StoredObject> {
    if (options.maxBytes !== undefined) {
      const info = this.statements.head.get(key) as Info | undefined;
      if (info && info.size > options.maxBytes) throw new ObjectTooLargeError(key, info.size, options.maxBytes);
    }
    // One read transaction: the first chunk and the rest from the same version.
    const found = this.inTransaction('DEFERRED', () => {
      const row = this.statements.get.get(key) as Row | undefined;
      return row && { row, rest: (this.statements.chunks.all(key) as { bytes: Uint8Array }[]).map((c) => c.bytes) };
    });
    if (!found) throw new NotFoundError(key);
    const { row, rest } = found;
    return {
      key,
      body: new Uint8Array(Buffer.concat([row.body, ...rest])),
      etag: row.etag,
      lastModified: new Date(row.last_modified_ms),
    };
  }

  async getStream(key: string, options: StreamOptions = {}): Promise<StreamedObject> {
    const row = this.statements.get.get(key) as Row | undefined;
    if (!row) throw new NotFoundError(key);
    const chunks = this.chunksOf(row);
    const body = options.range ? withinRange(chunks, options.range) : chunks;
    return { key, body, etag: row.etag, lastModified: new Date(row.last_modified_ms) };
  }

  /**
   * The first chunk, then each later one read only when wanted; a chunk of another ETag means the object was rewritten
   * meanwhile.
   */
  private async *chunksOf(first: Row): AsyncGenerator<Uint8Array> {
    yield* inSixteenths(first.body);
    for (let offset = first.body.length, idx = 1; offset < first.size; idx++) {
      const chunk = this.statements.chunk.get({ key: first.key, idx, etag: first.etag }) as
        { bytes: Uint8Array } | undefined;
      if (!chunk) throw new ObjectChangedError(first.key, first.etag);
      offset += chunk.bytes.length;
      yield* inSixteenths(chunk.bytes);
    }
  }

  async head(key: string): Promise<ObjectInfo> {
    const row = this.statements.head.get(key) as Info | undefined;
    if (!row) throw new NotFoundError(key);
    return toInfo(row);
  }

  async putIfAbsent(key: string, body: Uint8Array): Promise<{ etag: string }> {
    return this.conditionalWrite(key, body, (current) => {
      if (current !== undefined) throw new PreconditionFailedError(key);
    });
  }

  async putIfMatch(key: string, body: Uint8Array, etag: string): Promise<{ etag: string }> {
    return this.conditionalWrite(key, body, (current) => {
      if (current === undefined) throw new NotFoundError(key);
      if (current !== etag) throw new PreconditionFailedError(key);
    });
  }

  async put(key: string, body: Uint8Array): Promise<{ etag: string }> {
    return this.conditionalWrite(key, body, () => undefined);
  }

  async list(request: ListRequest): Promise<ListPage> {
    const { prefix, delimiter } = request;
    const limit = Math.min(request.maxKeys ?? MAX_KEYS_PER_REQUEST, MAX_KEYS_PER_REQUEST);
    const objects: ObjectInfo[] = [];
    const commonPrefixes: string[] = [];
    // The cursor is the last key or common prefix returned; only a common prefix ends in the delimiter,
    // except an object whose key is the prefix itself (a folder marker), after which every child still follows.
    const cursor = request.cursor ?? request.startAfter;
    let after =
      cursor === undefined
        ? ''
        : delimiter && cursor.endsWith(delimiter) && cursor !== prefix
          ? cursor + AFTER_ALL_UNDER
          : cursor;
    let last: string | undefined;
    for (;;) {
      const rows = this.statements.list.all({ after, prefix, limit: limit + 1 }) as Info[];
      let rolledUp = false;
      for (const row of rows) {
        if (objects.length + commonPrefixes.length === limit) return { objects, commonPrefixes, nextCursor: last };
        const cut = delimiter ? row.key.indexOf(delimiter, prefix.length) : -1;
        if (cut >= 0) {
          last = row.key.slice(0, cut + delimiter!.length);
          commonPrefixes.push(last);
          after = last + AFTER_ALL_UNDER;
          rolledUp = true;
          break;
        }
        objects.push(toInfo(row));
        last = after = row.key;
      }
      if (!rolledUp && rows.length <= limit) return { objects, commonPrefixes, nextCursor: undefined };
    }
  }

  async deleteMany(keys: readonly string[]): Promise<DeleteResult> {
    for (let i = 0; i < keys.length; i += MAX_KEYS_PER_REQUEST) {
      this.inTransaction('IMMEDIATE', () => {
        for (const key of keys.slice(i, i + MAX_KEYS_PER_REQUEST)) {
          this.statements.delete.run(key);
          this.statements.deleteChunks.run(key);
        }
      });
    }
    return { deleted: [...keys], failed: [] };
  }

  async deleteIfMatch(key: string, etag: string): Promise<void> {
    this.inTransaction('IMMEDIATE', () => {
      const current = (this.statements.etag.get(key) as { etag: string } | undefined)?.etag;
      if (current === undefined) return;
      if (current !== etag) throw new PreconditionFailedError(key);
      this.statements.delete.run(key);
      this.statements.deleteChunks.run(key);
    });
  }

  async identity(): Promise<string> {
    return `embedded:${this.file}`;
  }

  async verifyAccess(): Promise<void> {
    this.db.prepare('SELECT 1').get();
  }

  /** A deleted row is gone: the file keeps no versions. */
  async versioning(): Promise<BucketVersioning> {
    return 'unversioned';
  }

  async close(): Promise<void> {
    if (this.db.isOpen) this.db.close();
  }

  /**
   * Runs `work` in one transaction, rolled back when it throws. IMMEDIATE takes the write lock at
   * BEGIN, so no other process writes between a check and the write it guards; DEFERRED (a read)
   * sees one version of the file throughout.
   */
  private inTransaction<T>(mode: 'DEFERRED' | 'IMMEDIATE', work: () => T): T {
    this.db.exec(`BEGIN ${mode}`);
    try {
      const result = work();
      this.db.exec('COMMIT');
      return result;
    } catch (err) {
      if (this.db.isTransaction) this.db.exec('ROLLBACK');
      throw err;
    }
  }

  /** Check and write in one immediate transaction: no other process can write between the two. */
  private conditionalWrite(
    key: string,
    body: Uint8Array,
    check: (currentEtag: string | undefined) => void,
  ): { etag: string } {
    const etag = newEtag();
    this.inTransaction('IMMEDIATE', () => {
      check((this.statements.etag.get(key) as { etag: string } | undefined)?.etag);
      this.statements.upsert.run({
        key,
        body: body.subarray(0, CHUNK_BYTES),
        etag,
        size: body.length,
        now: Date.now(),
      });
      this.statements.deleteChunks.run(key);
      for (let idx = 1; idx * CHUNK_BYTES < body.length; idx++) {
        this.statements.insertChunk.run({
          key,
          idx,
          etag,
          bytes: body.subarray(idx * CHUNK_BYTES, (idx + 1) * CHUNK_BYTES),
        });
      }
    });
    return { etag };
  }
}

function toInfo(row: Info): ObjectInfo {
  return { key: row.key, size: row.size, etag: row.etag, lastModified: new Date(row.last_modified_ms) };
}
