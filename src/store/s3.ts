/**
 * S3 adapter. Conditional writes map to `If-None-Match: *` and `If-Match`; every SDK failure is
 * translated into the port's typed errors, with writes whose outcome is unknown as Ambiguous.
 *
 * Time bounds: the operation deadline covers a request until its response arrives (the SDK's
 * retries included); a response body is then bounded by progress (the idle timeout), not by total
 * time. Streams are read as ranged GETs of one window each, with the windows of the whole store in
 * flight capped: however many objects are open, no socket is held between windows, and the
 * sockets they use are bounded.
 */
import type { Readable } from 'node:stream';
import {
  DeleteObjectCommand,
  DeleteObjectsCommand,
  GetBucketVersioningCommand,
  GetObjectCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
  type S3ClientConfig,
} from '@aws-sdk/client-s3';
import {
  AmbiguousError,
  ConflictError,
  MAX_KEYS_PER_REQUEST,
  NotFoundError,
  ObjectChangedError,
  ObjectTooLargeError,
  PreconditionFailedError,
  StoreError,
  StoreConfigError,
  StoreUnavailableError,
  type BucketVersioning,
  type DeleteFailure,
  type DeleteResult,
  type ListPage,
  type ListRequest,
  type ObjectInfo,
  type ObjectStore,
  type StoredObject,
  type StreamedObject,
  type StreamOptions,
} from './port';
import { applyDefaults, environment, envNames, S3_SETTINGS, settingsSetInEnv, TIMING_SETTINGS } from '../config';
import { NAMESPACES_PREFIX } from '../keys';
import { inBatches } from './batches';
import { readBounded } from './idle';
import { createLimiter, type Limiter } from './limiter';
import { inSixteenths } from './slices';

/** The bucket, the AWS SDK client's configuration and the adapter's bounds on sockets and reads. */
export interface S3StoreOptions {
  /** The bucket every key lives in. */
  readonly bucket: string;
  /**
   * A ready client (tests add middleware to it); otherwise one is built from `clientConfig` and the SDK's environment.
   */
  readonly client?: S3Client;
  /** The AWS SDK client's configuration (region, endpoint, credentials), when `client` is not given. */
  readonly clientConfig?: S3ClientConfig;
  /** Deadline of one request until its response arrives, including the SDK's own retries. */
  readonly operationDeadlineMs?: number;
  /**
   * A response body that moves no byte for this long fails as {@link StoreUnavailableError}; default the deadline, at
   * most 30 s (every default: `S3_SETTINGS`).
   */
  readonly idleTimeoutMs?: number;
  /**
   * `getStream` reads an object in ranged GETs of this many bytes (times the stream's `windowMultiple`,
   * up to 8 MiB), one ahead of its consumer; an open stream holds at most two windows in memory.
   */
  readonly readWindowBytes?: number;
  /** Window requests in flight at once across every stream of this store. */
  readonly maxConcurrentReads?: number;
  /**
   * The slowest upload a segment write (`put`) must survive: its deadline is the operation deadline
   * plus its size at this rate. Conditional writes (lease, root) keep the plain deadline.
   */
  readonly minUploadBytesPerSecond?: number;
  /**
   * Sockets in the pool of a client the store builds (not of a given `client`); see docs/operations.md for the sizing.
   */
  readonly maxSockets?: number;
  /** DeleteObjects requests in flight at once. */
  readonly deleteConcurrency?: number;
}

/** The largest window a `windowMultiple` may ask for: whatever a caller asks, one stream holds at most two of these. */
const MAX_READ_WINDOW_BYTES = 8 * 1024 * 1024;

/**
 * S3 environment settings this package reads besides the AWS SDK's own chain (region, credentials,
 * `AWS_ENDPOINT_URL_S3`).
 */
export const S3_ENV = envNames(S3_SETTINGS);

/**
 * Options from the environment: bucket, path style and the bounds from `COMPACTION_S3_*`, everything else from the
 * SDK's chain.
 */
