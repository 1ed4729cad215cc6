/**
 * S3 adapter. Conditional writes map to `If-None-Match: *` and `If-Match`; every SDK failure is
 * translated into the port's typed errors, with writes whose outcome is unknown as Ambiguous.
 */
import {
  DeleteObjectsCommand,
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
  ObjectTooLargeError,
  PreconditionFailedError,
  StoreConfigError,
  StoreUnavailableError,
  type DeleteFailure,
  type DeleteResult,
  type ListPage,
  type ListRequest,
  type ObjectInfo,
  type ObjectStore,
  type StoredObject,
  type StreamedObject,
} from './port';
import { NAMESPACES_PREFIX } from '../keys';
import { inBatches } from './batches';

export interface S3StoreOptions {
  readonly bucket: string;
  /** A ready client (tests add middleware to it); otherwise one is built from `clientConfig` and the SDK's environment. */
  readonly client?: S3Client;
  readonly clientConfig?: S3ClientConfig;
  /** Deadline of one operation including the SDK's own retries. */
  readonly operationDeadlineMs?: number;
  /** DeleteObjects requests in flight at once. */
  readonly deleteConcurrency?: number;
}

/** S3 environment settings this package reads besides the AWS SDK's own chain (region, credentials, `AWS_ENDPOINT_URL_S3`). */
export const S3_ENV = {
  bucket: 'COMPACTION_S3_BUCKET',
  forcePathStyle: 'COMPACTION_S3_FORCE_PATH_STYLE',
} as const;

/** Options from the environment: bucket and path style from `COMPACTION_S3_*`, everything else from the SDK's chain. */
export function s3OptionsFromEnv(env: NodeJS.ProcessEnv = process.env): S3StoreOptions {
  const bucket = env[S3_ENV.bucket];
  if (!bucket) throw new StoreConfigError(S3_ENV.bucket, `${S3_ENV.bucket} is not set: name the bucket that holds the namespaces`);
  return { bucket, clientConfig: { forcePathStyle: env[S3_ENV.forcePathStyle] === 'true' } };
}

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

class S3ObjectStore implements ObjectStore {
  readonly description: string;
  private readonly client: S3Client;
  private readonly bucket: string;
  private readonly deadlineMs: number;
  private readonly deleteConcurrency: number;

  constructor(options: S3StoreOptions) {
    this.bucket = options.bucket;
    this.client = options.client ?? new S3Client(options.clientConfig ?? {});
    this.deadlineMs = options.operationDeadlineMs ?? 150_000;
    this.deleteConcurrency = options.deleteConcurrency ?? 4;
    this.description = `s3://${this.bucket}`;
  }

