/** Everything a worker is configured with: the protocol's timings plus the compactor's own knobs, validated once. */
import { TypedError } from '../errors';
import { hostname } from 'node:os';
import { z } from 'zod';
import { describeIssues } from '../envelope';
import { DEFAULT_SEGMENT_FORMAT_VERSION, SEGMENT_FORMAT_VERSIONS, type SegmentFormatVersion } from '../segments/versions';
import { KEEPER_RETRY_DELAY_MS, minimumLeaseExpiryMs, resolveTiming, TIMING_ENV, timingFromEnv, type Timing } from './timing';

/** A worker setting is out of range; the message names it. */
export class SettingsError extends TypedError {
  readonly failureType = 'InvalidSettings';
}

/** A worker's settings: its timings and the bounds and identities it writes by; {@link resolveSettings} fills the defaults. */
export interface CompactionSettings {
  readonly timing: Timing;
  /** Written into `owner_id` of every lease, for an operator reading the object. */
  readonly ownerId: string;
  /** Uncompressed bytes at which the compactor closes an output segment; bounds its memory. */
  readonly targetSegmentBytes: number;
  /** Most sources one merge reads at once; a wider group merges in passes through intermediate runs. Bounds memory and sockets whatever the group's width. */
  readonly maxFanIn: number;
  /** The segment format the reference compactor writes its outputs in (its intermediate runs are always v2); it reads both, so a group may mix them. */
  readonly segmentFormat: SegmentFormatVersion;
  /** Bytes above which an input segment is refused from its size (a HEAD) before it is read: far beyond any segment the metadata service writes. */
  readonly maxInputSegmentBytes: number;
  /** Temporal heartbeat timeout of the long activities: how fast a dead worker is noticed; the lease expiry must cover it (see `minimumLeaseExpiryMs`). Default {@link defaultHeartbeatTimeoutMs}. */
  readonly heartbeatTimeoutMs: number;
  /** How many times a fenced job runs again as a new job before the workflow reports `fenced`. */
  readonly maxFencedRuns: number;
  /** Lost root races a publication retries before it reports `superseded`. */
  readonly maxRootRaces: number;
  /** How long the collector keeps a pass's deletion manifests (from the pass's clock) before a later pass reclaims them. Default 30 days. */
  readonly manifestRetentionMs: number;
}

const schema = z.strictObject({
  ownerId: z.string().min(1).max(256).optional(),
  targetSegmentBytes: z.number().int().min(1024).optional(),
  maxFanIn: z.number().int().min(2).optional(),
  segmentFormat: z.union(SEGMENT_FORMAT_VERSIONS.map((v) => z.literal(v))).optional(),
  maxInputSegmentBytes: z.number().int().positive().optional(),
  heartbeatTimeoutMs: z.number().int().min(1000).optional(),
  maxFencedRuns: z.number().int().nonnegative().optional(),
  maxRootRaces: z.number().int().positive().optional(),
  manifestRetentionMs: z.number().int().positive().optional(),
});

/**
 * The heartbeat timeout unless one is set: refresh interval + operation deadline. A lease keeper
 * then beats once per refresh, when it lands (a refresh is sent one interval after the last and
 * lands within one deadline), so a job costs Temporal a heartbeat per refresh, not one every few
 * seconds. At the defaults (7.5 min) a dead worker's retried keeper still refreshes within half the
 * lease expiry of the death: timeout + keeper retry delay + deadline = 10 min against 12.5.
 */
export const defaultHeartbeatTimeoutMs = (t: Pick<Timing, 'leaseRefreshIntervalMs' | 'operationDeadlineMs'>): number =>
  t.leaseRefreshIntervalMs + t.operationDeadlineMs;

/**
 * How often a long activity (lease keeper, work) heartbeats to Temporal, and the worker's heartbeat
 * throttle: Temporal must hear from it within each heartbeat timeout, and a keeper's refresh (up to
 * one operation deadline) can delay the beat after it, so beats are timeout − deadline apart; at the
 * default timeout that is one per refresh interval. Every heartbeat sent is a billable Temporal
 * action, so none is sent more often; and they are at least a third of the timeout apart (the cadence
 * before heartbeats were counted) when the deadline leaves less.
 */
export const heartbeatEveryMs = (s: Pick<CompactionSettings, 'timing' | 'heartbeatTimeoutMs'>): number =>
  Math.max(200, s.heartbeatTimeoutMs / 3, s.heartbeatTimeoutMs - s.timing.operationDeadlineMs);

