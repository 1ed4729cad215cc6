/**
 * What a collector pass reports, and how the reports of its pages, prefixes and namespaces add
 * up. Pure: the workflow and the planner both fold results into one report with {@link mergeReport}.
 */
import { bounded, MESSAGE_LIMIT } from '../errors';
import type { ReclaimTally } from './walk';
import type { RootProblem } from './root-problem';

export interface CorruptLease {
  readonly key: string;
  readonly reason: string;
}

export interface GcTotals {
  readonly namespaces: number;
  readonly failedNamespaces: number;
  readonly prefixesSeen: number;
  readonly live: number;
  /** Prefixes owned by the collector: claimed by this pass, or by an earlier one that did not finish. */
  readonly claimed: number;
  /** Prefixes with no lease at all (the pass claims them by creating one). */
  readonly orphaned: number;
  /** Prefixes another pass claimed and still holds: left to that pass. */
  readonly claimedByOtherPasses: number;
  readonly corrupt: number;
  readonly failedPrefixes: number;
  readonly leasesDeleted: number;
  readonly objectsDeleted: number;
  readonly bytesDeleted: number;
  readonly retainedReferenced: number;
  readonly retainedYoung: number;
  readonly retainedUnrecognised: number;
  /** Retired segments deleted once their reader grace was over (also in objectsDeleted). */
  readonly retiredDeleted: number;
  /** Segments under `metadata/segments/` no root knew, deleted past the lost-write grace (also in objectsDeleted). */
  readonly lostWritesDeleted: number;
  /** Records dropped from a root's retired list after their segments were gone. */
  readonly retiredRecordsDropped: number;
  /** Retired segments kept for readers of older roots. */
  readonly retainedInGrace: number;
  /** Namespaces that claimed and deleted nothing because their root was missing, corrupt or unreadable. */
  readonly skippedNamespaces: number;
  /** Parts of earlier passes' manifests deleted past the manifest retention (not in objectsDeleted). */
  readonly manifestPartsDeleted: number;
}

export interface NamespaceRootProblem extends RootProblem {
  readonly namespaceId: string;
}

/**
 * What a pass (or one namespace of it) did; lists hold the first {@link REPORT_LIMIT} entries, at most
 * {@link REPORT_LIST_BYTES} of JSON each, every key and message in them {@link bounded}; counts are complete.
 */
export interface GcReport {
  /** The pass's one clock (ms since the epoch): every age the pass judged is counted to it. */
  readonly nowMs: number;
  /** True when nothing was claimed or deleted: what is counted is what a pass would have done. */
  readonly dryRun: boolean;
  /** Counts over every namespace: complete, however long the lists. */
  readonly totals: GcTotals;
  /** Namespaces whose pass stopped at a corrupt lease, deleting nothing there. */
  readonly corruptNamespaces: readonly string[];
  /** The corrupt leases found, with the reason each could not be read. */
  readonly corruptLeases: readonly CorruptLease[];
  /** Prefixes whose walk failed (their lease was still deleted) and namespaces whose pass failed. */
  readonly failures: readonly { readonly key: string; readonly message: string }[];
  /** Keys under a namespace that no rule names: left alone, listed for an operator. */
  readonly unrecognisedKeys: readonly string[];
  /** Why each skipped namespace was skipped. */
  readonly rootProblems: readonly NamespaceRootProblem[];
  /**
   * The manifest of each namespace where the pass deleted (or would delete) anything:
   * `namespaces/{ns}/metadata/gc/{pass}/`, its parts under it.
   */
  readonly manifests: readonly string[];
  /** Why the pass ran as a dry run though asked to delete: its clock and the store's disagree (spec 6c.6). */
  readonly clockProblem?: string;
}

/** Part of a report, added to another by {@link mergeReport}. */
export type ReportDelta = Partial<Omit<GcReport, 'totals' | 'nowMs' | 'dryRun'>> & {
  readonly totals?: Partial<GcTotals>;
};

/** Bounds every list in a report and in heartbeats, so history stays small however much is found. */
export const REPORT_LIMIT = 100;

const ZERO: GcTotals = {
  namespaces: 0,
  failedNamespaces: 0,
  prefixesSeen: 0,
  live: 0,
  claimed: 0,
  orphaned: 0,
  claimedByOtherPasses: 0,
  corrupt: 0,
  failedPrefixes: 0,
  leasesDeleted: 0,
  objectsDeleted: 0,
  bytesDeleted: 0,
  retainedReferenced: 0,
  retainedYoung: 0,
  retainedUnrecognised: 0,
  skippedNamespaces: 0,
  retiredDeleted: 0,
  lostWritesDeleted: 0,
  retiredRecordsDropped: 0,
  retainedInGrace: 0,
  manifestPartsDeleted: 0,
};

export const emptyReport = (nowMs: number, dryRun: boolean): GcReport => ({
  nowMs,
  dryRun,
  totals: ZERO,
  corruptNamespaces: [],
  corruptLeases: [],
  failures: [],
  unrecognisedKeys: [],
  rootProblems: [],
  manifests: [],
});