  async get(key: string, options: { maxBytes?: number } = {}): Promise<StoredObject> {
    const out = await this.send(key, 'read', (o) => this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: key }), o));
    const size = out.ContentLength ?? 0;
    if (options.maxBytes !== undefined && size > options.maxBytes) {
      (out.Body as { destroy?: () => void } | undefined)?.destroy?.();
      throw new ObjectTooLargeError(key, size, options.maxBytes);
    }
    const body = out.Body ? await out.Body.transformToByteArray() : new Uint8Array();
    return { key, body, etag: requireEtag(key, out.ETag), lastModified: out.LastModified };
  }

  async getStream(key: string): Promise<StreamedObject> {
    const out = await this.send(key, 'read', (o) => this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: key }), o));
    const body = (out.Body as AsyncIterable<Uint8Array> | undefined) ?? (async function* () {})();
    return { key, body, etag: requireEtag(key, out.ETag), lastModified: out.LastModified };
  }

  async head(key: string): Promise<ObjectInfo> {
    const out = await this.send(key, 'read', (o) => this.client.send(new HeadObjectCommand({ Bucket: this.bucket, Key: key }), o));
    return { key, size: out.ContentLength ?? 0, etag: out.ETag, lastModified: out.LastModified };
  }

  async putIfAbsent(key: string, body: Uint8Array): Promise<{ etag: string }> {
    const out = await this.send(key, 'write', (o) => this.client.send(new PutObjectCommand({ Bucket: this.bucket, Key: key, Body: body, IfNoneMatch: '*' }), o));
    return { etag: requireEtag(key, out.ETag) };
  }

  async putIfMatch(key: string, body: Uint8Array, etag: string): Promise<{ etag: string }> {
    const out = await this.send(key, 'write', (o) => this.client.send(new PutObjectCommand({ Bucket: this.bucket, Key: key, Body: body, IfMatch: etag }), o));
    return { etag: requireEtag(key, out.ETag) };
  }

  async put(key: string, body: Uint8Array): Promise<{ etag: string }> {
    const out = await this.send(key, 'write', (o) => this.client.send(new PutObjectCommand({ Bucket: this.bucket, Key: key, Body: body }), o));
    return { etag: requireEtag(key, out.ETag) };
  }

  async list(request: ListRequest): Promise<ListPage> {
    const out = await this.send(
      request.prefix,
      'read',
      (o) => this.client.send(new ListObjectsV2Command({
        Bucket: this.bucket,
        Prefix: request.prefix,
        StartAfter: request.startAfter,
        Delimiter: request.delimiter,
        ContinuationToken: request.cursor,
        MaxKeys: Math.min(request.maxKeys ?? MAX_KEYS_PER_REQUEST, MAX_KEYS_PER_REQUEST),
      }), o),
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
    const results = await inBatches(keys, MAX_KEYS_PER_REQUEST, this.deleteConcurrency, async (batch): Promise<DeleteResult> => {
      if (thrown) return { deleted: [], failed: [] };
      try {
        const out = await this.send(
          batch[0] ?? '',
          'write',
          (o) => this.client.send(new DeleteObjectsCommand({ Bucket: this.bucket, Delete: { Objects: batch.map((Key) => ({ Key })), Quiet: true } }), o),
        );
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
    });
    if (thrown) throw thrown.error;
    return { deleted: results.flatMap((r) => r.deleted), failed: results.flatMap((r) => r.failed) };
  }

  async verifyAccess(): Promise<void> {
    try {
      await this.send(this.bucket, 'probe', (o) => this.client.send(new HeadBucketCommand({ Bucket: this.bucket }), o));
    } catch (err) {
      if (err instanceof NotFoundError) {
        throw new StoreConfigError(S3_ENV.bucket, `bucket ${this.bucket} does not exist (${S3_ENV.bucket})`);
      }
      // A HEAD response has no body, so its 403 cannot tell rejected credentials from a denying policy; a listing's error names which.
      if (err instanceof StoreConfigError && err.setting === 'IAM policy') await this.list({ prefix: NAMESPACES_PREFIX, maxKeys: 1 });
      throw err;
    }
  }

  async close(): Promise<void> {
    this.client.destroy();
  }

  /** Sends one command under the operation deadline and translates its failure; `mode` says what a transient failure means. */
  private async send<O>(key: string, mode: 'read' | 'write' | 'probe', request: (options: { abortSignal: AbortSignal }) => Promise<O>): Promise<O> {
    try {
      return await request({ abortSignal: AbortSignal.timeout(this.deadlineMs) });
    } catch (err) {
      throw this.translate(err as SdkError, key, mode);
    }
  }

  private translate(err: SdkError, key: string, mode: 'read' | 'write' | 'probe'): Error {
    const status = err.$metadata?.httpStatusCode;
    const name = err.name ?? '';
    const reason = `${name || err.code || 'error'}${status ? ` ${status}` : ''}: ${err.message ?? ''}`.trim();
    if (name === 'NoSuchBucket') {
      return new StoreConfigError(S3_ENV.bucket, `bucket ${this.bucket} does not exist (${S3_ENV.bucket})`, { cause: err });
    }
    if (['InvalidAccessKeyId', 'SignatureDoesNotMatch', 'ExpiredToken', 'InvalidToken'].includes(name)) {
      return new StoreConfigError(
        'AWS credentials',
        `the store rejected the credentials (${name}); check AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY or AWS_PROFILE`,
        { cause: err },
      );
    }
    // The SDK's default chain found no credentials at all: no request was sent, so this is configuration, not an outage.
    if (name === 'CredentialsProviderError') {
      return new StoreConfigError(
        'AWS credentials',
        'no AWS credentials found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE, or run with a role (web identity, container or instance credentials)',
        { cause: err },
      );
    }
    if (name === 'AccessDenied' || status === 403) {
      return new StoreConfigError('IAM policy', `access denied to ${key} in ${this.bucket}: see docs/security.md for the policy`, { cause: err });
    }
    if (name === 'PermanentRedirect' || name === 'AuthorizationHeaderMalformed' || status === 301) {
      return new StoreConfigError('AWS_REGION', `bucket ${this.bucket} is in another region than configured (AWS_REGION)`, { cause: err });
    }
    if (name === 'Region is missing' || /region is missing/i.test(err.message ?? '')) {
      return new StoreConfigError('AWS_REGION', 'no AWS region configured: set AWS_REGION', { cause: err });
    }
    if (status === 404 || name === 'NoSuchKey' || name === 'NotFound') return new NotFoundError(key);
    if (status === 412 || name === 'PreconditionFailed') return new PreconditionFailedError(key);
    if (status === 409) return new ConflictError(key);
    if (CONNECTION_CODES.has(err.code ?? '') || CONNECTION_CODES.has(name)) {
      const endpoint = 'AWS_ENDPOINT_URL_S3';
      if (mode === 'probe') return new StoreConfigError(endpoint, `cannot reach the S3 endpoint (${reason}); check ${endpoint}`, { cause: err });
    }
    if (status !== undefined && status >= 400 && status < 500) {
      return new StoreConfigError('request', `the store rejected a request for ${key}: ${reason}`, { cause: err });
    }
    // Timeouts, 5xx after the SDK's retries, dropped connections: a write may have landed.
    return mode === 'write' ? new AmbiguousError(key, reason, { cause: err }) : new StoreUnavailableError(key, reason, { cause: err });
  }
}

function requireEtag(key: string, etag: string | undefined): string {
  if (!etag) throw new StoreUnavailableError(key, 'the store returned no ETag');
  return etag;
}
