/**
 * The protocol's timings (spec section 4): one validated object. Every invariant is checked
 * when the object is built, so a worker with unsafe timings fails at start-up, not at 3 a.m.
 */
import { TypedError } from '../errors';
import { describeIssues } from '../envelope';
import { applyDefaults, envNames, TIMING_SETTINGS } from './declaration';
import { ACTIVITY_BACKOFF } from './retry';
import { schemaOf } from './schema';

/** The protocol's timings (docs/protocol.md, Timings): {@link resolveTiming} checks every invariant between them. */
export interface Timing {
  /** How often a job refreshes its lease; longer than one S3 operation including retries. */
  readonly leaseRefreshIntervalMs: number;
  /**
   * How long after its last heartbeat an active lease expires; at least the collector's minimum grace, and long enough
   * for the next refresh to land (see {@link minimumLeaseExpiryMs}).
   */
  readonly leaseExpiryMs: number;
  /** From the refresh at the top of a publication attempt until the root CAS is sent. */
  readonly publicationBudgetMs: number;
  /** Deadline of one store operation including the SDK's retries. */
  readonly operationDeadlineMs: number;
  /** Allowed error between host clocks and the store's `LastModified`. */
  readonly clockSafetyMarginMs: number;
  /**
   * T, the collector's minimum grace (spec section 4, `GC_MIN_GRACE_MS`; env
   * `COMPACTION_GC_MIN_GRACE_MS`): at least publication budget + operation deadline + clock margin.
   * "T" in comments and docs is this setting and nothing else; the lost-write grace is its own (spec 6a.4).
   */
  readonly gcMinGraceMs: number;
  /** Minimum store age before an unowned staged object may be deleted; at least expiry + T. */
  readonly stagingGraceMs: number;
  /**
   * How long a segment a publication replaced stays, counted from its `retired_at_ms` (spec 6a.2).
   * At least T and at least expiry + clock margin (see the rule in {@link resolveTiming}); a reader
   * that fetched the old root may read its segments for this long less T.
   */
  readonly readerGraceMs: number;
  /**
   * From before a writer's segment PUT until each root CAS that registers it is sent (spec 6a.4);
   * past it the writer registers nothing, so its segment is an ordinary lost write.
   */
  readonly writerBudgetMs: number;
  /**
   * How old (`LastModified`) a segment under `metadata/segments/` that the root neither names nor
   * retires must be before it goes as a lost write; at least writer budget + deadline + clock margin,
   * so no segment goes while its writer may still register it.
   */
  readonly lostWriteGraceMs: number;
}

/** Thrown at start-up when timings break an invariant; the message names the settings. */
export class TimingConfigError extends TypedError {
  readonly failureType = 'TimingConfig';
}

const schema = schemaOf(TIMING_SETTINGS);

/** Environment variable for each setting: the spec's name behind the `COMPACTION_` prefix. */
export const TIMING_ENV = envNames(TIMING_SETTINGS);

/**
 * Builds the timing from partial settings. Unset values take the spec's defaults
 * ({@link TIMING_SETTINGS}), the derived ones from the values that are set: T = budget + deadline +
 * margin, expiry = max(5 × refresh, T), staging = reader grace = expiry + T, lost-write grace
 * max(24 h, writer budget + deadline + margin).
 */
export function resolveTiming(settings: Partial<Timing> = {}): Timing {
  const parsed = schema.safeParse(settings);
  if (!parsed.success) throw new TimingConfigError(`invalid timing: ${describeIssues(parsed.error)}`);
  const timing: Timing = Object.freeze(applyDefaults(TIMING_SETTINGS, parsed.data));
  const broken = timingViolations(timing);
  if (broken.length) throw new TimingConfigError(`unsafe timing: ${broken.join('; ')}`);
  return timing;
}

