/**
 * The safety properties of spec section 7, checked over what the store applied, in the order it
 * applied it, and the bucket's final contents. The log is ground truth (e.g. the S3 fault proxy's
 * observed exchanges, which include writes whose response was lost), not what jobs or collectors
 * believed: a property holds only if the store's own history shows it.
 */
import {
  isInputSegmentKeyOf,
  leaseKey,
  namespaceId,
  parseCompactionKey,
  rootKey,
  type MetadataCompactionId,
  type NamespaceId,
} from '../../src/keys';
import { decodeLease, type LeaseState } from '../../src/lease';
import { decodeRoot, referencedKeys } from '../../src/root';
import { s3Requests, type S3Exchange } from './s3-fault-proxy';

/** One write or delete the store applied, at the clock of the run (virtual or wall). */
export type StoreEvent =
  | {
      readonly kind: 'put';
      readonly key: string;
      /** Undefined when the recorder kept no copy (a large segment); leases and roots always need theirs. */
      readonly body: Uint8Array | undefined;
      /** The ETag the store gave the new version. */
      readonly etag: string;
      /** The write's precondition as sent: `If-Match` an ETag, `If-None-Match: *`, or none. */
      readonly ifMatch?: string;
      readonly ifNoneMatch?: string;
      readonly atMs: number;
    }
  /**
   * A key a delete request named and the store did not report as failed (a key that did not exist is checked all the
   * same).
   */
  | { readonly kind: 'delete'; readonly key: string; readonly atMs: number };

export const PROPERTIES = {
  oneOwner: 'at most one owner per lease version',
  fencedPublished: 'no fenced job published',
  referencedDeleted: 'no referenced object deleted',
  liveDeleted: 'no object of a live job deleted',
  outsideDeleted: 'nothing outside a validated job prefix deleted',
  claimedDeleted: 'every claimed lease eventually deleted',
  orphansReclaimed: 'every orphan eventually reclaimed',
  logMatchesBucket: 'the log accounts for every object in the bucket',
} as const;
export type Property = keyof typeof PROPERTIES;

export interface Violation {
  readonly property: Property;
  readonly key: string;
  readonly detail: string;
  /** Index of the offending event in the log; absent for a finding about the final state. */
  readonly event?: number;
}

export interface InvariantOptions {
  readonly leaseExpiryMs: number;
  /**
   * What passes after the log's end guarantee. `claimed-leases-deleted`: passes continued, so no
   * `reaping` lease may remain. `everything-reclaimed`: passes ran after every lease expired and every
   * orphan outlived the staging grace, so no lease and no unreferenced staged segment may remain.
   */
  readonly liveness?: 'claimed-leases-deleted' | 'everything-reclaimed';
  /** Only final objects under this prefix are compared with the log (default: all). */
  readonly scope?: string;
}

/** What the log shows happened, so a caller can tell a run that exercised the protocol from one that did nothing. */
export interface AuditTally {
  readonly leasesCreated: number;
  readonly refreshes: number;
  readonly claims: number;
  readonly leasesDeleted: number;
  readonly publications: number;
  readonly objectsDeleted: number;
}

export interface Audit {
  readonly violations: readonly Violation[];
  readonly tally: AuditTally;
}

interface LeaseVersion {
  readonly lease: LeaseState;
  readonly etag: string;
}

/** The namespace whose root `key` is, if it is one. */
function rootNamespace(key: string): NamespaceId | undefined {
  const [, ns] = key.split('/');
  try {
    const id = namespaceId(ns);
    return rootKey(id) === key ? id : undefined;
  } catch {
    return undefined;
  }
}

const sameBytes = (a: Uint8Array, b: Uint8Array) => a.length === b.length && a.every((v, i) => v === b[i]);

