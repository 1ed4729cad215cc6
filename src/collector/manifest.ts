/**
 * Every deletion accounted for: each pass writes, per namespace, a manifest of what it
 * deletes (or, in a dry run, would delete) under `namespaces/{ns}/metadata/gc/{pass}/`, in parts of
 * gzip-compressed NDJSON with one line per object: its key, size, ETag and LastModified, the rule
 * that doomed it and what the rule read. Batches deleted at once share a part (at most one PUT per
 * batch), and a prefix's lease is recorded in its walk's last part. Intent first: the part holding a
 * batch's lines is durable before its DeleteObjects is sent, so a pass killed at any point leaves a
 * manifest that names at least everything it deleted (and maybe a batch it never deleted).
 */
import { promisify } from 'node:util';
import { gzip } from 'node:zlib';
import { manifestPartKey, type NamespaceId, type PassId } from '../keys';
import type { LeaseStatus } from '../lease';
import { TypedError } from '../errors';
import type { DeleteFailure, DeleteResult, ObjectInfo, ObjectStore } from '../store';

/** The rule that doomed an object. */
export type DeletionRule =
  /**
   * An old unreferenced staged object under a prefix whose expired lease this pass (or an unfinished earlier one)
   * claimed.
   */
  | 'claimed_prefix'
  /** An old unreferenced staged object under a prefix with no lease. */
  | 'orphaned_prefix'
  /** A segment a publication retired, past the reader grace and referenced by no group (spec 6a). */
  | 'retired_segment'
  /** An input segment no root names or retires, older than the lost-write grace (spec 6a.4). */
  | 'lost_write'
  /** The `reaping` lease of a prefix this pass walked, deleted last. */
  | 'lease'
  /** A manifest part of a pass older than the manifest retention. */
  | 'expired_manifest';

/** A lease as the rule read it: what made its prefix the collector's. */
export interface LeaseFacts {
  readonly status: LeaseStatus;
  readonly heartbeatAtMs: number;
}

/** What the rule read when it decided; only the fields its rule reads. */
export interface DeletionEvidence {
  readonly lease?: LeaseFacts;
  /** The generation of the root re-read just before the batch was deleted. */
  readonly rootGeneration?: number;
  /** A retired segment's `retired_at_ms`: its writer's clock when it retired it. */
  readonly retiredAtMs?: number;
  /** A retired segment's `visible_at_ms`: the reader grace counted from here (spec 6c.2). */
  readonly visibleAtMs?: number;
  /** An expired manifest's pass clock: the retention counts from here. */
  readonly passClockMs?: number;
}

/** One object a pass deletes, and why. */
export interface Deletion {
  readonly object: ObjectInfo;
  readonly rule: DeletionRule;
  readonly read: DeletionEvidence;
}

/** One line of a manifest part. */
export interface ManifestLine {
  readonly key: string;
  readonly size: number;
  readonly etag: string | null;
  /** ISO 8601, or null when the store gave none. */
  readonly lastModified: string | null;
  readonly rule: DeletionRule;
  readonly read: DeletionEvidence;
  /** The pass's clock: every decision of the pass was made at it. */
  readonly decidedAtMs: number;
  /** Present in a dry run's manifest: nothing was deleted, this is what a real pass at the same clock would delete. */
  readonly dryRun?: true;
}

/** Where one namespace's manifest of one pass goes, and how its lines are stamped. */
export interface ManifestTarget {
  /** The real store, also in a dry run: a dry run's manifest is its whole plan. */
  readonly store: ObjectStore;
  readonly namespaceId: NamespaceId;
  readonly passId: PassId;
  readonly nowMs: number;
  readonly dryRun: boolean;
  /** Told of every part written (metrics). */
  readonly onPart?: (key: string, lines: number) => void;
}

/**
 * Deletes objects after recording them: the only way the collector deletes. `later`: objects
 * recorded in the same part but deleted afterwards, by {@link Deleter.deleteIfMatch} (a prefix's
 * lease, which goes after its walk): their lines then cost no part of their own.
 */
export interface Deleter {
  (deletions: readonly Deletion[], later?: readonly Deletion[]): Promise<DeleteResult>;
  /**
   * Deletes one object only while its ETag is `etag` (`ObjectStore.deleteIfMatch`, whose errors it
   * throws), after its line: the line this deleter recorded as `later` if there is one, else
   * `deletion` in a part of its own. A key is recorded once, however often its delete is tried.
   */
  readonly deleteIfMatch: (deletion: Deletion, etag: string) => Promise<void>;
  /**
   * The same deleter (its parts, its recorded keys) waiting for each part through `wait`: a walk
   * gives up its lane meanwhile (`Lanes.stepOut`), so other walks fill the next part.
   */
  readonly awaitingPartsWith: (wait: PartWait) => Deleter;
}

