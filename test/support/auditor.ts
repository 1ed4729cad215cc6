/**
 * The soak's auditor: checks spec section 7 over the whole history of a bucket with versioning
 * enabled. S3 versioning keeps every version of every key and a delete marker for every delete,
 * each with the server's LastModified, so every root and lease version the run wrote and every
 * object the collector deleted is seen, not sampled by polling.
 *
 * Order: root versions by their generation (it rises on every write); the versions of one lease
 * by time, ties broken in the only legal order (active by heartbeat, then reaping, then delete);
 * across keys by time alone. Events in the same millisecond are ambiguous, and a rule reports a
 * violation only when every order of them breaks it: the auditor never accuses on a guess.
 */
import { GetObjectCommand, ListObjectVersionsCommand, type S3Client } from '@aws-sdk/client-s3';
import type { Timing } from '../../src/config';
import {
  familyGroup,
  isInputSegmentKeyOf,
  jobId,
  namespaceId,
  NAMESPACES_PREFIX,
  parseCompactionKey,
  rootKey,
  type NamespaceId,
} from '../../src/keys';
import { decodeLease, type LeaseState } from '../../src/lease';
import { readRoot } from '../../src/protocol';
import { decodeRoot, groupSegments, jsonRootCodec, referencedKeys } from '../../src/root';
import type { SegmentRecord } from '../../src/segments';
import { createS3ObjectStore } from '../../src/store';
import { readRecords, referenceMerge } from './records';

export type AuditRule =
  | 'deleted outside a job prefix'
  | 'referenced object deleted'
  | 'root references a missing object'
  | 'lease ownership'
  | 'fenced job published'
  | 'published with an expired lease'
  | 'live job object deleted'
  | 'retired segment deleted within its reader grace'
  | 'published result not in root history'
  | 'unowned staged object remains'
  | 'claimed lease remains'
  | 'expired lease remains'
  | 'records differ';

export interface Violation {
  readonly rule: AuditRule;
  readonly key: string;
  readonly detail: string;
}

export interface PublishedJob {
  readonly namespaceId: string;
  readonly jobId: string;
  readonly outputs: readonly string[];
}

export interface AuditInput {
  readonly client: S3Client;
  readonly bucket: string;
  readonly timing: Timing;
  /**
   * Clock of a collector pass that completed cleanly after the run settled (faults off, no job
   * running). With it, the final state is checked: what that pass had to reclaim must be gone.
   */
  readonly settledPassClockMs?: number;
  /** Jobs whose workflows reported `published`: each must appear in the root history. */
  readonly published?: readonly PublishedJob[];
  /** Every record written to each group: what the group's segments in the final root must merge to. */
  readonly groups?: readonly WrittenGroup[];
}

export interface WrittenGroup {
  readonly namespaceId: string;
  readonly group: string;
  readonly written: readonly SegmentRecord[][];
}

export interface AuditReport {
  readonly violations: Violation[];
  readonly rootVersions: number;
  readonly leases: number;
  readonly leaseVersions: number;
  readonly claims: number;
  readonly stagedObjects: number;
  readonly deletedObjects: number;
  /** Leases created again after the collector had deleted them (a create retried across a collection). */
  readonly leasesRecreated: number;
}

interface Entry {
  readonly key: string;
  readonly versionId: string;
  readonly time: number;
  readonly deleteMarker: boolean;
}

interface RootVersion {
  readonly time: number;
  readonly generation: number;
  readonly referenced: ReadonlySet<string>;
  /** Each retired key's `retired_at_ms`. */
  readonly retired: ReadonlyMap<string, number>;
}

type LeaseEvent = { readonly time: number } & (
  | { readonly deleted: true }
  | { readonly deleted: false; readonly lease: LeaseState }
  | { readonly deleted: false; readonly corrupt: string }
);

