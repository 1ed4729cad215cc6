/**
 * One collector pass, orchestrated (spec section 6): a parent walks the namespaces page by page
 * and runs a child per namespace, a bounded number at a time; each child first scans its job
 * prefixes for corrupt leases (read-only), then claims, reclaims and releases them, a bounded
 * number at a time.
 * One fixed clock, the workflow's own time at the start of the pass, decides every expiry and age
 * and travels through continue-as-new with the running report, so history stays bounded however
 * many prefixes exist. Deterministic: every I/O is an activity.
 */
import {
  ActivityFailure,
  ApplicationFailure,
  CancellationScope,
  ChildWorkflowFailure,
  continueAsNew,
  executeChild,
  patched,
  proxyActivities,
  proxyLocalActivities,
  setCurrentDetails,
  upsertMemo,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import { NON_RETRYABLE_TYPES } from '../activities/failures';
import type { CorruptLease, GcActivities, SurveyedPrefix } from '../activities/gc';
import { inputSegmentsPrefix, InvalidKeyError, jobId, jobPrefix, namespaceId, namespacePrefix, type MetadataCompactionId } from '../keys';
import type { ClaimOutcome, ReclaimTally, RootProblem } from '../protocol/collector';
import type { RetiredTally } from '../protocol/retired-reclaim';
import { inBatches } from '../store/batches';
import { CompactionNamespace, GcCorruptLeases, GcDryRun, GcObjectsDeleted, GcPrefixesSeen } from './search-attributes';

export interface GcOptions {
  /** Report exactly what a real pass would do, claiming and deleting nothing. */
  readonly dryRun?: boolean;
  /** Collect only these namespaces; by default every namespace found under `namespaces/`. */
  readonly namespaces?: readonly string[];
  /** Namespaces collected at once, each by its own child workflow. */
  readonly namespaceConcurrency?: number;
  /** Namespaces or job prefixes per listing page (≤ 400); a run continues as new between pages once its history is long. */
  readonly prefixesPerPage?: number;
  /** Job prefixes of one namespace claimed and reclaimed at once (≤ 100), each still claim → reclaim → delete lease. */
  readonly prefixConcurrency?: number;
  /** Staged candidates collected before the root is re-read and they are deleted. */
  readonly keysPerFlush?: number;
}

type PassOptions = Required<Omit<GcOptions, 'namespaces'>>;

export interface GcInput extends GcOptions {
  /**
   * The pass's fixed clock. Unset when a pass starts (it takes the workflow's time); set by
   * continue-as-new. It may not be later than the workflow's time: an earlier clock only keeps more.
   */
  readonly nowMs?: number;
  /** Set by continue-as-new: where the namespace walk stands and what it has done so far. */
  readonly carried?: { readonly after: string | undefined; readonly report: GcReport };
  /** The pass's reader grace, fixed at its start from the worker's settings; set by continue-as-new. */
  readonly readerGraceMs?: number;
}

export interface GcTotals {
  readonly namespaces: number;
  readonly failedNamespaces: number;
  readonly prefixesSeen: number;
  readonly live: number;
  /** Prefixes owned by the collector: claimed by this pass, or by an earlier one that did not finish. */
  readonly claimed: number;
  /** Prefixes with no lease at all. */
  readonly orphaned: number;
  readonly corrupt: number;
  readonly failedPrefixes: number;
  readonly leasesDeleted: number;
  readonly objectsDeleted: number;
  readonly bytesDeleted: number;
  readonly retainedReferenced: number;
  readonly retainedYoung: number;
  readonly retainedUnrecognised: number;
  /** Namespaces that claimed and deleted nothing because their root was missing, corrupt or unreadable. */
  readonly skippedNamespaces: number;
  /** Retired segments deleted once their reader grace was over (also in objectsDeleted). */
  readonly retiredDeleted: number;
  /** Segments under `metadata/segments/` no root knew, deleted past T (also in objectsDeleted). */
  readonly lostWritesDeleted: number;
  /** Records dropped from a root's retired list after their segments were gone. */
  readonly retiredRecordsDropped: number;
  /** Retired segments kept for readers of older roots. */
  readonly retainedInGrace: number;
}

/** What a pass (or one namespace of it) did; lists hold the first {@link REPORT_LIMIT} entries, counts are complete. */
export interface GcReport {
  readonly nowMs: number;
  readonly dryRun: boolean;
  readonly totals: GcTotals;
  readonly corruptNamespaces: readonly string[];
  readonly corruptLeases: readonly CorruptLease[];
  /** Prefixes whose walk failed (their lease was still deleted) and namespaces whose pass failed. */
  readonly failures: readonly { readonly key: string; readonly message: string }[];
  readonly unrecognisedKeys: readonly string[];
  /** Why each skipped namespace was skipped. Absent from reports of runs that predate the root check. */
  readonly rootProblems: readonly NamespaceRootProblem[];
}

export interface NamespaceRootProblem extends RootProblem {
  readonly namespaceId: string;
}

export interface GcNamespaceInput {
  readonly namespaceId: string;
  readonly nowMs: number;
  readonly options: PassOptions;
  /** The pass's reader grace; unset by parents that predate it (the child then fixes its worker's). */
  readonly readerGraceMs?: number;
  /** Set by continue-as-new. */
  readonly carried?: { readonly phase: 'scan' | 'collect'; readonly after: string | undefined; readonly report: GcReport };
}

/** Bounds every list in a report and in heartbeats, so history stays small however much is found. */
export const REPORT_LIMIT = 100;
/** A run continues as new at a page boundary beyond this many events (or when the server suggests it). */
const HISTORY_EVENTS_PER_RUN = 4000;
/**
 * A run checks its history length between pages, and one job prefix costs about 12 events
 * (bench/reclaim.ts measured 12,043 events for a run with pages of 1,000): 4,000 + 400 × 12 stays
 * under Temporal's 10,000-event comfort limit.
 */
const MAX_PREFIXES_PER_PAGE = 400;
/** Each prefix in flight holds up to two activities open: far below Temporal's 2,000 pending activities per run. */
const MAX_PREFIX_CONCURRENCY = 100;
const DEFAULTS: PassOptions = { dryRun: false, namespaceConcurrency: 4, prefixesPerPage: 100, prefixConcurrency: 8, keysPerFlush: 4000 };
/**
 * Runs recorded before prefixes were collected concurrently replay one at a time: their
 * histories schedule one claim after another. Remove once no such run can still be open.
 */
const CONCURRENT_PREFIXES_PATCH = 'gc-concurrent-prefixes';
/**
 * Runs recorded before leases were surveyed claim every prefix with a GET of its own (a
 * `claimLease` per prefix). Remove once no such run can still be open.
 */
const SURVEYED_LEASES_PATCH = 'gc-surveyed-leases';
/**
 * Runs recorded before the root was read ahead of a namespace's claims schedule no such read.
 * Remove once no such run can still be open.
 */
const ROOT_CHECK_PATCH = 'gc-root-check';
/**
 * Runs recorded before superseded segments were reclaimed end a namespace without that activity.
 * Remove once no such run can still be open.
 */
const RETIRED_SEGMENTS_PATCH = 'gc-retired-segments';

const ZERO: GcTotals = {
  namespaces: 0, failedNamespaces: 0, prefixesSeen: 0, live: 0, claimed: 0, orphaned: 0, corrupt: 0, failedPrefixes: 0,
  leasesDeleted: 0, objectsDeleted: 0, bytesDeleted: 0, retainedReferenced: 0, retainedYoung: 0, retainedUnrecognised: 0, skippedNamespaces: 0,
  retiredDeleted: 0, lostWritesDeleted: 0, retiredRecordsDropped: 0, retainedInGrace: 0,
};

const emptyReport = (nowMs: number, dryRun: boolean): GcReport => ({
  nowMs, dryRun, totals: ZERO, corruptNamespaces: [], corruptLeases: [], failures: [], unrecognisedKeys: [], rootProblems: [],
});

const capped = <T>(a: readonly T[], b: readonly T[]): T[] => [...a, ...b].slice(0, REPORT_LIMIT);

function merge(a: GcReport, b: Partial<Omit<GcReport, 'totals'>> & { totals?: Partial<GcTotals> }): GcReport {
  const totals = { ...a.totals };
  // A report carried through continue-as-new from an older version may lack a newer count.
  for (const [name, n] of Object.entries(b.totals ?? {}) as [keyof GcTotals, number][]) totals[name] = (totals[name] ?? 0) + n;
  return {
    ...a,
    totals,
    corruptNamespaces: capped(a.corruptNamespaces, b.corruptNamespaces ?? []),
    corruptLeases: capped(a.corruptLeases, b.corruptLeases ?? []),
    failures: capped(a.failures, b.failures ?? []),
    unrecognisedKeys: capped(a.unrecognisedKeys, b.unrecognisedKeys ?? []),
    rootProblems: capped(a.rootProblems ?? [], b.rootProblems ?? []),
  };
}

const fromTally = ({ unrecognisedKeys, ...counts }: ReclaimTally): Parameters<typeof merge>[1] => ({ totals: counts, unrecognisedKeys });

const fromRetiredTally = ({ unrecognisedKeys, ...counts }: RetiredTally): Parameters<typeof merge>[1] => ({
  totals: { ...counts, objectsDeleted: counts.retiredDeleted + counts.lostWritesDeleted },
  unrecognisedKeys,
});

const isIncomplete = ({ totals }: GcReport): boolean =>
  totals.corrupt > 0 || totals.failedPrefixes > 0 || totals.failedNamespaces > 0 || totals.skippedNamespaces > 0;

const historyIsLong = (): boolean => {
  const info = workflowInfo();
  return info.continueAsNewSuggested || info.historyLength > HISTORY_EVENTS_PER_RUN;
};

const message = (err: unknown): string => (err instanceof Error ? (err.cause instanceof Error ? err.cause.message : err.message) : String(err));

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
    `\n\nsuperseded segments: deleted ${t.retiredDeleted ?? 0} retired and ${t.lostWritesDeleted ?? 0} lost writes, ` +
    `dropped ${t.retiredRecordsDropped ?? 0} records, ${t.retainedInGrace ?? 0} in reader grace` +
    (report.corruptLeases.length ? `\n\ncorrupt leases: ${report.corruptLeases.map((c) => c.key).join(', ')}` : '') +
    (report.rootProblems?.length ? `\n\nskipped, root ${report.rootProblems.map((r) => `${r.problem}: ${r.key}`).join(', ')}` : '')
  );
}