/** How a deleter waits for the part that makes its batch's `lines` durable. */
export type PartWait = (durable: Promise<void>, lines: number) => Promise<void>;

const lineOf = (d: Deletion, target: ManifestTarget): ManifestLine => ({
  key: d.object.key,
  size: d.object.size,
  etag: d.object.etag ?? null,
  lastModified: d.object.lastModified?.toISOString() ?? null,
  rule: d.rule,
  read: d.read,
  decidedAtMs: target.nowMs,
  ...(target.dryRun && { dryRun: true as const }),
});

/** Writes one part of the target's manifest holding `deletions`, its totals in its key; returns the key. */
export async function writeManifestPart(target: ManifestTarget, deletions: readonly Deletion[]): Promise<string> {
  const byRule: Partial<Record<DeletionRule, number>> = {};
  for (const d of deletions) byRule[d.rule] = (byRule[d.rule] ?? 0) + 1;
  const bytes = deletions.reduce((n, d) => n + d.object.size, 0);
  const key = manifestPartKey(target.namespaceId, target.passId, { byRule, bytes, dryRun: target.dryRun });
  const text = deletions.map((d) => JSON.stringify(lineOf(d, target)) + '\n').join('');
  await target.store.put(key, await promisify(gzip)(text));
  target.onPart?.(key, deletions.length);
  return key;
}

/**
 * Group commit of a manifest's parts: lines handed in while a part is being written go together in
 * the next part, so batches deleted at once (a page's prefixes) share PUTs. Each call resolves once
 * a part holding its lines is durable, and rejects if that part's write failed.
 */
function partWriter(target: ManifestTarget): (deletions: readonly Deletion[]) => Promise<void> {
  let open: { readonly deletions: Deletion[]; written: Promise<void> } | undefined;
  let previous: Promise<unknown> = Promise.resolve();
  return (deletions) => {
    if (!open) {
      const group: { readonly deletions: Deletion[]; written: Promise<void> } = {
        deletions: [],
        written: Promise.resolve(),
      };
      // The group takes lines until its write starts: after the part in flight, if any.
      group.written = previous.then(async () => {
        open = undefined;
        await writeManifestPart(target, group.deletions);
      });
      previous = group.written.catch(() => {});
      open = group;
    }
    open.deletions.push(...deletions);
    return open.written;
  };
}

/**
 * Deletes through `store` (in a dry run, the dry-run store), each batch's lines in a durable part of
 * the manifest first when there is a `manifest` (a pass without one is a benchmark's baseline). One
 * deleter serves the concurrent batches of a page, so their lines share parts.
 */
export function deleterOf(store: ObjectStore, manifest: ManifestTarget | undefined): Deleter {
  const record = manifest && partWriter(manifest);
  /** Keys recorded as `later` whose line is durable. */
  const recorded = new Set<string>();
  const awaitingPartsWith = (wait: PartWait): Deleter => {
    const deletes = async (deletions: readonly Deletion[], later: readonly Deletion[] = []): Promise<DeleteResult> => {
      if (deletions.length + later.length === 0) return { deleted: [], failed: [] };
      // WARN: the part must be durable before DeleteObjects is sent: a worker killed in between leaves a manifest
      // naming at least what it deleted.
      if (record) await wait(record([...deletions, ...later]), deletions.length + later.length);
      for (const d of later) recorded.add(d.object.key);
      return deletions.length ? store.deleteMany(deletions.map((d) => d.object.key)) : { deleted: [], failed: [] };
    };
    const deleteIfMatch = async (deletion: Deletion, etag: string): Promise<void> => {
      const { key } = deletion.object;
      if (record && !recorded.has(key)) {
        await wait(record([deletion]), 1);
        recorded.add(key);
      }
      await store.deleteIfMatch(key, etag);
    };
    return Object.assign(deletes, { deleteIfMatch, awaitingPartsWith });
  };
  return awaitingPartsWith((durable) => durable);
}

/** A DeleteObjects request reported per-key errors; the keys were not deleted. Retryable: deletes are idempotent. */
export class DeleteFailedError extends TypedError {
  readonly failureType = 'DeleteFailed';
  constructor(
    readonly prefix: string,
    readonly failures: readonly DeleteFailure[],
  ) {
    const shown = failures.slice(0, 3).map((f) => `${f.key} (${f.code}: ${f.message})`);
    super(`${failures.length} deletes under ${prefix} failed: ${shown.join(', ')}${failures.length > 3 ? ', …' : ''}`);
  }
}