/** Every version and delete marker under `namespaces/`, grouped by key. */
async function listHistory(client: S3Client, bucket: string): Promise<Map<string, Entry[]>> {
  const byKey = new Map<string, Entry[]>();
  const add = (
    key: string | undefined,
    versionId: string | undefined,
    time: Date | undefined,
    deleteMarker: boolean,
  ) => {
    if (key === undefined || versionId === undefined || time === undefined)
      throw new Error(`listing of ${bucket} returned a version without key, id or time`);
    const entries = byKey.get(key) ?? [];
    entries.push({ key, versionId, time: time.getTime(), deleteMarker });
    byKey.set(key, entries);
  };
  let keyMarker: string | undefined;
  let versionIdMarker: string | undefined;
  do {
    const page = await client.send(
      new ListObjectVersionsCommand({
        Bucket: bucket,
        Prefix: NAMESPACES_PREFIX,
        KeyMarker: keyMarker,
        VersionIdMarker: versionIdMarker,
      }),
    );
    for (const v of page.Versions ?? []) add(v.Key, v.VersionId, v.LastModified, false);
    for (const d of page.DeleteMarkers ?? []) add(d.Key, d.VersionId, d.LastModified, true);
    keyMarker = page.IsTruncated ? page.NextKeyMarker : undefined;
    versionIdMarker = page.IsTruncated ? page.NextVersionIdMarker : undefined;
  } while (keyMarker !== undefined);
  return byKey;
}

async function readVersion(client: S3Client, bucket: string, entry: Entry): Promise<Uint8Array> {
  const out = await client.send(new GetObjectCommand({ Bucket: bucket, Key: entry.key, VersionId: entry.versionId }));
  return out.Body ? out.Body.transformToByteArray() : new Uint8Array();
}

/** Runs `fn` over `items`, `width` at a time. */
async function eachLimited<T>(items: readonly T[], width: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < items.length) await fn(items[next++] as T);
    }),
  );
}

const rank = (e: LeaseEvent): number =>
  e.deleted
    ? Number.MAX_SAFE_INTEGER
    : 'corrupt' in e
      ? 0
      : e.lease.status === 'reaping'
        ? Number.MAX_SAFE_INTEGER - 1
        : e.lease.heartbeat_at_ms;

/**
 * The events a state at `time` may be the outcome of: the last one strictly before, and all in the same millisecond.
 */
function candidatesAt<T extends { time: number }>(sorted: readonly T[], time: number): T[] {
  const before = sorted.filter((e) => e.time < time).at(-1);
  return [...(before ? [before] : []), ...sorted.filter((e) => e.time === time)];
}

/** The events of the lease's life at `time`: those after its last delete before then. */
function currentLife(events: readonly LeaseEvent[], time: number): LeaseEvent[] {
  const deletes = events.flatMap((e, i) => (e.deleted && e.time < time ? [i] : []));
  return events.slice((deletes.at(-1) ?? -1) + 1);
}

const isActive = (e: LeaseEvent): boolean => !e.deleted && 'lease' in e && e.lease.status === 'active';

/**
 * Checks one lease's chain of versions: one owner per version, claims only of the latest version and only once expired.
 */
function checkLeaseChain(
  key: string,
  events: readonly LeaseEvent[],
  timing: Timing,
  report: (detail: string) => void,
): { claims: number; recreated: number } {
  let previous: LeaseEvent | undefined;
  let claims = 0;
  let recreated = 0;
  for (const event of events) {
    const at = new Date(event.time).toISOString();
    if (!event.deleted && 'corrupt' in event) report(`a corrupt version was written at ${at}: ${event.corrupt}`);
    else if (event.deleted) {
      // A retried delete (a lost response, a killed worker) adds another delete marker: deletes are idempotent, so a
      // repeat is no finding.
      if (
        previous?.deleted !== true &&
        (previous === undefined || !('lease' in previous) || previous.lease.status !== 'reaping')
      ) {
        report(`deleted at ${at} without being claimed first`);
      }
    } else if (previous === undefined || previous.deleted) {
      // A job creates its lease active; a pass claims a prefix that has none by creating it reaping, named for itself.
      if (event.lease.heartbeat_at_ms !== event.lease.started_at_ms) {
        report(
          `its first version${previous ? ' after a delete' : ''} (${at}) is no creation: ${event.lease.status}, heartbeat ${event.lease.heartbeat_at_ms}, started ${event.lease.started_at_ms}`,
        );
      }
      if (event.lease.status === 'reaping') claims++;
      if (previous) recreated++;
    } else if ('lease' in previous) {
      const before = previous.lease;
      const now = event.lease;
      if (now.started_at_ms !== before.started_at_ms) report(`write at ${at} changed started_at_ms`);
      if (!(now.heartbeat_at_ms > before.heartbeat_at_ms))
        report(
          `write at ${at} did not increase the heartbeat (${before.heartbeat_at_ms} → ${now.heartbeat_at_ms}): it defeats the CAS`,
        );
      if (now.status === 'active') {
        if (before.status === 'reaping') report(`written active at ${at} after a collector claimed it: two owners`);
        else if (now.owner_id !== before.owner_id) report(`refresh at ${at} changed owner_id`);
      } else if (!(before.status === 'reaping' && before.owner_id === now.owner_id)) {
        // A claim (a job's expired lease, or another pass's expired claim): only of an expired version. A pass
        // refreshing its own claim is no claim.
        claims++;
        if (event.time <= before.heartbeat_at_ms + timing.leaseExpiryMs) {
          report(
            `claimed at ${at} by ${now.owner_id} while live: ${before.status === 'reaping' ? `${before.owner_id}'s claim` : 'the job'} held it until ${new Date(before.heartbeat_at_ms + timing.leaseExpiryMs).toISOString()}`,
          );
        }
      }
    }
    previous = event;
  }
  return { claims, recreated };
}