function timingViolations(t: Timing): string[] {
  const env = TIMING_ENV;
  const rules: [boolean, string][] = [
    [
      t.leaseRefreshIntervalMs > t.operationDeadlineMs,
      `${env.leaseRefreshIntervalMs} (${t.leaseRefreshIntervalMs}) must exceed ${env.operationDeadlineMs} (${t.operationDeadlineMs})`,
    ],
    [
      t.leaseExpiryMs >= t.gcMinGraceMs,
      `${env.leaseExpiryMs} (${t.leaseExpiryMs}) must be at least ${env.gcMinGraceMs} (${t.gcMinGraceMs})`,
    ],
    [
      // A refresh is sent one interval after the heartbeat it follows and lands within one deadline.
      t.leaseExpiryMs >= t.leaseRefreshIntervalMs + t.operationDeadlineMs,
      `${env.leaseExpiryMs} (${t.leaseExpiryMs}) must be at least ${env.leaseRefreshIntervalMs} + ${env.operationDeadlineMs} (${t.leaseRefreshIntervalMs + t.operationDeadlineMs}): a healthy job would expire between two refreshes`,
    ],
    [
      t.gcMinGraceMs >= t.publicationBudgetMs + t.operationDeadlineMs + t.clockSafetyMarginMs,
      `${env.gcMinGraceMs} (${t.gcMinGraceMs}) must be at least ${env.publicationBudgetMs} + ${env.operationDeadlineMs} + ${env.clockSafetyMarginMs} (${t.publicationBudgetMs + t.operationDeadlineMs + t.clockSafetyMarginMs})`,
    ],
    [
      t.stagingGraceMs >= t.leaseExpiryMs + t.gcMinGraceMs,
      `${env.stagingGraceMs} (${t.stagingGraceMs}) must be at least ${env.leaseExpiryMs} + ${env.gcMinGraceMs} (${t.leaseExpiryMs + t.gcMinGraceMs})`,
    ],
    [
      // The retiring CAS lands within T of its retired_at_ms, so a reader of the old root keeps its segments for the
      // grace less T.
      t.readerGraceMs >= t.gcMinGraceMs,
      `${env.readerGraceMs} (${t.readerGraceMs}) must be at least ${env.gcMinGraceMs} (${t.gcMinGraceMs}): the root that retires a segment lands up to T after its retired_at_ms`,
    ],
    [
      // A published job stops refreshing before its outputs can be retired, so this grace outlasts its lease: no object
      // under a live lease goes.
      t.readerGraceMs >= t.leaseExpiryMs + t.clockSafetyMarginMs,
      `${env.readerGraceMs} (${t.readerGraceMs}) must be at least ${env.leaseExpiryMs} + ${env.clockSafetyMarginMs} (${t.leaseExpiryMs + t.clockSafetyMarginMs}): a retired output would go while its job's lease is live`,
    ],
    [
      // A writer sends its last registering CAS within the budget of its PUT's start; it lands within one deadline, and
      // LastModified may be off by the margin.
      t.lostWriteGraceMs >= t.writerBudgetMs + t.operationDeadlineMs + t.clockSafetyMarginMs,
      `${env.lostWriteGraceMs} (${t.lostWriteGraceMs}) must be at least ${env.writerBudgetMs} + ${env.operationDeadlineMs} + ${env.clockSafetyMarginMs} (${t.writerBudgetMs + t.operationDeadlineMs + t.clockSafetyMarginMs}): a writer's segment would go before its registration lands`,
    ],
  ];
  return rules.filter(([ok]) => !ok).map(([, message]) => message);
}

/**
 * How long the compaction workflow waits before it retries a lease keeper that Temporal timed out:
 * the first interval of its activities' retry policy, read from that policy.
 */
export const KEEPER_RETRY_DELAY_MS = ACTIVITY_BACKOFF.initialIntervalMs;

/**
 * The shortest lease expiry under which no healthy job expires between two refreshes, with the
 * Temporal heartbeat timeout of its lease keeper. The keeper sends each refresh one interval after
 * the heartbeat it last wrote (also as a retried attempt, from its heartbeat details). If its worker
 * dies before sending it, Temporal notices one heartbeat timeout after the keeper's last Temporal
 * heartbeat (no later than that refresh was due), retries it after {@link KEEPER_RETRY_DELAY_MS},
 * and the retried keeper refreshes at once, landing within one operation deadline:
 * expiry ≥ refresh interval + heartbeat timeout + retry delay + operation deadline.
 */
export const minimumLeaseExpiryMs = (
  t: Pick<Timing, 'leaseRefreshIntervalMs' | 'operationDeadlineMs'>,
  heartbeatTimeoutMs: number,
): number => t.leaseRefreshIntervalMs + heartbeatTimeoutMs + KEEPER_RETRY_DELAY_MS + t.operationDeadlineMs;

/**
 * The default timings with every one divided by `factor`: each cadence shrinks alike, so a job under
 * them refreshes, heartbeats and expires as a job at the defaults would, `factor` times faster.
 */
export function defaultTimingDividedBy(factor: number): Timing {
  return resolveTiming(
    Object.fromEntries(Object.entries(resolveTiming()).map(([field, ms]) => [field, Math.round(ms / factor)])),
  );
}

/**
 * Timings shrunk for tests and demos, keeping every invariant: refresh `unitMs`, everything else
 * scaled from it, and the expiry at least {@link minimumLeaseExpiryMs} for the keepers' heartbeat timeout.
 */
export function shrunkTiming(unitMs: number, heartbeatTimeoutMs: number): Timing {
  const scaled = {
    leaseRefreshIntervalMs: unitMs,
    operationDeadlineMs: Math.floor(unitMs / 2),
    publicationBudgetMs: unitMs,
    clockSafetyMarginMs: unitMs,
    writerBudgetMs: unitMs,
  };
  // The lost-write grace at its least, so a demo's lost writes go within seconds too.
  const lostWriteGraceMs = scaled.writerBudgetMs + scaled.operationDeadlineMs + scaled.clockSafetyMarginMs;
  return resolveTiming({
    ...scaled,
    lostWriteGraceMs,
    leaseExpiryMs: Math.max(5 * unitMs, minimumLeaseExpiryMs(scaled, heartbeatTimeoutMs)),
  });
}