export function checkInvariants(
  log: readonly StoreEvent[],
  finalObjects: ReadonlyMap<string, Uint8Array>,
  options: InvariantOptions,
): Audit {
  const violations: Violation[] = [];
  /** Every object the log leaves in place, with its bytes when they were recorded. */
  const objects = new Map<string, Uint8Array | undefined>();
  const leases = new Map<string, LeaseVersion>();
  const referenced = new Map<NamespaceId, ReadonlySet<string>>();
  const tally = { leasesCreated: 0, refreshes: 0, claims: 0, leasesDeleted: 0, publications: 0, objectsDeleted: 0 };
  const flag = (property: Property, key: string, detail: string, event?: number) =>
    violations.push({ property, key, detail, event });

  const leaseWritten = (
    event: Extract<StoreEvent, { kind: 'put' }>,
    index: number,
    ids: { namespaceId: NamespaceId; jobId: MetadataCompactionId },
  ) => {
    const previous = leases.get(event.key);
    const owner = (l: LeaseState) => (l.status === 'active' ? `job ${l.job_id}` : `collector pass ${l.owner_id}`);
    let next: LeaseState;
    try {
      next = decodeLease(event.body ?? new Uint8Array(), ids);
    } catch (err) {
      return flag('oneOwner', event.key, `a lease version that does not decode: ${(err as Error).message}`, index);
    }
    leases.set(event.key, { lease: next, etag: event.etag });
    if (previous === undefined) {
      if (event.ifNoneMatch !== '*') flag('oneOwner', event.key, 'a lease created without put-if-absent', index);
      // A job creates its lease active; a pass claims a prefix without one by creating it reaping, named for itself.
      if (next.heartbeat_at_ms !== next.started_at_ms)
        flag(
          'oneOwner',
          event.key,
          `a lease created ${next.status}, heartbeat ${next.heartbeat_at_ms}, started ${next.started_at_ms}`,
          index,
        );
      if (next.status === 'active') tally.leasesCreated++;
      else tally.claims++;
      return;
    }
    // Every later version must be a CAS on the version it replaces: two writes from one version would give it two
    // owners.
    if (event.ifMatch !== previous.etag) {
      return flag(
        'oneOwner',
        event.key,
        `${owner(next)} wrote over version ${previous.etag} of ${owner(previous.lease)} with ${event.ifMatch ? `If-Match ${event.ifMatch}` : 'no If-Match'}`,
        index,
      );
    }
    if (next.job_id !== previous.lease.job_id || next.started_at_ms !== previous.lease.started_at_ms) {
      return flag('oneOwner', event.key, 'a lease write changed the job or start', index);
    }
    if (!(next.heartbeat_at_ms > previous.lease.heartbeat_at_ms))
      flag(
        'oneOwner',
        event.key,
        `heartbeat ${next.heartbeat_at_ms} is not after ${previous.lease.heartbeat_at_ms}`,
        index,
      );
    if (next.status === 'active') {
      if (previous.lease.status === 'reaping')
        return flag('oneOwner', event.key, `${owner(next)} wrote over a reaping lease: the claim is terminal`, index);
      if (next.owner_id !== previous.lease.owner_id) flag('oneOwner', event.key, 'a refresh changed the owner', index);
      tally.refreshes++;
      return;
    }
    // A pass refreshing its own claim; otherwise a claim, which needs the lease it replaces expired (a job's, or
    // another pass's claim).
    if (previous.lease.status === 'reaping' && previous.lease.owner_id === next.owner_id) return;
    if (event.atMs <= previous.lease.heartbeat_at_ms + options.leaseExpiryMs)
      flag(
        'oneOwner',
        event.key,
        `claimed at ${event.atMs} while live until ${previous.lease.heartbeat_at_ms + options.leaseExpiryMs}`,
        index,
      );
    tally.claims++;
  };

  const rootWritten = (event: Extract<StoreEvent, { kind: 'put' }>, index: number, ns: NamespaceId) => {
    let now: ReadonlySet<string>;
    try {
      now = referencedKeys(decodeRoot(event.body ?? new Uint8Array(), ns));
    } catch (err) {
      return flag(
        'logMatchesBucket',
        event.key,
        `a root version that does not decode: ${(err as Error).message}`,
        index,
      );
    }
    const before = referenced.get(ns) ?? new Set<string>();
    referenced.set(ns, now);
    const publishedJobs = new Set<string>();
    for (const key of now) {
      if (before.has(key)) continue;
      if (!objects.has(key))
        flag('referencedDeleted', key, 'the root came to reference an object that is not there', index);
      const parsed = parseCompactionKey(key);
      if (parsed.kind !== 'staged_segment' || publishedJobs.has(parsed.jobId)) continue;
      publishedJobs.add(parsed.jobId);
      const lease = leases.get(leaseKey(parsed.namespaceId, parsed.jobId));
      if (lease === undefined || lease.lease.status !== 'active') {
        flag(
          'fencedPublished',
          key,
          `job ${parsed.jobId} published while its lease was ${lease ? 'reaping' : 'gone'}`,
          index,
        );
      }
    }
    tally.publications += publishedJobs.size;
  };

  const deleted = (event: Extract<StoreEvent, { kind: 'delete' }>, index: number) => {
    const parsed = parseCompactionKey(event.key);
    const ns = event.key.split('/')[1] as NamespaceId;
    if (parsed.kind === 'unrecognised' && isInputSegmentKeyOf(ns, event.key)) {
      // A retired input or a lost write (spec 6a): the collector may delete it while the root does not reference it.
      if (referenced.get(ns)?.has(event.key))
        flag('referencedDeleted', event.key, 'deleted while the root referenced it', index);
    } else if (parsed.kind === 'unrecognised') {
      flag(
        'outsideDeleted',
        event.key,
        'deleted, but it is no lease or staged segment of a validated job prefix, nor an input segment',
        index,
      );
    } else {
      if (referenced.get(parsed.namespaceId)?.has(event.key))
        flag('referencedDeleted', event.key, 'deleted while the root referenced it', index);
      const lease = leases.get(leaseKey(parsed.namespaceId, parsed.jobId))?.lease;
      if (lease?.status === 'active' && event.atMs <= lease.heartbeat_at_ms + options.leaseExpiryMs) {
        flag(
          'liveDeleted',
          event.key,
          `deleted at ${event.atMs} while job ${lease.job_id} was live until ${lease.heartbeat_at_ms + options.leaseExpiryMs}`,
          index,
        );
      } else if (parsed.kind === 'lease' && lease?.status === 'active') {
        flag('oneOwner', event.key, 'an active lease deleted without a claim', index);
      }
      if (parsed.kind === 'lease' && leases.delete(event.key)) tally.leasesDeleted++;
    }
    if (objects.delete(event.key)) tally.objectsDeleted++;
  };

  log.forEach((event, index) => {
    if (event.kind === 'delete') return deleted(event, index);
    const parsed = parseCompactionKey(event.key);
    if (parsed.kind === 'lease') leaseWritten(event, index, parsed);
    const ns = rootNamespace(event.key);
    if (ns !== undefined) rootWritten(event, index, ns);
    objects.set(event.key, event.body);
  });

  const scope = options.scope ?? '';
  for (const [key, body] of finalObjects) {
    if (!key.startsWith(scope)) continue;
    const logged = objects.get(key);
    if (!objects.has(key)) flag('logMatchesBucket', key, 'in the bucket, but the log never wrote it (or deleted it)');
    else if (logged !== undefined && !sameBytes(logged, body))
      flag('logMatchesBucket', key, 'the bucket holds other bytes than the log last wrote');
  }
  for (const key of objects.keys()) {
    if (key.startsWith(scope) && !finalObjects.has(key))
      flag('logMatchesBucket', key, 'the log wrote it, but it is not in the bucket');
  }
  for (const [ns, keys] of referenced) {
    for (const key of keys)
      if (key.startsWith(scope) && !finalObjects.has(key))
        flag('referencedDeleted', key, `referenced by the final root of ${ns}, but missing`);
  }

  if (options.liveness) {
    for (const [key, { lease }] of leases) {
      if (!finalObjects.has(key)) continue;
      if (lease.status === 'reaping') flag('claimedDeleted', key, 'a claimed lease was never deleted');
      else if (options.liveness === 'everything-reclaimed')
        flag('claimedDeleted', key, 'a lease was never claimed and deleted after it expired');
    }
  }
  if (options.liveness === 'everything-reclaimed') {
    const stillReferenced = new Set([...referenced.values()].flatMap((keys) => [...keys]));
    for (const key of finalObjects.keys()) {
      if (parseCompactionKey(key).kind === 'staged_segment' && !stillReferenced.has(key))
        flag('orphansReclaimed', key, 'an unreferenced staged segment was never reclaimed');
    }
  }
  return { violations, tally };
}