export async function auditBucket(input: AuditInput): Promise<AuditReport> {
  const { client, bucket, timing } = input;
  const violations: Violation[] = [];
  const violate = (rule: AuditRule, key: string, detail: string) => violations.push({ rule, key, detail });
  const history = await listHistory(client, bucket);

  const roots = new Map<NamespaceId, RootVersion[]>();
  const leases = new Map<string, LeaseEvent[]>();
  const staged: Entry[][] = [];
  const reads: (() => Promise<void>)[] = [];
  for (const [key, entries] of history) {
    const parsed = parseCompactionKey(key);
    const nsOfRoot = /^namespaces\/([^/]+)\/metadata\/root\.json$/.exec(key)?.[1];
    if (parsed.kind === 'lease') {
      const events: LeaseEvent[] = [];
      leases.set(key, events);
      for (const entry of entries) {
        if (entry.deleteMarker) events.push({ time: entry.time, deleted: true });
        else
          reads.push(async () => {
            const bytes = await readVersion(client, bucket, entry);
            try {
              events.push({
                time: entry.time,
                deleted: false,
                lease: decodeLease(bytes, { namespaceId: parsed.namespaceId, jobId: parsed.jobId }),
              });
            } catch (err) {
              events.push({ time: entry.time, deleted: false, corrupt: (err as Error).message });
            }
          });
      }
    } else if (parsed.kind === 'staged_segment') {
      staged.push(entries);
    } else if (nsOfRoot !== undefined && rootKey(namespaceId(nsOfRoot)) === key) {
      const ns = namespaceId(nsOfRoot);
      const versions: RootVersion[] = [];
      roots.set(ns, versions);
      for (const entry of entries.filter((e) => !e.deleteMarker)) {
        reads.push(async () => {
          const root = decodeRoot(await readVersion(client, bucket, entry), ns);
          const retired = new Map((root.retired ?? []).map((r) => [r.key, r.retired_at_ms] as const));
          versions.push({ time: entry.time, generation: root.generation, referenced: referencedKeys(root), retired });
        });
      }
    }
    for (const marker of entries.filter((e) => e.deleteMarker)) {
      // Input segments may go too once superseded or lost (spec 6a); whether one was referenced is checked with every
      // other key.
      const inputSegment = isInputSegmentKeyOf(key.split('/')[1] as NamespaceId, key);
      if (parsed.kind !== 'lease' && parsed.kind !== 'staged_segment' && !inputSegment)
        violate('deleted outside a job prefix', key, `deleted at ${new Date(marker.time).toISOString()}`);
    }
  }
  await eachLimited(reads, 16, (read) => read());
  for (const entries of history.values()) entries.sort((a, b) => a.time - b.time);
  for (const versions of roots.values()) versions.sort((a, b) => a.generation - b.generation);
  for (const events of leases.values()) events.sort((a, b) => a.time - b.time || rank(a) - rank(b));

  const nsOf = (key: string): NamespaceId => namespaceId(key.split('/')[1]);
  /** Whether `key` existed at `time`: some candidate state then is a written version. */
  const existedAt = (key: string, time: number): boolean =>
    candidatesAt(history.get(key) ?? [], time).some((e) => !e.deleteMarker);
  const leaseOf = (key: string): readonly LeaseEvent[] => {
    const parsed = parseCompactionKey(key);
    if (parsed.kind !== 'staged_segment') return [];
    return leases.get(`${key.slice(0, key.indexOf('/segments/'))}/lease.json`) ?? [];
  };

  /**
   * When `key` was retired, as the last root version written before `time` that lists it says; none if it never was.
   */
  const retiredAtBefore = (key: string, time: number): number | undefined =>
    (roots.get(nsOf(key)) ?? [])
      .filter((r) => r.time < time && r.retired.has(key))
      .at(-1)
      ?.retired.get(key);
  /** Whether a lease version says its job is live at `time`: active, and its heartbeat not yet expired. */
  const unexpiredAt = (e: LeaseEvent, time: number): boolean =>
    isActive(e) && 'lease' in e && time < e.lease.heartbeat_at_ms + timing.leaseExpiryMs;

  // Deletions: never of an object the root referenced at that moment, never of a live job's object,
  // never of a retired segment within its reader grace.
  let deletedObjects = 0;
  for (const [key, entries] of history) {
    for (const marker of entries.filter((e) => e.deleteMarker)) {
      deletedObjects++;
      const at = new Date(marker.time).toISOString();
      const rootsThen = candidatesAt(roots.get(nsOf(key)) ?? [], marker.time);
      if (rootsThen.length > 0 && rootsThen.every((r) => r.referenced.has(key))) {
        violate(
          'referenced object deleted',
          key,
          `deleted at ${at} while root generation ${rootsThen.map((r) => r.generation).join('/')} referenced it`,
        );
      }
      const leaseThen = candidatesAt(leaseOf(key), marker.time);
      const retiredAt = retiredAtBefore(key, marker.time);
      if (retiredAt === undefined) {
        // Staged output never published: the walk claims the lease (active → reaping) before it deletes.
        if (leaseThen.length > 0 && leaseThen.every(isActive))
          violate('live job object deleted', key, `deleted at ${at} while its job's lease was active`);
      } else {
        // A retired output (spec 6a.3, 6a.6) goes by its retirement, after the reader grace, which
        // outlasts its job's lease expiry (readerGraceMs >= leaseExpiryMs + margin); no claim needed.
        if (marker.time < retiredAt + timing.readerGraceMs) {
          violate(
            'retired segment deleted within its reader grace',
            key,
            `deleted at ${at}, retired at ${new Date(retiredAt).toISOString()}, reader grace ${timing.readerGraceMs} ms`,
          );
        }
        if (leaseThen.length > 0 && leaseThen.every((e) => unexpiredAt(e, marker.time)))
          violate('live job object deleted', key, `deleted at ${at} while its job's lease was active and unexpired`);
      }
    }
  }

  // Publications: every newly referenced key existed and was not deleted; its job's lease was neither claimed nor
  // expired.
  for (const [ns, versions] of roots) {
    let previous: ReadonlySet<string> = new Set();
    for (const version of versions) {
      const at = new Date(version.time).toISOString();
      for (const key of version.referenced) {
        if (previous.has(key)) continue;
        if (!existedAt(key, version.time))
          violate(
            'root references a missing object',
            key,
            `root generation ${version.generation} of ${ns} (${at}) references it`,
          );
        // Only the lease's current life counts: a create retried across a collection starts a new one.
        const lease = currentLife(leaseOf(key), version.time);
        if (lease.length === 0) continue;
        const claimedBefore = lease.find(
          (e) => !e.deleted && 'lease' in e && e.lease.status === 'reaping' && e.time < version.time,
        );
        if (claimedBefore)
          violate(
            'fenced job published',
            key,
            `root generation ${version.generation} (${at}) published it after its lease was claimed at ${new Date(claimedBefore.time).toISOString()}`,
          );
        const lastBeat = lease.filter((e) => e.time <= version.time && isActive(e)).at(-1);
        if (lastBeat && 'lease' in lastBeat && version.time > lastBeat.lease.heartbeat_at_ms + timing.leaseExpiryMs) {
          violate(
            'published with an expired lease',
            key,
            `root generation ${version.generation} (${at}) published it after the lease's last heartbeat ${lastBeat.lease.heartbeat_at_ms} had expired`,
          );
        }
      }
      previous = version.referenced;
    }
  }

  let claims = 0;
  let leasesRecreated = 0;
  for (const [key, events] of leases) {
    const counted = checkLeaseChain(key, events, timing, (detail) => violate('lease ownership', key, detail));
    claims += counted.claims;
    leasesRecreated += counted.recreated;
  }

  for (const job of input.published ?? []) {
    const versions = roots.get(namespaceId(job.namespaceId)) ?? [];
    const missing = job.outputs.filter((key) => !versions.some((v) => v.referenced.has(key)));
    if (missing.length)
      violate(
        'published result not in root history',
        `${job.namespaceId}/${jobId(job.jobId)}`,
        `${missing.length} of ${job.outputs.length} outputs never referenced by a root version, e.g. ${missing[0]}`,
      );
  }

  if (input.settledPassClockMs !== undefined)
    checkSettled(input.settledPassClockMs, history, roots, leases, timing, violate);
  if (input.groups) await checkRecords(input, violate);

  return {
    violations,
    rootVersions: [...roots.values()].reduce((n, v) => n + v.length, 0),
    leases: leases.size,
    leaseVersions: [...leases.values()].reduce((n, e) => n + e.filter((x) => !x.deleted).length, 0),
    claims,
    stagedObjects: staged.length,
    deletedObjects,
    leasesRecreated,
  };
}