export function s3OptionsFromEnv(env?: NodeJS.ProcessEnv): S3StoreOptions {
  const { bucket, forcePathStyle = S3_SETTINGS.forcePathStyle.default, ...bounds } = settingsSetInEnv(S3_SETTINGS, env);
  if (!bucket)
    throw new StoreConfigError(S3_ENV.bucket, `${S3_ENV.bucket} is not set: name the bucket that holds the namespaces`);
  return { bucket, clientConfig: { forcePathStyle }, ...bounds };
}

/**
 * A bucket and the endpoint it is reached at, as runs record it: the endpoint given to the client, else
 * the one the AWS SDK reads from the environment (`AWS_ENDPOINT_URL_S3`, `AWS_ENDPOINT_URL`), else none
 * (AWS itself, where a bucket name is global). The URL is normalised: `http://h:9000/` and `http://h:9000` are one.
 */
export function s3Identity(bucket: string, endpoint: string | undefined, given?: NodeJS.ProcessEnv): string {
  const env = environment(given);
  const url =
    endpoint ??
    (env.AWS_IGNORE_CONFIGURED_ENDPOINT_URLS === 'true' ? undefined : env.AWS_ENDPOINT_URL_S3 || env.AWS_ENDPOINT_URL);
  if (!url) return `s3://${bucket}`;
  let normal = url;
  try {
    const parsed = new URL(url);
    normal = `${parsed.protocol}//${parsed.host}${parsed.pathname === '/' ? '' : parsed.pathname}`;
  } catch {
    // Named as configured: the SDK will refuse it with its own error.
  }
  return `s3://${bucket} at ${normal}`;
}

/** The S3 adapter: one bucket, conditional writes by ETag, over the AWS SDK's client. */
export function createS3ObjectStore(options: S3StoreOptions): ObjectStore {
  return new S3ObjectStore(options);
}

interface SdkError {
  name?: string;
  code?: string;
  message?: string;
  $metadata?: { httpStatusCode?: number };
  $response?: unknown;
}

const CONNECTION_CODES = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH']);

/**
 * Answers that say "not now", whatever their status class: S3's `400 RequestTimeout` (the body came
 * too slowly), throttling (`429` from S3-compatible stores, `SlowDown`), and the gateway and server
 * statuses. They are retried (the SDK retries them too); only a 4xx outside these is configuration.
 */
const TRANSIENT_STATUSES = new Set([429, 500, 502, 503, 504]);
const TRANSIENT_CODES = new Set([
  'RequestTimeout',
  'SlowDown',
  'Throttling',
  'ThrottlingException',
  'TooManyRequests',
  'TooManyRequestsException',
  'RequestThrottled',
  'ServiceUnavailable',
  'InternalError',
]);
const isTransient = (err: SdkError, status: number | undefined): boolean =>
  (status !== undefined && TRANSIENT_STATUSES.has(status)) ||
  TRANSIENT_CODES.has(err.name ?? '') ||
  TRANSIENT_CODES.has(err.code ?? '');

/** 416: a range starting at 0 of an empty object; only `readWindow` meets it. */
export class RangeNotSatisfiableError extends StoreError {
  readonly failureType = 'RangeNotSatisfiable';
  constructor(key: string) {
    super(key, `${key}: range not satisfiable`);
  }
}

/** One ranged GET, read whole. */
interface Window {
  readonly bytes: Uint8Array;
  readonly etag: string;
  /** The whole object's size, from `Content-Range`. */
  readonly size: number;
  readonly lastModified: Date | undefined;
}

class S3ObjectStore implements ObjectStore {
  readonly description: string;
  private readonly client: S3Client;
  private readonly bucket: string;
  private readonly deadlineMs: number;
  private readonly idleTimeoutMs: number;
  private readonly minUploadBytesPerSecond: number;
  private readonly windowBytes: number;
  private readonly windowRequests: Limiter;
  private readonly deleteConcurrency: number;
  /** Whether the endpoint has answered any request of this store (a response, an error status included). */
  private answered = false;