/** Publishes progress in the UI: current details, search attributes and memo. */
function show(report: GcReport, phase: string): void {
  setCurrentDetails(describe(report, phase));
  upsertSearchAttributes([
    { key: GcPrefixesSeen, value: report.totals.prefixesSeen },
    // Superseded segments and lost writes count here too: a namespace may register only 3 Int search attributes (the dev server refuses a fourth).
    { key: GcObjectsDeleted, value: report.totals.objectsDeleted },
    { key: GcCorruptLeases, value: report.totals.corrupt },
    { key: GcDryRun, value: report.dryRun },
  ]);
  upsertMemo({ gcTotals: report.totals });
}

function resolveOptions(input: GcOptions): PassOptions {
  const options = { ...DEFAULTS, ...input };
  const whole = (name: keyof PassOptions, max: number) => {
    const n = options[name];
    if (!Number.isInteger(n) || (n as number) < 1 || (n as number) > max) invalidInput(`${name} must be a whole number from 1 to ${max}, not ${String(n)}`);
  };
  whole('namespaceConcurrency', 1000);
  whole('prefixesPerPage', MAX_PREFIXES_PER_PAGE);
  whole('prefixConcurrency', MAX_PREFIX_CONCURRENCY);
  whole('keysPerFlush', 1_000_000);
  const { dryRun, namespaceConcurrency, prefixesPerPage, prefixConcurrency, keysPerFlush } = options;
  return { dryRun: dryRun === true, namespaceConcurrency, prefixesPerPage, prefixConcurrency, keysPerFlush };
}