export const SETTINGS_ENV = {
  ownerId: 'COMPACTION_OWNER_ID',
  targetSegmentBytes: 'COMPACTION_TARGET_SEGMENT_BYTES',
  maxFanIn: 'COMPACTION_MAX_FAN_IN',
  segmentFormat: 'COMPACTION_SEGMENT_FORMAT',
  maxInputSegmentBytes: 'COMPACTION_MAX_INPUT_SEGMENT_BYTES',
  heartbeatTimeoutMs: 'COMPACTION_HEARTBEAT_TIMEOUT_MS',
  manifestRetentionMs: 'COMPACTION_MANIFEST_RETENTION_MS',
} as const;

/** Settings from code, every one not given at its default, checked as a worker would at start ({@link SettingsError} names the setting). */
export function resolveSettings(
  settings: Partial<Omit<CompactionSettings, 'timing'>> & { timing?: Timing | Partial<Timing> } = {},
): CompactionSettings {
  const { timing, ...rest } = settings;
  const parsed = schema.safeParse(rest);
  if (!parsed.success) throw new SettingsError(`invalid settings: ${describeIssues(parsed.error)}`);
  const s = parsed.data;
  const resolved = resolveTiming(timing);
  const heartbeatTimeoutMs = s.heartbeatTimeoutMs ?? defaultHeartbeatTimeoutMs(resolved);
  const minimumExpiryMs = minimumLeaseExpiryMs(resolved, heartbeatTimeoutMs);
  if (resolved.leaseExpiryMs < minimumExpiryMs) {
    throw new SettingsError(
      `unsafe timing: ${TIMING_ENV.leaseExpiryMs} (${resolved.leaseExpiryMs}) must be at least ${TIMING_ENV.leaseRefreshIntervalMs} + ` +
        `${SETTINGS_ENV.heartbeatTimeoutMs} + ${KEEPER_RETRY_DELAY_MS} ms keeper retry delay + ${TIMING_ENV.operationDeadlineMs} (${minimumExpiryMs}): ` +
        'a job whose lease keeper died before a refresh would expire before its retried keeper refreshes',
    );
  }
  return Object.freeze({
    timing: resolved,
    ownerId: s.ownerId ?? `${process.pid}@${hostname()}`,
    targetSegmentBytes: s.targetSegmentBytes ?? 64 * 1024 * 1024,
    maxFanIn: s.maxFanIn ?? 128,
    segmentFormat: s.segmentFormat ?? DEFAULT_SEGMENT_FORMAT_VERSION,
    maxInputSegmentBytes: s.maxInputSegmentBytes ?? 4 * 1024 * 1024 * 1024,
    heartbeatTimeoutMs,
    maxFencedRuns: s.maxFencedRuns ?? 3,
    maxRootRaces: s.maxRootRaces ?? 5,
    manifestRetentionMs: s.manifestRetentionMs ?? 30 * 86_400_000,
  });
}

/** Settings from `COMPACTION_*` variables (see the README's table). */
export function settingsFromEnv(env: NodeJS.ProcessEnv = process.env): CompactionSettings {
  const number = (name: string) => (env[name] ? Number(env[name]) : undefined);
  return resolveSettings({
    timing: timingFromEnv(env),
    ownerId: env[SETTINGS_ENV.ownerId] || undefined,
    targetSegmentBytes: number(SETTINGS_ENV.targetSegmentBytes),
    maxFanIn: number(SETTINGS_ENV.maxFanIn),
    segmentFormat: number(SETTINGS_ENV.segmentFormat) as SegmentFormatVersion | undefined,
    maxInputSegmentBytes: number(SETTINGS_ENV.maxInputSegmentBytes),
    heartbeatTimeoutMs: number(SETTINGS_ENV.heartbeatTimeoutMs),
    manifestRetentionMs: number(SETTINGS_ENV.manifestRetentionMs),
  });
}

/**
 * What a worker serves: `all` (the default) registers every activity; `compaction` only the
 * compaction's, `collector` only the collector's, so each runs with credentials bound to its own
 * policy (docs/security.md). Every role runs both workflows: workflow code touches no store.
 */
export const WORKER_ROLES = ['all', 'compaction', 'collector'] as const;
export type WorkerRole = (typeof WORKER_ROLES)[number];
export const WORKER_ROLE_ENV = 'COMPACTION_WORKER_ROLE';

/** The role `COMPACTION_WORKER_ROLE` names, `all` when unset; any other value is a {@link SettingsError}. */
export function workerRoleFromEnv(env: NodeJS.ProcessEnv = process.env): WorkerRole {
  const value = env[WORKER_ROLE_ENV] || 'all';
  if ((WORKER_ROLES as readonly string[]).includes(value)) return value as WorkerRole;
  throw new SettingsError(`${WORKER_ROLE_ENV} must be one of ${WORKER_ROLES.join(', ')}, not ${JSON.stringify(value)}`);
}