  constructor(options: S3StoreOptions) {
    this.bucket = options.bucket;
    this.deadlineMs = options.operationDeadlineMs ?? TIMING_SETTINGS.operationDeadlineMs.default;
    const {
      maxSockets,
      idleTimeoutMs,
      minUploadBytesPerSecond,
      readWindowBytes,
      maxConcurrentReads,
      deleteConcurrency,
    } = applyDefaults(S3_SETTINGS, options, {
      operationDeadlineMs: this.deadlineMs,
    });
    const pool = { keepAlive: true, maxSockets };
    this.client =
      options.client ??
      new S3Client({ requestHandler: { httpAgent: pool, httpsAgent: pool }, ...options.clientConfig });
    this.idleTimeoutMs = idleTimeoutMs;
    this.minUploadBytesPerSecond = minUploadBytesPerSecond;
    this.windowBytes = readWindowBytes;
    this.windowRequests = createLimiter(maxConcurrentReads);
    this.deleteConcurrency = deleteConcurrency;
    this.description = `s3://${this.bucket}`;
  }

  async identity(): Promise<string> {
    const given = await this.client.config.endpoint?.();
    return s3Identity(
      this.bucket,
      given ? `${given.protocol}//${given.hostname}${given.port ? `:${given.port}` : ''}${given.path}` : undefined,
    );
  }