/**
 * JSON bytes one list of a report may hold: five lists and the totals stay under 256 KiB, whatever
 * the bucket holds (Temporal refuses a payload over 2 MiB, and a report is a workflow result and a
 * continue-as-new input).
 */
export const REPORT_LIST_BYTES = 40 * 1024;

/** A report entry with every string in it bounded: keys and values alike come from the bucket. */
function boundedEntry<T>(entry: T): T {
  if (typeof entry === 'string') return bounded(entry) as T;
  const fields = Object.entries(entry as Record<string, unknown>).map(([k, v]) => [
    k,
    typeof v === 'string' ? bounded(v, MESSAGE_LIMIT) : v,
  ]);
  return Object.fromEntries(fields) as T;
}

/** `a` followed by as many (bounded) entries of `b` as fit in {@link REPORT_LIMIT} and {@link REPORT_LIST_BYTES}. */
function capped<T>(a: readonly T[], b: readonly T[]): T[] {
  const out = [...a];
  let bytes = JSON.stringify(a).length;
  for (const entry of b) {
    if (out.length >= REPORT_LIMIT) break;
    const next = boundedEntry(entry);
    const size = JSON.stringify(next).length + 1;
    if (bytes + size > REPORT_LIST_BYTES) break;
    out.push(next);
    bytes += size;
  }
  return out;
}

export function mergeReport(a: GcReport, b: ReportDelta): GcReport {
  const totals = { ...a.totals };
  for (const [name, n] of Object.entries(b.totals ?? {}) as [keyof GcTotals, number][]) totals[name] += n;
  return {
    ...a,
    totals,
    corruptNamespaces: capped(a.corruptNamespaces, b.corruptNamespaces ?? []),
    corruptLeases: capped(a.corruptLeases, b.corruptLeases ?? []),
    failures: capped(a.failures, b.failures ?? []),
    unrecognisedKeys: capped(a.unrecognisedKeys, b.unrecognisedKeys ?? []),
    rootProblems: capped(a.rootProblems, b.rootProblems ?? []),
    manifests: capped(a.manifests, b.manifests ?? []),
  };
}

export const tallyDelta = ({ unrecognisedKeys, ...counts }: ReclaimTally): ReportDelta => ({
  totals: counts,
  unrecognisedKeys,
});

/**
 * A pass is incomplete when something was not collected cleanly: for a namespace's own reason, or because the pass
 * failed somewhere.
 */
export const isIncomplete = (report: GcReport): boolean => hasNamespaceProblems(report) || passFailed(report);

/**
 * A namespace's own problem (a corrupt lease, a root that is missing, corrupt, unreadable, older
 * than one judged or past the readers' limit), or clocks that disagree, leaves the pass incomplete,
 * and it says so in its result: another pass cannot mend it, and pausing the schedule would stop every
 * other namespace too.
 */
export const hasNamespaceProblems = ({ totals, rootProblems, clockProblem }: GcReport): boolean =>
  totals.corrupt > 0 || totals.skippedNamespaces > 0 || rootProblems.length > 0 || clockProblem !== undefined;

/**
 * A failure of the pass itself (a walk or a namespace's pass failed after its retries): the pass fails, and a schedule
 * pauses.
 */
export const passFailed = ({ totals }: GcReport): boolean => totals.failedPrefixes > 0 || totals.failedNamespaces > 0;

/** What every deleting walk counts: the bytes it freed and what it kept (a prefix's walk and the retired reclaim). */
export interface WalkCounts {
  readonly bytesDeleted: number;
  readonly retainedReferenced: number;
  /** Younger than their grace (or without a trustworthy timestamp). */
  readonly retainedYoung: number;
  readonly retainedUnrecognised: number;
  /** The first unrecognised keys, up to the pass's report limit. */
  readonly unrecognisedKeys: readonly string[];
}

export const EMPTY_WALK_COUNTS: WalkCounts = Object.freeze({
  bytesDeleted: 0,
  retainedReferenced: 0,
  retainedYoung: 0,
  retainedUnrecognised: 0,
  unrecognisedKeys: [],
});

/**
 * What one namespace's reclaim of retired segments did (in a dry run: would do); its young are unknown to the root and
 * younger than the lost-write grace, its unrecognised keys those under `metadata/segments/` that are not segment keys
 * of the namespace.
 */
export interface RetiredTally extends WalkCounts {
  /** Retired segments deleted, inputs and published outputs alike. */
  readonly retiredDeleted: number;
  /** Segments under `metadata/segments/` no root knew, older than the lost-write grace. */
  readonly lostWritesDeleted: number;
  /** Records dropped from the retired list by root CAS after their segments were gone. */
  readonly retiredRecordsDropped: number;
  /** Retired segments whose reader grace is not over. */
  readonly retainedInGrace: number;
}

export const EMPTY_RETIRED_TALLY: RetiredTally = Object.freeze({
  ...EMPTY_WALK_COUNTS,
  retiredDeleted: 0,
  lostWritesDeleted: 0,
  retiredRecordsDropped: 0,
  retainedInGrace: 0,
});