export const describeViolations = (violations: readonly Violation[]): string =>
  violations
    .map((v) => `${PROPERTIES[v.property]}: ${v.key}: ${v.detail}${v.event === undefined ? '' : ` (event ${v.event})`}`)
    .join('\n');

const XML_ENTITIES: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'" };
const xmlText = (s: string) =>
  s.replace(/&(#x[0-9a-f]+|#[0-9]+|[a-z]+);/gi, (whole, name: string) =>
    name[0] === '#'
      ? String.fromCodePoint(Number(name[1] === 'x' || name[1] === 'X' ? `0${name.slice(1)}` : name.slice(1)))
      : (XML_ENTITIES[name] ?? whole),
  );
const xmlKeys = (xml: string, element: RegExp) => [...xml.matchAll(element)].map((m) => xmlText(m[1] ?? ''));

/**
 * What one exchange the S3 fault proxy observed did to the bucket: a PutObject or DeleteObject the
 * server accepted, or the keys of a DeleteObjects it did not report as failed (a missing key counts
 * as deleted, as S3 reports it). Reads and refused requests change nothing.
 */
export function storeEventsOf(exchange: S3Exchange, atMs: number): StoreEvent[] {
  const { request, status } = exchange;
  if (status < 200 || status > 299) return [];
  if (s3Requests.put(request)) {
    const header = (name: string) => {
      const value = request.headers[name];
      return Array.isArray(value) ? value[0] : value;
    };
    const etag = exchange.responseHeaders.etag ?? '';
    return [
      {
        kind: 'put',
        key: request.key,
        body: exchange.requestBody,
        etag,
        ifMatch: header('if-match'),
        ifNoneMatch: header('if-none-match'),
        atMs,
      },
    ];
  }
  if (request.method === 'DELETE' && request.key !== '') return [{ kind: 'delete', key: request.key, atMs }];
  if (s3Requests.deleteObjects(request)) {
    const requested = xmlKeys(exchange.requestBody?.toString() ?? '', /<Key>([\s\S]*?)<\/Key>/g);
    const failed = new Set(
      [...(exchange.responseBody?.toString() ?? '').matchAll(/<Error>([\s\S]*?)<\/Error>/g)]
        .filter((m) => !/<Code>NoSuchKey<\/Code>/.test(m[1] ?? ''))
        .flatMap((m) => xmlKeys(m[1] ?? '', /<Key>([\s\S]*?)<\/Key>/g)),
    );
    return requested.filter((key) => !failed.has(key)).map((key) => ({ kind: 'delete', key, atMs }));
  }
  return [];
}