  async get(key: string, options: { maxBytes?: number } = {}): Promise<StoredObject> {
    const out = await this.send(key, 'read', (o) =>
      this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: key }), o),
    );
    const size = out.ContentLength ?? 0;
    if (options.maxBytes !== undefined && size > options.maxBytes) {
      (out.Body as Readable | undefined)?.destroy();
      throw new ObjectTooLargeError(key, size, options.maxBytes);
    }
    return {
      key,
      body: await this.readBody(key, out.Body),
      etag: requireEtag(key, out.ETag),
      lastModified: out.LastModified,
    };
  }

  /** The first window is read here, so a missing object fails now and ETag and LastModified come from it. */
  async getStream(key: string, options: StreamOptions = {}): Promise<StreamedObject> {
    const multiple = Math.max(1, Math.floor(options.windowMultiple ?? 1));
    // A configured window above the cap is kept: the cap bounds what a multiple adds, not the setting.
    const windowBytes = Math.max(this.windowBytes, Math.min(this.windowBytes * multiple, MAX_READ_WINDOW_BYTES));
    const { start, end } = options.range ?? { start: 0, end: Infinity };
    const first = await this.readWindow(key, start, Math.min(windowBytes, end - start), undefined);
    const stop = Math.min(first.size, end);
    const body = this.windows(key, first, { windowBytes, start, stop });
    return { key, body, etag: first.etag, lastModified: first.lastModified };
  }

  /**
   * The object from `first` on, window by window; every later window must carry the first one's ETag
   * (`If-Match`). The next window is read while the consumer works through the current one, so the
   * consumer waits only when it outpaces the network, not a round trip per window; at most these two are held.
   */
  private async *windows(
    key: string,
    first: Window,
    { windowBytes, start, stop }: { windowBytes: number; start: number; stop: number },
  ): AsyncGenerator<Uint8Array> {
    let window = first;
    for (let offset = start + first.bytes.length; ;) {
      const next =
        offset < stop ? this.readWindow(key, offset, Math.min(windowBytes, stop - offset), first.etag) : undefined;
      // Handled here too: a consumer that stops early leaves the window read ahead to nobody.
      next?.catch(() => undefined);
      yield* inSixteenths(window.bytes);
      if (next === undefined) return;
      window = await next;
      if (window.size !== first.size || window.bytes.length === 0) throw new ObjectChangedError(key, first.etag);
      offset += window.bytes.length;
    }
  }

  /**
   * One ranged GET read whole, under the store-wide cap on window requests; the socket is free again when it returns.
   */
  private async readWindow(
    key: string,
    offset: number,
    windowBytes: number,
    etag: string | undefined,
  ): Promise<Window> {
    return this.windowRequests(async () => {
      const range = `bytes=${offset}-${offset + windowBytes - 1}`;
      try {
        const out = await this.send(key, 'read', (o) =>
          this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: key, Range: range, IfMatch: etag }), o),
        );
        const bytes = await this.readBody(key, out.Body);
        // No Content-Range: the server sent the whole object.
        const size = Number(/\/(\d+)$/.exec(out.ContentRange ?? '')?.[1] ?? bytes.length);
        return { bytes, etag: requireEtag(key, out.ETag), size, lastModified: out.LastModified };
      } catch (err) {
        if (err instanceof PreconditionFailedError && etag !== undefined) throw new ObjectChangedError(key, etag);
        if (!(err instanceof RangeNotSatisfiableError) || offset > 0) throw err;
        // Only an empty object has no byte at offset 0.
        const info = await this.head(key);
        return {
          bytes: new Uint8Array(),
          etag: requireEtag(key, info.etag),
          size: info.size,
          lastModified: info.lastModified,
        };
      }
    });
  }

  /** A response body, read under the idle timeout: a silent server fails the read (retryable), a slow one does not. */
  private async readBody(key: string, body: unknown): Promise<Uint8Array> {
    if (!body) return new Uint8Array();
    return readBounded(
      body as Readable,
      this.idleTimeoutMs,
      () => new StoreUnavailableError(key, `no byte of the body for ${this.idleTimeoutMs} ms (idle timeout)`),
    );
  }

  async head(key: string): Promise<ObjectInfo> {
    const out = await this.send(key, 'read', (o) =>
      this.client.send(new HeadObjectCommand({ Bucket: this.bucket, Key: key }), o),
    );
    return { key, size: out.ContentLength ?? 0, etag: out.ETag, lastModified: out.LastModified };
  }

  async putIfAbsent(key: string, body: Uint8Array): Promise<{ etag: string }> {
    const out = await this.send(key, 'write', (o) =>
      this.client.send(new PutObjectCommand({ Bucket: this.bucket, Key: key, Body: body, IfNoneMatch: '*' }), o),
    );
    return { etag: requireEtag(key, out.ETag) };
  }

  async putIfMatch(key: string, body: Uint8Array, etag: string): Promise<{ etag: string }> {
    const out = await this.send(key, 'write', (o) =>
      this.client.send(new PutObjectCommand({ Bucket: this.bucket, Key: key, Body: body, IfMatch: etag }), o),
    );
    return { etag: requireEtag(key, out.ETag) };
  }

  async put(key: string, body: Uint8Array): Promise<{ etag: string }> {
    // A client cannot see an upload's progress (the kernel's socket buffers take megabytes at once), so
    // a segment write is bounded by a minimum rate: the deadline plus its size at that rate. Nothing in
    // the protocol's timing rests on when a segment lands; it does on the lease and root CAS, which keep the plain
    // deadline.
    const deadlineMs = this.deadlineMs + Math.ceil((body.length / this.minUploadBytesPerSecond) * 1000);
    const out = await this.send(
      key,
      'write',
      (o) => this.client.send(new PutObjectCommand({ Bucket: this.bucket, Key: key, Body: body }), o),
      deadlineMs,
    );
    return { etag: requireEtag(key, out.ETag) };
  }

  async list(request: ListRequest): Promise<ListPage> {
    const out = await this.send(request.prefix, 'read', (o) =>
      this.client.send(
        new ListObjectsV2Command({
          Bucket: this.bucket,
          Prefix: request.prefix,
          StartAfter: request.startAfter,
          Delimiter: request.delimiter,
          ContinuationToken: request.cursor,
          MaxKeys: Math.min(request.maxKeys ?? MAX_KEYS_PER_REQUEST, MAX_KEYS_PER_REQUEST),
        }),
        o,
      ),
    );
    return {
      objects: (out.Contents ?? []).map((o) => ({
        key: o.Key ?? '',
        size: o.Size ?? 0,
        etag: o.ETag,
        lastModified: o.LastModified,
      })),
      commonPrefixes: (out.CommonPrefixes ?? []).map((p) => p.Prefix ?? ''),
      nextCursor: out.IsTruncated ? out.NextContinuationToken : undefined,
    };
  }

  async deleteMany(keys: readonly string[]): Promise<DeleteResult> {
    // A request that throws ends the call only once its siblings have settled, and no request starts after it:
    // a caller that deletes a lease after its prefix (the collector) must know no delete of this call can still land.
    let thrown: { readonly error: unknown } | undefined;
    const results = await inBatches(
      keys,
      MAX_KEYS_PER_REQUEST,
      this.deleteConcurrency,
      async (batch): Promise<DeleteResult> => {
        if (thrown) return { deleted: [], failed: [] };
        try {
          const out = await this.send(batch[0] ?? '', 'write', (o) =>
            this.client.send(
              new DeleteObjectsCommand({
                Bucket: this.bucket,
                Delete: { Objects: batch.map((Key) => ({ Key })), Quiet: true },
              }),
              o,
            ),
          );
          // A denied key is a policy to fix, not a delete to retry: S3 reports it per key, the port as a configuration
          // error.
          const denied = out.Errors?.find((e) => e.Code === 'AccessDenied');
          if (denied) throw this.accessDenied(denied.Key ?? batch[0] ?? '', denied);
          // A missing key is already deleted: deletes are idempotent.
          const failed: DeleteFailure[] = (out.Errors ?? [])
            .filter((e) => e.Code !== 'NoSuchKey')
            .map((e) => ({ key: e.Key ?? '', code: e.Code ?? 'Unknown', message: e.Message ?? '' }));
          const failedKeys = new Set(failed.map((f) => f.key));
          return { deleted: batch.filter((k) => !failedKeys.has(k)), failed };
        } catch (error) {
          thrown ??= { error };
          return { deleted: [], failed: [] };
        }
      },
    );
    if (thrown) throw thrown.error;
    return { deleted: results.flatMap((r) => r.deleted), failed: results.flatMap((r) => r.failed) };
  }

  async deleteIfMatch(key: string, etag: string): Promise<void> {
    try {
      await this.send(key, 'write', (o) =>
        this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: key, IfMatch: etag }), o),
      );
    } catch (err) {
      // S3 answers 404 to If-Match on a missing key: the version is gone either way, and the SDK's retry of a delete
      // that landed meets it.
      if (!(err instanceof NotFoundError)) throw err;
    }
  }

  async verifyAccess(): Promise<void> {
    try {
      await this.send(this.bucket, 'probe', (o) => this.client.send(new HeadBucketCommand({ Bucket: this.bucket }), o));
    } catch (err) {
      if (err instanceof NotFoundError) {
        throw new StoreConfigError(S3_ENV.bucket, `bucket ${this.bucket} does not exist (${S3_ENV.bucket})`);
      }
      // A HEAD response has no body, so its 403 cannot tell rejected credentials from a denying policy; a listing's
      // error names which.
      if (err instanceof StoreConfigError && err.setting === 'IAM policy')
        await this.list({ prefix: NAMESPACES_PREFIX, maxKeys: 1 });
      throw err;
    }
  }

  async versioning(): Promise<BucketVersioning> {
    try {
      const out = await this.send(this.bucket, 'read', (o) =>
        this.client.send(new GetBucketVersioningCommand({ Bucket: this.bucket }), o),
      );
      // A bucket that was never versioned has no Status at all.
      return out.Status === 'Enabled' ? 'enabled' : out.Status === 'Suspended' ? 'suspended' : 'unversioned';
    } catch (err) {
      // Only reported, never decided on: a worker's policy need not grant s3:GetBucketVersioning.
      if (err instanceof StoreError) return 'unknown';
      throw err;
    }
  }

  async close(): Promise<void> {
    this.client.destroy();
  }

  /**
   * Sends one command under the operation deadline and translates its failure; `mode` says what a
   * transient failure means. The deadline ends with the response: a timer still running would abort
   * the body being read (the caller bounds that by progress).
   */
  private async send<O>(
    key: string,
    mode: 'read' | 'write' | 'probe',
    request: (options: { abortSignal: AbortSignal }) => Promise<O>,
    deadlineMs = this.deadlineMs,
  ): Promise<O> {
    const deadline = new AbortController();
    const timer = setTimeout(
      () =>
        deadline.abort(
          Object.assign(new Error(`no response within the deadline of ${deadlineMs} ms`), { name: 'TimeoutError' }),
        ),
      deadlineMs,
    );
    try {
      const out = await request({ abortSignal: deadline.signal });
      this.answered = true;
      return out;
    } catch (err) {
      if ((err as SdkError).$metadata?.httpStatusCode !== undefined) this.answered = true;
      throw this.translate(err as SdkError, key, mode);
    } finally {
      clearTimeout(timer);
    }
  }

  private accessDenied(key: string, cause: unknown): StoreConfigError {
    return new StoreConfigError(
      'IAM policy',
      `access denied to ${key} in ${this.bucket}: see docs/security.md for the policy`,
      { cause },
    );
  }

  private translate(err: SdkError, key: string, mode: 'read' | 'write' | 'probe'): Error {
    const status = err.$metadata?.httpStatusCode;
    const name = err.name ?? '';
    const reason = `${name || err.code || 'error'}${status ? ` ${status}` : ''}: ${err.message ?? ''}`.trim();
    if (name === 'NoSuchBucket') {
      return new StoreConfigError(S3_ENV.bucket, `bucket ${this.bucket} does not exist (${S3_ENV.bucket})`, {
        cause: err,
      });
    }
    if (['InvalidAccessKeyId', 'SignatureDoesNotMatch', 'ExpiredToken', 'InvalidToken'].includes(name)) {
      return new StoreConfigError(
        'AWS credentials',
        `the store rejected the credentials (${name}); check AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY or AWS_PROFILE`,
        { cause: err },
      );
    }
    // The SDK's default chain found no credentials at all: no request was sent, so this is configuration, not an
    // outage.
    if (name === 'CredentialsProviderError') {
      return new StoreConfigError(
        'AWS credentials',
        'no AWS credentials found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE, or run with a role (web identity, container or instance credentials)',
        { cause: err },
      );
    }
    if (name === 'AccessDenied' || status === 403) return this.accessDenied(key, err);
    if (name === 'PermanentRedirect' || name === 'AuthorizationHeaderMalformed' || status === 301) {
      return new StoreConfigError(
        'AWS_REGION',
        `bucket ${this.bucket} is in another region than configured (AWS_REGION)`,
        { cause: err },
      );
    }
    if (name === 'Region is missing' || /region is missing/i.test(err.message ?? '')) {
      return new StoreConfigError('AWS_REGION', 'no AWS region configured: set AWS_REGION', { cause: err });
    }
    if (status === 404 || name === 'NoSuchKey' || name === 'NotFound') return new NotFoundError(key);
    if (status === 412 || name === 'PreconditionFailed') return new PreconditionFailedError(key);
    if (status === 409) return new ConflictError(key);
    if (status === 416 || name === 'InvalidRange') return new RangeNotSatisfiableError(key);
    if (CONNECTION_CODES.has(err.code ?? '') || CONNECTION_CODES.has(name)) {
      // An endpoint that never answered this store is its configuration, whatever the first request was (the
      // library's writer and readers open no probe first); once it has answered, the same error is an outage.
      const endpoint = 'AWS_ENDPOINT_URL_S3';
      if (mode === 'probe' || !this.answered)
        return new StoreConfigError(endpoint, `cannot reach the S3 endpoint (${reason}); check ${endpoint}`, {
          cause: err,
        });
    }
    if (status !== undefined && status >= 400 && status < 500 && !isTransient(err, status)) {
      return new StoreConfigError('request', `the store rejected a request for ${key}: ${reason}`, { cause: err });
    }
    // Timeouts, throttling and 5xx after the SDK's retries, dropped connections: a write may have landed.
    return mode === 'write'
      ? new AmbiguousError(key, reason, { cause: err })
      : new StoreUnavailableError(key, reason, { cause: err });
  }
}

function requireEtag(key: string, etag: string | undefined): string {
  if (!etag) throw new StoreUnavailableError(key, 'the store returned no ETag');
  return etag;
}
