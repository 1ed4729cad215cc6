/** Everything a worker is configured with: the protocol's timings plus the compactor's own knobs, validated once. */
import { hostname } from 'node:os';
import { describeIssues } from '../envelope';
import { TypedError } from '../errors';
import type { SegmentFormatVersion } from '../segments/versions';
import { applyDefaults, envNames, PROCESS_SETTINGS, WORKER_SETTINGS } from './declaration';
import { schemaOf } from './schema';
import { KEEPER_RETRY_DELAY_MS, minimumLeaseExpiryMs, resolveTiming, TIMING_ENV, type Timing } from './timing';

/** A worker setting is out of range; the message names it. */
export class SettingsError extends TypedError {
  readonly failureType = 'InvalidSettings';
}

/**
 * A worker's settings: its timings and the bounds and identities it writes by; {@link resolveSettings} fills the
 * defaults.
 */
export interface CompactionSettings {
  /** Refresh, expiry, graces and budgets, checked together by {@link resolveTiming}. */
  readonly timing: Timing;
  /** Written into `owner_id` of every lease, for an operator reading the object. */
  readonly ownerId: string;
  /** Uncompressed bytes at which the compactor closes an output segment; bounds its memory. */
  readonly targetSegmentBytes: number;
  /**
   * Most sources one merge reads at once; a wider group merges in passes through intermediate runs. Bounds memory and
   * sockets whatever the group's width.
   */
  readonly maxFanIn: number;
  /**
   * The segment format the reference compactor writes its outputs in (its intermediate runs are always v2); it reads
   * both, so a group may mix them.
   */
  readonly segmentFormat: SegmentFormatVersion;
  /**
   * Bytes above which an input segment is refused from its size (a HEAD) before it is read: far beyond any segment the
   * metadata service writes.
   */
  readonly maxInputSegmentBytes: number;
  /**
   * Temporal heartbeat timeout of the long activities: how fast a dead worker is noticed; the lease expiry must cover
   * it (see `minimumLeaseExpiryMs`). Default {@link defaultHeartbeatTimeoutMs}.
   */
  readonly heartbeatTimeoutMs: number;
  /** How many times a fenced job runs again as a new job before the workflow reports `fenced`. */
  readonly maxFencedRuns: number;
  /** Lost root races a publication retries before it reports `superseded`. */
  readonly maxRootRaces: number;
  /** The first wait after a lost root race; each later one may double, up to {@link rootRaceBackoffMaxMs}. */
  readonly rootRaceBackoffMs: number;
  /**
   * The longest wait between two root races; `maxRootRaces` of them fit in one operation deadline (the publication's
   * activity timeout holds four beside the budget).
   */
  readonly rootRaceBackoffMaxMs: number;
  /**
   * How long the collector keeps a pass's deletion manifests (from the pass's clock) before a later pass reclaims them.
   * Default 30 days ({@link WORKER_SETTINGS} holds every default).
   */
  readonly manifestRetentionMs: number;
}

const schema = schemaOf(WORKER_SETTINGS);

/**
 * The heartbeat timeout unless one is set: refresh interval + operation deadline (see {@link WORKER_SETTINGS} for why).
 */
export const defaultHeartbeatTimeoutMs: (t: Pick<Timing, 'leaseRefreshIntervalMs' | 'operationDeadlineMs'>) => number =
  WORKER_SETTINGS.heartbeatTimeoutMs.derive;

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

/** Environment variable of each setting an operator sets that way. */
export const SETTINGS_ENV = envNames(WORKER_SETTINGS);

/**
 * Settings from code validated against {@link WORKER_SETTINGS}, every unset one at its default there, checked as a
 * worker would at start ({@link SettingsError} names the setting).
 */
export function resolveSettings(
  settings: Partial<Omit<CompactionSettings, 'timing'>> & { timing?: Timing | Partial<Timing> } = {},
): CompactionSettings {
  const { timing, ...rest } = settings;
  const parsed = schema.safeParse(rest);
  if (!parsed.success) throw new SettingsError(`invalid settings: ${describeIssues(parsed.error)}`);
  const resolved = resolveTiming(timing);
  const s = applyDefaults(WORKER_SETTINGS, parsed.data, resolved);
  const minimumExpiryMs = minimumLeaseExpiryMs(resolved, s.heartbeatTimeoutMs);
  if (resolved.leaseExpiryMs < minimumExpiryMs) {
    throw new SettingsError(
      `unsafe timing: ${TIMING_ENV.leaseExpiryMs} (${resolved.leaseExpiryMs}) must be at least ${TIMING_ENV.leaseRefreshIntervalMs} + ` +
        `${SETTINGS_ENV.heartbeatTimeoutMs} + ${KEEPER_RETRY_DELAY_MS} ms keeper retry delay + ${TIMING_ENV.operationDeadlineMs} (${minimumExpiryMs}): ` +
        'a job whose lease keeper died before a refresh would expire before its retried keeper refreshes',
    );
  }
  if (s.maxRootRaces * s.rootRaceBackoffMaxMs > resolved.operationDeadlineMs) {
    throw new SettingsError(
      `${SETTINGS_ENV.maxRootRaces} (${s.maxRootRaces}) × ${SETTINGS_ENV.rootRaceBackoffMaxMs} (${s.rootRaceBackoffMaxMs}) must be at most ${TIMING_ENV.operationDeadlineMs} (${resolved.operationDeadlineMs}): ` +
        "a publication's waits between root races would take more of its activity's timeout than one store request may",
    );
  }
  // The owner is the process: the one default the declaration cannot hold.
  return Object.freeze({ ...s, timing: resolved, ownerId: s.ownerId ?? `${process.pid}@${hostname()}` });
}

/**
 * What a worker serves: `all` (the default) registers every activity; `compaction` only the
 * compaction's, `collector` only the collector's, so each runs with credentials bound to its own
 * policy (docs/security.md). Every role runs both workflows: workflow code touches no store.
 */
export const WORKER_ROLES = PROCESS_SETTINGS.workerRole.values;
export type WorkerRole = (typeof WORKER_ROLES)[number];