async function gcActivities() {
  const { gcSettings } = proxyLocalActivities<GcActivities>({ startToCloseTimeout: '10 seconds' });
  const settings = await gcSettings();
  const retry = {
    initialInterval: '1 second',
    backoffCoefficient: 2,
    maximumInterval: '1 minute',
    maximumAttempts: 10,
    nonRetryableErrorTypes: [...NON_RETRYABLE_TYPES],
  };
  const oneCall = 4 * settings.operationDeadlineMs + 10_000;
  const short = proxyActivities<GcActivities>({ startToCloseTimeout: oneCall, retry });
  // The scan and the walk make many store calls; their heartbeats tell a dead worker from a long prefix.
  const long = proxyActivities<GcActivities>({ startToCloseTimeout: '1 day', heartbeatTimeout: settings.heartbeatTimeoutMs, retry });
  return {
    settings,
    listNamespaces: short.listNamespaces,
    listJobPrefixes: short.listJobPrefixes,
    findRootProblem: short.findRootProblem,
    claimLease: short.claimLease,
    deleteLease: short.deleteLease,
    findCorruptLeases: long.findCorruptLeases,
    surveyLeases: long.surveyLeases,
    reclaimPrefix: long.reclaimPrefix,
    reclaimRetiredSegments: long.reclaimRetiredSegments,
  };
}

