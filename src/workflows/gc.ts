/**
 * One collector pass, orchestrated (spec section 6): a parent walks the namespaces page by page
 * and runs a child per namespace, a bounded number at a time; each child runs the namespace's
 * pass plan (src/collector/plan), executing its commands as activities, each as its kind's row says
 * (src/collector/commands).
 * The pass's rules (its clock, the lease expiry, the staging grace, dry run, sizes) are fixed once
 * when the pass starts and travel in every input and through continue-as-new with the running
 * report, so every activity of one pass decides by the same rules and history stays bounded
 * however many prefixes exist. Deterministic: every I/O is an activity.
 */
import {
  ActivityCancellationType,
  type ActivityFunctionWithOptions,
  ActivityFailure,
  ApplicationFailure,
  CancellationScope,
  CancelledFailure,
  ChildWorkflowFailure,
  continueAsNew,
  executeChild,
  metricMeter,
  proxyActivities,
  proxyLocalActivities,
  setCurrentDetails,
  TimeoutFailure,
  upsertMemo,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { CommandInput, GcActivities } from '../activities/gc';
import { applyDefaults, GC_PASS_SETTINGS } from '../config/declaration';
import { InvalidKeyError, namespaceId, namespacePrefix, newPassId } from '../keys';
import type { FailureType } from '../errors';
import { workflowRandom } from './workflow-random';
import {
  passExecutor,
  rowOf,
  type CollectorCommand,
  type CollectorExecutor,
  type CollectorResult,
  type ActivityClass,
  type CommandFailure,
} from '../collector/commands';
import { runNamespacePass, startNamespacePass, type NamespacePass, type PassRules } from '../collector/plan';
import {
  emptyReport,
  hasNamespaceProblems,
  isIncomplete,
  mergeReport,
  passFailed,
  REPORT_LIMIT,
  type GcReport,
} from '../collector/report';
import { inBatches } from '../store/batches';
import { clockSkew } from '../store/clock-skew';
import { activityOptions, type ActivitySettings } from './activity-options';
import {
  CompactionNamespace,
  GcCorruptLeases,
  GcDryRun,
  GcIncomplete,
  GcObjectsDeleted,
  GcPrefixesSeen,
} from './search-attributes';

export type { GcReport, GcTotals, NamespaceRootProblem } from '../collector/report';
export { REPORT_LIMIT } from '../collector/report';

/** What a pass returns: its report, and whether every namespace was collected cleanly. */
export interface GcPassReport extends GcReport {
  /**
   * False when a namespace was left incomplete for its own reason (a corrupt lease, a root problem): `corruptLeases`
   * and `rootProblems` say which.
   */
  readonly complete: boolean;
}

export interface GcOptions {
  /** Report exactly what a real pass would do, claiming and deleting nothing. */
  readonly dryRun?: boolean;
  /** Collect only these namespaces; by default every namespace found under `namespaces/`. */
  readonly namespaces?: readonly string[];
  /** Namespaces collected at once, each by its own child workflow. */
  readonly namespaceConcurrency?: number;
  /**
   * Namespaces or job prefixes per listing page (≤ 400); a run continues as new between pages once its history is long.
   */
  readonly prefixesPerPage?: number;
  /** Job prefixes of one namespace claimed and reclaimed at once (≤ 100), each still claim → reclaim → delete lease. */
  readonly prefixConcurrency?: number;
  /** Staged candidates collected before the root is re-read and they are deleted. */
  readonly keysPerFlush?: number;
  /**
   * The task queue of every collector activity and per-namespace workflow of the pass, so they run on
   * the collector's workers (and credentials) wherever the pass started; unset, the pass's own queue.
   * The clients record it when they start a pass, so it is fixed for the pass.
   */
  readonly collectorTaskQueue?: string;
  /**
   * The store the pass collects (its identity: S3 bucket and endpoint, or the embedded file), as the
   * client that started it named it; unset, the store of the worker that runs its first workflow task.
   * An activity reaching a worker bound to another store fails `StoreMismatch`, naming both.
   */
  readonly store?: string;
}

/** What a pass takes from its first worker, once: its rules, and the activity timeouts. */
export interface PassSetup {
  readonly rules: PassRules;
  /** Allowed error between the pass's clock and the store's: beyond half of it the pass deletes nothing (spec 6c.6). */
  readonly clockSafetyMarginMs: number;
  readonly namespaceConcurrency: number;
  readonly timeouts: ActivitySettings;
  /** Where the pass's activities and per-namespace workflows run (see {@link GcOptions.collectorTaskQueue}). */
  readonly collectorTaskQueue?: string;
  /** The store every activity of the pass names (see {@link GcOptions.store}). */
  readonly store: string;
}

export interface GcInput extends GcOptions {
  /**
   * The pass's clock. Unset when a pass starts (it takes the workflow's time). It may not be later
   * than the workflow's time: an earlier clock only keeps more.
   */
  readonly nowMs?: number;
  /** Set by continue-as-new: the pass's setup, where the namespace walk stands and what it has done so far. */
  readonly carried?: { readonly setup: PassSetup; readonly after: string | undefined; readonly report: GcReport };
}

export interface GcNamespaceInput {
  readonly namespaceId: string;
  readonly setup: PassSetup;
  /** Set by continue-as-new: the plan's state at a page boundary. */
  readonly carried?: NamespacePass;
}

/** A run continues as new at a page boundary beyond this many events (or when the server suggests it). */
const HISTORY_EVENTS_PER_RUN = 4000;
/** What a pass does unless its input says otherwise. */
const DEFAULTS = applyDefaults(GC_PASS_SETTINGS, {});

const historyIsLong = (): boolean => {
  const info = workflowInfo();
  return info.continueAsNewSuggested || info.historyLength > HISTORY_EVENTS_PER_RUN;
};

/**
 * The message of the failure that names the cause: a namespace's failure wraps its activity's, which
 * wraps the application failure a typed error became (whose own causes are lower-level errors).
 */
const message = (err: unknown): string => {
  let named = err;
  while (!(named instanceof ApplicationFailure) && named instanceof Error && named.cause instanceof Error)
    named = named.cause;
  return named instanceof Error ? named.message : String(err);
};

function invalidInput(reason: string): never {
  throw ApplicationFailure.nonRetryable(reason, 'InvalidInput');
}

function describe(report: GcReport, phase: string): string {
  const t = report.totals;
  return (
    `**${phase}**${report.dryRun ? ' · dry run' : ''} · clock ${new Date(report.nowMs).toISOString()}\n\n` +
    `prefixes ${t.prefixesSeen} (live ${t.live}, claimed ${t.claimed}, orphaned ${t.orphaned}, corrupt ${t.corrupt}, failed ${t.failedPrefixes}) · ` +
    `deleted ${t.objectsDeleted} objects, ${t.bytesDeleted} bytes, ${t.leasesDeleted} leases · ` +
    `retained: referenced ${t.retainedReferenced}, young ${t.retainedYoung}, unrecognised ${t.retainedUnrecognised}` +
    `\n\nretired segments: deleted ${t.retiredDeleted} retired and ${t.lostWritesDeleted} lost writes, ` +
    `dropped ${t.retiredRecordsDropped} records, ${t.retainedInGrace} in reader grace` +
    (report.manifests?.length ? `\n\nmanifests: ${report.manifests.join(', ')}` : '') +
    (report.corruptLeases.length ? `\n\ncorrupt leases: ${report.corruptLeases.map((c) => c.key).join(', ')}` : '') +
    (report.rootProblems.length
      ? `\n\nskipped, root ${report.rootProblems.map((r) => `${r.problem}: ${r.key}`).join(', ')}`
      : '') +
    (report.clockProblem ? `\n\nnothing deleted: ${report.clockProblem}` : '')
  );
}

/** Publishes progress in the UI: current details, search attributes and memo. */
function show(report: GcReport, phase: string): void {
  setCurrentDetails(describe(report, phase));
  upsertSearchAttributes([
    { key: GcPrefixesSeen, value: report.totals.prefixesSeen },
    { key: GcObjectsDeleted, value: report.totals.objectsDeleted },
    { key: GcCorruptLeases, value: report.totals.corrupt },
    { key: GcDryRun, value: report.dryRun },
  ]);
  upsertMemo({ gcTotals: report.totals });
}

/** Validates the caller's options and fixes the pass's rules from them and the first worker's settings. */
async function setUp(input: GcInput): Promise<PassSetup> {
  const options = { ...DEFAULTS, ...input };
  for (const name of ['namespaceConcurrency', 'prefixesPerPage', 'prefixConcurrency', 'keysPerFlush'] as const) {
    const { min, max } = GC_PASS_SETTINGS[name];
    const n = options[name];
    if (!Number.isInteger(n) || n < min || n > max)
      invalidInput(`${name} must be a whole number from ${min} to ${max}, not ${String(n)}`);
  }
  const nowMs = input.nowMs ?? Date.now();
  if (!Number.isSafeInteger(nowMs) || nowMs > Date.now())
    invalidInput(`the pass clock ${nowMs} is not a time at or before the workflow's time`);
  const { gcSettings } = proxyLocalActivities<GcActivities>({ startToCloseTimeout: '10 seconds' });
  const {
    operationDeadlineMs,
    heartbeatTimeoutMs,
    leaseRefreshIntervalMs,
    leaseExpiryMs,
    stagingGraceMs,
    readerGraceMs,
    lostWriteGraceMs,
    clockSafetyMarginMs,
    manifestRetentionMs,
    store: workerStore,
  } = await gcSettings();
  const { dryRun, prefixesPerPage, prefixConcurrency, keysPerFlush, namespaceConcurrency, collectorTaskQueue } =
    options;
  if (collectorTaskQueue !== undefined && (typeof collectorTaskQueue !== 'string' || collectorTaskQueue === '')) {
    invalidInput(`collectorTaskQueue must be a task queue name, not ${JSON.stringify(collectorTaskQueue)}`);
  }
  const store = options.store ?? workerStore;
  return {
    ...(collectorTaskQueue !== undefined && { collectorTaskQueue }),
    store,
    rules: {
      nowMs,
      leaseRefreshIntervalMs,
      leaseExpiryMs,
      stagingGraceMs,
      readerGraceMs,
      lostWriteGraceMs,
      dryRun: dryRun === true,
      prefixesPerPage,
      prefixConcurrency,
      keysPerFlush,
      reportLimit: REPORT_LIMIT,
      passId: newPassId(nowMs, workflowRandom),
      manifestRetentionMs,
    },
    namespaceConcurrency,
    clockSafetyMarginMs,
    timeouts: { operationDeadlineMs, heartbeatTimeoutMs },
  };
}

/**
 * Compares the pass's clock (the workflow's, the Temporal server's) with the store's, whose
 * `LastModified` every age rule compares it with (spec 6c.6): a store write's stamp must lie between
 * the workflow's time before and after it, give or take half the clock safety margin. What is wrong,
 * if anything.
 */
async function storeClockProblem(setup: PassSetup): Promise<string | undefined> {
  const { short } = gcActivities(setup);
  const sentAt = Date.now();
  let storeMs: number | null;
  try {
    storeMs = await short.storeClock.executeWithOptions({ summary: "compare the store's clock with the pass's" }, [
      { store: setup.store },
    ]);
  } catch (err) {
    if (!(err instanceof ActivityFailure)) throw err;
    // The namespaces' own steps then fail alike (a store that refuses work, another store's worker) and say so in the
    // report.
    return `the store's clock could not be read (${message(err)}); the pass deletes nothing until it can be`;
  }
  const [fits, detail] = clockSkew(
    storeMs === null ? undefined : new Date(storeMs),
    sentAt,
    Date.now(),
    setup.clockSafetyMarginMs / 2,
  );
  return fits
    ? undefined
    : `the store's clock disagrees with the pass's (the Temporal server's) by more than half the clock safety margin: ${detail}; the pass deletes nothing until the clocks agree`;
}

/**
 * Attempts of each collector activity: a step that fails them all fails its prefix or namespace, which the next pass
 * retries.
 */
const GC_ATTEMPTS = 10;

/** The collector's activities by class (a command's row names its class), on the collector's task queue if named. */
function gcActivities({ timeouts, collectorTaskQueue }: PassSetup) {
  const options = activityOptions(timeouts);
  const queue = collectorTaskQueue === undefined ? {} : { taskQueue: collectorTaskQueue };
  const short = proxyActivities<GcActivities>({ ...options.short(GC_ATTEMPTS), ...queue });
  // The survey and the walk make many store calls; their heartbeats tell a dead worker from a long prefix.
  const heartbeated = proxyActivities<GcActivities>({ ...options.heartbeated('1 day', GC_ATTEMPTS), ...queue });
  // A cancelled page finishes its prefixes in flight and reports where it stood, so the pass releases what it claimed.
  const page = proxyActivities<GcActivities>({
    ...options.heartbeated('1 day', GC_ATTEMPTS),
    cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
    ...queue,
  });
  return { short, heartbeated, page } satisfies Record<ActivityClass, unknown>;
}

/** A command's activity that failed for good, or that the pass's cancellation stopped, as its row reads it. */
function commandFailure(err: unknown): CommandFailure {
  if (!(err instanceof ActivityFailure)) return { message: message(err), activityFailed: false };
  const { cause } = err;
  const details =
    cause instanceof ApplicationFailure || cause instanceof CancelledFailure ? cause.details?.[0] : undefined;
  const lastHeartbeat = cause instanceof TimeoutFailure ? cause.lastHeartbeatDetails : undefined;
  return {
    message: message(err),
    activityFailed: true,
    ...(details != null && { details }),
    ...(lastHeartbeat != null && { lastHeartbeat }),
  };
}

/**
 * Executes the plan's commands as activities, each as its row says (src/collector/commands): its timeout class, a
 * summary naming what it touches, whether the pass's cancellation stops it, and what its failure means.
 */
function activityExecutor(ns: string, setup: PassSetup): CollectorExecutor {
  const proxies = gcActivities(setup);
  const activity = (command: CollectorCommand): Promise<CollectorResult> => {
    const row = rowOf(command);
    const proxy = proxies[row.activity][command.kind] as ActivityFunctionWithOptions<
      (input: CommandInput) => Promise<CollectorResult>
    >;
    const input: CommandInput = {
      namespaceId: ns,
      rules: setup.rules,
      command,
      store: setup.store,
    };
    const call = () => proxy.executeWithOptions({ summary: row.summary(command, ns) }, [input]);
    return row.cancellable === false ? CancellationScope.nonCancellable(call) : call();
  };
  return passExecutor({ namespaceId: ns, rules: setup.rules, activity, failureOf: commandFailure });
}

/**
 * The pass over one namespace: a loop over its plan's commands, continuing as new at a page boundary once history is
 * long.
 */
export async function gcNamespaceWorkflow(input: GcNamespaceInput): Promise<GcReport> {
  const ns = namespaceId(input.namespaceId);
  const { setup } = input;
  upsertSearchAttributes([{ key: CompactionNamespace, value: ns }]);
  const report = await runNamespacePass(
    input.carried ?? startNamespacePass(ns, setup.rules),
    activityExecutor(ns, setup),
    async (pass) => {
      show(pass.report, `${pass.phase} ${ns}`);
      if (historyIsLong()) await continueAsNew<typeof gcNamespaceWorkflow>({ ...input, carried: pass });
    },
  );
  show(
    report,
    report.rootProblems[0]?.problem === 'oversize'
      ? `${ns}: root past the readers' limit, only retired segments reclaimed`
      : report.totals.skippedNamespaces > 0
        ? `${ns} skipped: root ${report.rootProblems[0]?.problem}, nothing claimed or deleted`
        : report.totals.corrupt > 0
          ? `${ns} has corrupt leases: nothing more deleted`
          : `${ns} collected`,
  );
  return report;
}

/** The page of an explicit namespace list after `after`, in the order a listing would give. */
function pageOfGiven(
  namespaces: readonly string[],
  after: string | undefined,
  limit: number,
): { found: string[]; next: string | undefined } {
  const rest = [...new Set(namespaces)].sort().filter((ns) => after === undefined || ns > after);
  const found = rest.slice(0, limit);
  return { found, next: rest.length > limit ? found.at(-1) : undefined };
}

/**
 * One collector pass over every namespace (or the given ones). A namespace left incomplete for its
 * own reason is reported (`complete: false`, search attribute `GcIncomplete`, metric
 * `compaction_lease_gc_incomplete_passes`) and the pass succeeds, so a schedule keeps collecting the
 * others; a failure of the pass itself (a walk or a namespace's pass failed) fails it at the end, with the report as
 * details.
 */
export async function gcWorkflow(input: GcInput = {}): Promise<GcPassReport> {
  let given: string[] | undefined;
  try {
    given = input.namespaces?.map((ns) => namespaceId(ns));
  } catch (err) {
    if (err instanceof InvalidKeyError) invalidInput(err.message);
    throw err;
  }
  let setup = input.carried?.setup ?? (await setUp(input));
  let { after, report } = input.carried ?? {
    after: undefined,
    report: emptyReport(setup.rules.nowMs, setup.rules.dryRun),
  };
  if (!input.carried) {
    // WARN: every age rule compares the pass's clock with the store's; a pass that cannot trust them runs as a dry run,
    // deleting nothing.
    const clockProblem = await storeClockProblem(setup);
    if (clockProblem) {
      setup = { ...setup, rules: { ...setup.rules, dryRun: true } };
      report = { ...emptyReport(setup.rules.nowMs, true), clockProblem };
    }
  }
  const { rules } = setup;
  const { listNamespaces } = gcActivities(setup).short;

  const collectNamespace = async (ns: string): Promise<void> => {
    try {
      const done = await executeChild(gcNamespaceWorkflow, {
        workflowId: `${workflowInfo().workflowId}/${ns}`,
        args: [{ namespaceId: ns, setup }],
        ...(setup.collectorTaskQueue !== undefined && { taskQueue: setup.collectorTaskQueue }),
        staticSummary: `${rules.dryRun ? 'Dry run of the collector' : 'Collector pass'} over namespace ${ns}`,
      });
      report = mergeReport(report, { ...done, totals: { ...done.totals, namespaces: 1 } });
    } catch (err) {
      if (!(err instanceof ChildWorkflowFailure)) throw err;
      report = mergeReport(report, {
        totals: { namespaces: 1, failedNamespaces: 1 },
        failures: [{ key: namespacePrefix(namespaceId(ns)), message: message(err) }],
      });
    }
  };

  show(report, 'collecting');
  for (;;) {
    const page = given
      ? pageOfGiven(given, after, rules.prefixesPerPage)
      : await listNamespaces.executeWithOptions({ summary: 'list namespaces' }, [
          { after, limit: rules.prefixesPerPage, store: setup.store },
        ]);
    await inBatches(page.found, 1, setup.namespaceConcurrency, (batch) => Promise.all(batch.map(collectNamespace)));
    after = page.next;
    show(report, after === undefined ? (isIncomplete(report) ? 'incomplete' : 'done') : 'collecting');
    if (after === undefined) break;
    if (historyIsLong()) await continueAsNew<typeof gcWorkflow>({ ...input, carried: { setup, after, report } });
  }
  upsertSearchAttributes([{ key: GcIncomplete, value: isIncomplete(report) }]);
  if (passFailed(report)) {
    throw ApplicationFailure.create({
      type: 'GcPassIncomplete' satisfies FailureType,
      message:
        `collector pass incomplete: ${report.totals.corrupt} corrupt leases, ${report.totals.failedPrefixes} failed prefixes, ` +
        `${report.totals.failedNamespaces} failed namespaces, ${report.totals.skippedNamespaces} namespaces skipped for their root`,
      nonRetryable: true,
      details: [report],
    });
  }
  if (hasNamespaceProblems(report))
    metricMeter
      .createCounter(
        'compaction_lease_gc_incomplete_passes',
        '1',
        'collector passes that left a namespace incomplete for its own reason',
      )
      .add(1, { dry_run: rules.dryRun });
  return { ...report, complete: !isIncomplete(report) };
}