/**
 * After a clean pass with clock `passMs`: no claimed lease it could finish remains, no lease that
 * had expired by then remains, and no staged object it had to reclaim (unreferenced, old enough,
 * its lease gone, claimed or expired) remains.
 */
function checkSettled(
  passMs: number,
  history: ReadonlyMap<string, Entry[]>,
  roots: ReadonlyMap<NamespaceId, RootVersion[]>,
  leases: ReadonlyMap<string, LeaseEvent[]>,
  timing: Timing,
  violate: (rule: AuditRule, key: string, detail: string) => void,
): void {
  const latestLease = (key: string): LeaseState | undefined => {
    const last = leases.get(key)?.at(-1);
    return last && !last.deleted && 'lease' in last ? last.lease : undefined;
  };
  const unowned = (lease: LeaseState | undefined) =>
    lease === undefined || lease.status === 'reaping' || lease.heartbeat_at_ms + timing.leaseExpiryMs < passMs;
  for (const [key, events] of leases) {
    const last = events.at(-1);
    if (!last || last.deleted || !('lease' in last)) continue;
    if (last.lease.status === 'reaping' && last.time < passMs)
      violate(
        'claimed lease remains',
        key,
        `claimed at ${new Date(last.time).toISOString()}, still there after the pass at ${new Date(passMs).toISOString()}`,
      );
    if (last.lease.status === 'active' && last.lease.heartbeat_at_ms + timing.leaseExpiryMs < passMs) {
      violate(
        'expired lease remains',
        key,
        `last heartbeat ${new Date(last.lease.heartbeat_at_ms).toISOString()}, not claimed by the pass at ${new Date(passMs).toISOString()}`,
      );
    }
  }
  for (const [key, entries] of history) {
    const parsed = parseCompactionKey(key);
    const newest = entries.reduce((a, b) => (b.time > a.time || (b.time === a.time && b.deleteMarker) ? b : a));
    if (parsed.kind !== 'staged_segment' || newest.deleteMarker) continue;
    const referenced = roots.get(parsed.namespaceId)?.at(-1)?.referenced.has(key) ?? false;
    const lease = latestLease(`${key.slice(0, key.indexOf('/segments/'))}/lease.json`);
    if (!referenced && newest.time + timing.stagingGraceMs <= passMs && unowned(lease)) {
      violate(
        'unowned staged object remains',
        key,
        `written ${new Date(newest.time).toISOString()}, unreferenced and unowned, not reclaimed by the pass at ${new Date(passMs).toISOString()}`,
      );
    }
  }
}

/**
 * No record lost or changed: each group's segments in the final root merge to what was written to it (newest seq per
 * key, tombstones dropped).
 */
async function checkRecords(
  input: AuditInput,
  violate: (rule: AuditRule, key: string, detail: string) => void,
): Promise<void> {
  const store = createS3ObjectStore({ bucket: input.bucket, client: input.client });
  for (const written of input.groups ?? []) {
    const ns = namespaceId(written.namespaceId);
    const { root } = await readRoot(store, ns, jsonRootCodec);
    const keys = groupSegments(root, familyGroup(written.group));
    const found = referenceMerge([await readRecords(store, keys)]);
    const expected = referenceMerge([...written.written]);
    const differing = expected.findIndex((r, i) => JSON.stringify(r) !== JSON.stringify(found[i]));
    if (found.length !== expected.length || differing >= 0) {
      violate(
        'records differ',
        `${ns}/${written.group}`,
        `${found.length} records read through the root, ${expected.length} written; first difference at ${differing >= 0 ? expected[differing]?.key : 'the end'}`,
      );
    }
  }
}