/**
 * The pass over one namespace. Phase `scan` reads every lease and claims nothing: a corrupt one
 * fails the namespace before anything in it is claimed or deleted. Phase `collect` surveys the
 * leases of a page again (one GET each, owners decided at the pass's clock), then claims,
 * reclaims and releases the prefixes that are not live, `prefixConcurrency` at a time; a lease
 * that turns corrupt meanwhile stops it there: no prefix is claimed after that, those already in
 * flight (claimed before the corruption was seen) finish and release their leases. A namespace
 * that fits in one page is surveyed once, which is both its scan and its collect phase's read.
 * Last, a namespace with no corrupt lease and no untrusted root reclaims its superseded segments
 * and lost writes (spec 6a) at the pass's clock and reader grace.
 */
export async function gcNamespaceWorkflow(input: GcNamespaceInput): Promise<GcReport> {
  const ns = namespaceId(input.namespaceId);
  const { nowMs, options } = input;
  const pass = { nowMs, dryRun: options.dryRun };
  let { phase, after, report } = input.carried ?? { phase: 'scan' as const, after: undefined, report: emptyReport(nowMs, options.dryRun) };
  upsertSearchAttributes([{ key: CompactionNamespace, value: ns }]);
  const { settings, listJobPrefixes, findRootProblem, findCorruptLeases, surveyLeases, claimLease, reclaimPrefix, deleteLease, reclaimRetiredSegments } = await gcActivities();
  const readerGraceMs = input.readerGraceMs ?? settings.readerGraceMs;
  // Options carried from a parent run that predates the option leave it unset.
  const prefixConcurrency = patched(CONCURRENT_PREFIXES_PATCH) ? (options.prefixConcurrency ?? DEFAULTS.prefixConcurrency) : 1;
  const surveyed = patched(SURVEYED_LEASES_PATCH);
  // Each run reads the root before it acts on its first job prefix; a namespace with none needs no root.
  let rootChecked = !patched(ROOT_CHECK_PATCH);

  /** Acts on a prefix's owner: reclaims what the collector or no one owns, then releases a claimed lease. */
  const collectPrefix = async (job: MetadataCompactionId, claim: ClaimOutcome): Promise<void> => {
    const prefix = jobPrefix(ns, job);
    if (claim.owner === 'corrupt') {
      report = merge(report, { totals: { corrupt: 1 }, corruptLeases: [{ key: claim.key, reason: claim.reason }] });
      return;
    }
    if (claim.owner === 'job') {
      report = merge(report, { totals: { live: 1 } });
      return;
    }
    report = merge(report, { totals: claim.owner === 'collector' ? { claimed: 1 } : { orphaned: 1 } });
    try {
      const tally = await reclaimPrefix.executeWithOptions({ summary: `reclaim ${prefix}` }, [
        { namespaceId: ns, jobId: job, ...pass, keysPerFlush: options.keysPerFlush, reportLimit: REPORT_LIMIT, readerGraceMs },
      ]);
      report = merge(report, fromTally(tally));
    } catch (err) {
      const tally = err instanceof ActivityFailure && err.cause instanceof ApplicationFailure ? (err.cause.details?.[0] as ReclaimTally | undefined) : undefined;
      if (tally) report = merge(report, fromTally(tally));
      report = merge(report, { totals: { failedPrefixes: 1 }, failures: [{ key: prefix, message: message(err) }] });
    } finally {
      // Lease last, whatever became of the walk, and even when the pass is cancelled: a claimed lease is never stranded.
      if (claim.owner === 'collector') {
        if (!options.dryRun) await CancellationScope.nonCancellable(() => deleteLease.executeWithOptions({ summary: `delete lease of ${prefix}` }, [{ namespaceId: ns, jobId: job }]));
        report = merge(report, { totals: { leasesDeleted: 1 } });
      }
    }
  };

  /** Runs recorded before surveys: one claim, with its own GET, per prefix. */
  const claimAndCollect = async (id: string): Promise<void> => {
    if (report.totals.corrupt > 0) return;
    const job = jobId(id);
    report = merge(report, { totals: { prefixesSeen: 1 } });
    await collectPrefix(job, await claimLease.executeWithOptions({ summary: `claim ${jobPrefix(ns, job)}` }, [{ namespaceId: ns, jobId: job, ...pass }]));
  };

  /**
   * Surveys a page's leases, then collects it: live prefixes are only counted, expired leases are
   * claimed (one CAS each, with the survey's ETag). A corrupt lease in the survey collects nothing of the page.
   */
  const surveyAndCollect = async (jobIds: string[]): Promise<void> => {
    const survey = await surveyLeases.executeWithOptions({ summary: `survey ${jobIds.length} leases of ${ns}` }, [{ namespaceId: ns, jobIds, ...pass }]);
    report = merge(report, { totals: { prefixesSeen: jobIds.length, live: survey.live, corrupt: survey.corrupt.length }, corruptLeases: survey.corrupt });
    await inBatches(survey.toCollect, 1, prefixConcurrency, async ([seen]) => {
      const found = seen as SurveyedPrefix;
      if (report.totals.corrupt > 0) return;
      const job = jobId(found.jobId);
      if (found.owner !== 'expired') return collectPrefix(job, { owner: found.owner });
      const { etag, lease } = found;
      const claim = await claimLease.executeWithOptions({ summary: `claim ${jobPrefix(ns, job)}` }, [{ namespaceId: ns, jobId: job, ...pass, seen: { etag, lease } }]);
      await collectPrefix(job, claim);
    });
  };

  for (;;) {
    const page = await listJobPrefixes.executeWithOptions({ summary: `list job prefixes of ${ns}` }, [{ namespaceId: ns, after, limit: options.prefixesPerPage }]);
    if (!rootChecked && page.found.length > 0) {
      rootChecked = true;
      const problem = await findRootProblem.executeWithOptions({ summary: `read the root of ${ns}` }, [{ namespaceId: ns }]);
      if (problem) {
        // Retention wins: without a trusted root nothing is claimed or deleted in this namespace this pass.
        report = merge(report, { totals: { skippedNamespaces: 1 }, rootProblems: [{ namespaceId: ns, ...problem }] });
        break;
      }
    }
    if (phase === 'scan' && surveyed && after === undefined && page.next === undefined) {
      // The whole namespace is this page: one survey is both the corruption scan and the owners' read.
      report = merge(report, { totals: { retainedUnrecognised: page.unrecognised.length }, unrecognisedKeys: page.unrecognised });
      await surveyAndCollect(page.found);
      break;
    }
    if (phase === 'scan') {
      const corruptLeases = await findCorruptLeases.executeWithOptions({ summary: `scan ${page.found.length} leases of ${ns}` }, [{ namespaceId: ns, jobIds: page.found }]);
      // Keys beside the job prefixes are reported once, by the scan; the collect phase walks the same listing again.
      report = merge(report, {
        totals: { prefixesSeen: page.found.length, corrupt: corruptLeases.length, retainedUnrecognised: page.unrecognised.length },
        corruptLeases,
        unrecognisedKeys: page.unrecognised,
      });
    } else if (surveyed) {
      await surveyAndCollect(page.found);
    } else {
      await inBatches(page.found, 1, prefixConcurrency, ([job]) => claimAndCollect(job as string));
    }
    after = page.next;
    if (report.totals.corrupt > 0) break;
    if (after === undefined) {
      if (phase === 'collect') break;
      // The collect phase counts the prefixes it meets itself: new jobs may have started since the scan.
      phase = 'collect';
      report = { ...report, totals: { ...report.totals, prefixesSeen: 0 } };
    }
    show(report, `${phase} ${ns}`);
    if (historyIsLong()) await continueAsNew<typeof gcNamespaceWorkflow>({ ...input, carried: { phase, after, report } });
  }
  // Superseded segments and lost writes (spec 6a), once the job prefixes are done: not where a lease or the root is untrusted.
  if (patched(RETIRED_SEGMENTS_PATCH) && report.totals.skippedNamespaces === 0 && report.totals.corrupt === 0 && readerGraceMs !== undefined) {
    const segments = inputSegmentsPrefix(ns);
    try {
      const outcome = await reclaimRetiredSegments.executeWithOptions({ summary: `reclaim superseded segments of ${ns}` }, [
        { namespaceId: ns, ...pass, readerGraceMs, keysPerFlush: options.keysPerFlush, reportLimit: REPORT_LIMIT },
      ]);
      report = merge(
        report,
        'rootProblem' in outcome ? { totals: { skippedNamespaces: 1 }, rootProblems: [{ namespaceId: ns, ...outcome.rootProblem }] } : fromRetiredTally(outcome.tally),
      );
    } catch (err) {
      if (!(err instanceof ActivityFailure)) throw err;
      report = merge(report, { totals: { failedPrefixes: 1 }, failures: [{ key: segments, message: message(err) }] });
    }
  }
  if (report.totals.corrupt > 0) report = merge(report, { corruptNamespaces: [ns] });
  show(
    report,
    report.totals.skippedNamespaces > 0
      ? `${ns} skipped: root ${report.rootProblems[0]?.problem}, nothing claimed or deleted`
      : report.totals.corrupt > 0
        ? `${ns} has corrupt leases: nothing more deleted`
        : `${ns} collected`,
  );
  return report;
}

/** The page of an explicit namespace list after `after`, in the order a listing would give. */
function pageOfGiven(namespaces: readonly string[], after: string | undefined, limit: number): { found: string[]; next: string | undefined } {
  const rest = [...new Set(namespaces)].sort().filter((ns) => after === undefined || ns > after);
  const found = rest.slice(0, limit);
  return { found, next: rest.length > limit ? found.at(-1) : undefined };
}

/** One collector pass over every namespace (or the given ones). Fails at the end, with the report as details, if any namespace was not collected cleanly. */
export async function gcWorkflow(input: GcInput = {}): Promise<GcReport> {
  const options = resolveOptions(input);
  let given: string[] | undefined;
  try {
    given = input.namespaces?.map((ns) => namespaceId(ns));
  } catch (err) {
    if (err instanceof InvalidKeyError) invalidInput(err.message);
    throw err;
  }
  const nowMs = input.nowMs ?? Date.now();
  if (!Number.isSafeInteger(nowMs) || nowMs > Date.now()) invalidInput(`the pass clock ${nowMs} is not a time at or before the workflow's time`);
  let { after, report } = input.carried ?? { after: undefined, report: emptyReport(nowMs, options.dryRun) };
  const { settings, listNamespaces } = await gcActivities();
  const readerGraceMs = input.readerGraceMs ?? settings.readerGraceMs;

  const collectNamespace = async (ns: string): Promise<void> => {
    try {
      const done = await executeChild(gcNamespaceWorkflow, {
        workflowId: `${workflowInfo().workflowId}/${ns}`,
        args: [{ namespaceId: ns, nowMs, options, readerGraceMs }],
        staticSummary: `${options.dryRun ? 'Dry run of the collector' : 'Collector pass'} over namespace ${ns}`,
      });
      report = merge(report, { ...done, totals: { ...done.totals, namespaces: 1 } });
    } catch (err) {
      if (!(err instanceof ChildWorkflowFailure)) throw err;
      report = merge(report, { totals: { namespaces: 1, failedNamespaces: 1 }, failures: [{ key: namespacePrefix(namespaceId(ns)), message: message(err) }] });
    }
  };

  show(report, 'collecting');
  for (;;) {
    const page = given
      ? pageOfGiven(given, after, options.prefixesPerPage)
      : await listNamespaces.executeWithOptions({ summary: 'list namespaces' }, [{ after, limit: options.prefixesPerPage }]);
    await inBatches(page.found, 1, options.namespaceConcurrency, (batch) => Promise.all(batch.map(collectNamespace)));
    after = page.next;
    show(report, after === undefined ? (isIncomplete(report) ? 'incomplete' : 'done') : 'collecting');
    if (after === undefined) break;
    if (historyIsLong()) await continueAsNew<typeof gcWorkflow>({ ...input, nowMs, readerGraceMs, carried: { after, report } });
  }
  if (isIncomplete(report)) {
    throw ApplicationFailure.create({
      type: 'GcPassIncomplete',
      message:
        `collector pass incomplete: ${report.totals.corrupt} corrupt leases, ${report.totals.failedPrefixes} failed prefixes, ` +
        `${report.totals.failedNamespaces} failed namespaces, ${report.totals.skippedNamespaces ?? 0} namespaces skipped for their root`,
      nonRetryable: true,
      details: [report],
    });
  }
  return report;
}
