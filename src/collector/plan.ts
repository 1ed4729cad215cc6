/**
 * One collector pass over a namespace as a plan (spec section 6): pure step functions from the
 * pass's state and the last command's result to the next store command, and a small driver that
 * runs them against any executor. The workflow executes the commands through activities; tests
 * execute them against the store directly; both run this same plan. Every decision is made under
 * {@link PassRules} fixed once when the pass starts, so no two commands of a pass apply different rules.
 *
 * Commands and results are declared by kind in src/collector/commands: a new kind of store work is a row there and a
 * case in the step that asks for it.
 */
import { TypedError } from '../errors';
import {
  compactionsPrefix,
  inputSegmentsPrefix,
  jobId,
  jobPrefix,
  namespaceId,
  namespaceId as toNamespaceId,
  passId,
  passManifestPrefix,
} from '../keys';
import { Lanes } from '../store/lanes';
import type { ChildrenPage } from './listing';
import type { PrefixOwner, SettledOwner, SurveyedPrefix } from './claim';
import type { PrefixRule } from './walk';
import type { PartWait } from './manifest';
import { emptyReport, mergeReport, tallyDelta, type GcReport, type ReportDelta } from './report';
import type { RetiredReclaimOutcome } from './retired-reclaim';
import type { PassRules } from './rules';
import type {
  CollectorCommand,
  CollectorExecutor,
  CollectorResult,
  CommandFailure,
  CommandOf,
  CommandPosition,
  CommandProgress,
  ResultOf,
} from './commands';

export type { PassRules } from './rules';

/**
 * Where a namespace's pass stands between commands; plain data, so it travels through
 * continue-as-new. Phase `scan` reads every lease and claims nothing, so a corrupt one fails the
 * namespace before anything in it is claimed; phase `collect` surveys each page again and collects it.
 */
export interface NamespacePass {
  readonly namespaceId: string;
  /** `retired`: the job prefixes are done; the namespace's retired segments are reclaimed last. */
  readonly phase: 'scan' | 'collect' | 'retired';
  /** Where the listing resumes (exclusive). */
  readonly after: string | undefined;
  /** The root is read once, before the first job prefix is acted on. */
  readonly rootChecked: boolean;
  /**
   * The generation of the root the pass judged the namespace by: a delete batch re-reads the root and deletes nothing
   * by an older one.
   */
  readonly rootGeneration?: number;
  /** The page in hand; none at a page boundary. */
  readonly page: ChildrenPage<string> | undefined;
  /**
   * A listing met a folder marker (an object keyed `…/metadata/compactions/` itself). MinIO ends a
   * listing there, so job prefixes after it, and a corrupt lease among them, may be unseen.
   */
  readonly folderMarker?: boolean;
  /** Where the pass's manifest of this namespace goes (none for a pass that writes none). */
  readonly manifest?: string;
  readonly report: GcReport;
}

export type NamespaceStep =
  | { readonly pass: NamespacePass; readonly next: 'command'; readonly command: CollectorCommand }
  /** A page is done: a place to show progress and continue as new; step again with no result. */
  | { readonly pass: NamespacePass; readonly next: 'pageDone' }
  | { readonly pass: NamespacePass; readonly next: 'done' };

/** A plan step met a result of another command than the one it asked for: a bug in an executor. */
export class PlanOutOfStepError extends TypedError {
  readonly failureType = 'PlanOutOfStep';
  constructor(expected: string, got: string) {
    super(`collector plan expected ${expected}, got ${got}: the executor answered another command than the one asked`);
  }
}

export const startNamespacePass = (namespaceId: string, rules: PassRules): NamespacePass => ({
  namespaceId,
  phase: 'scan',
  after: undefined,
  rootChecked: false,
  page: undefined,
  report: emptyReport(rules.nowMs, rules.dryRun),
  ...(rules.manifests !== false && { manifest: passManifestPrefix(toNamespaceId(namespaceId), passId(rules.passId)) }),
});

/**
 * The page is the whole namespace (the first and last at once): its one survey is both the scan and the collect read.
 */
const collecting = (pass: NamespacePass): boolean =>
  pass.phase === 'collect' || (pass.after === undefined && pass.page?.next === undefined);

const withReport = (pass: NamespacePass, delta: ReportDelta): NamespacePass => ({
  ...pass,
  report: mergeReport(pass.report, delta),
});

/**
 * The namespace is done: a corrupt one is named, and so is its manifest if anything was deleted (every deletion has its
 * line).
 */
function done(pass: NamespacePass): NamespaceStep {
  const { totals } = pass.report;
  const deleted = totals.objectsDeleted + totals.leasesDeleted + totals.manifestPartsDeleted > 0;
  const delta = {
    corruptNamespaces: totals.corrupt > 0 ? [pass.namespaceId] : [],
    manifests: deleted && pass.manifest ? [pass.manifest] : [],
  };
  return { pass: withReport(pass, delta), next: 'done' };
}

/**
 * Last, the namespace's retired segments: only where every lease was seen and none was corrupt
 * (a corrupt lease stops the namespace before this), since retention wins every unclear case.
 */
function reclaimRetired(pass: NamespacePass): NamespaceStep {
  if (pass.folderMarker) {
    const key = compactionsPrefix(namespaceId(pass.namespaceId));
    const message =
      'a folder marker (an object keyed by the prefix itself): MinIO ends listings at it, so job prefixes after it and a corrupt lease among them may be unseen; ' +
      "this namespace's retired segments and lost writes are not reclaimed until the marker is deleted";
    return done(withReport(pass, { totals: { failedPrefixes: 1 }, failures: [{ key, message }] }));
  }
  return { pass: { ...pass, phase: 'retired' }, next: 'command', command: { kind: 'reclaimRetiredSegments' } };
}

/**
 * What the reclaim of retired segments adds to the report; a root problem skips them and is
 * reported. An oversize root is reported once: the namespace's own read may have found it first.
 */
function retiredDelta(pass: NamespacePass, outcome: RetiredReclaimOutcome, manifestPartsDeleted: number): ReportDelta {
  const namespace = pass.namespaceId;
  if ('rootProblem' in outcome)
    return { totals: { skippedNamespaces: 1 }, rootProblems: [{ namespaceId: namespace, ...outcome.rootProblem }] };
  const { unrecognisedKeys, ...counts } = outcome.tally;
  const oversize =
    outcome.oversize && !pass.report.rootProblems.some((p) => p.problem === 'oversize')
      ? [{ namespaceId: namespace, ...outcome.oversize }]
      : [];
  const totals = {
    ...counts,
    objectsDeleted: counts.retiredDeleted + counts.lostWritesDeleted,
    manifestPartsDeleted,
  };
  return { totals, unrecognisedKeys, rootProblems: oversize };
}

function endPage(pass: NamespacePass): NamespaceStep {
  // A corrupt lease stops the namespace here: nothing more is claimed or deleted in it.
  if (pass.report.totals.corrupt > 0) return done(pass);
  const wasCollecting = collecting(pass);
  const after = pass.page?.next;
  if (after !== undefined) return { pass: { ...pass, after, page: undefined }, next: 'pageDone' };
  if (wasCollecting) return reclaimRetired({ ...pass, page: undefined });
  // The collect phase counts the prefixes it meets itself: new jobs may have started since the scan.
  const report = { ...pass.report, totals: { ...pass.report.totals, prefixesSeen: 0 } };
  return { pass: { ...pass, phase: 'collect', after: undefined, page: undefined, report }, next: 'pageDone' };
}

function surveyed(pass: NamespacePass, prefixes: readonly SurveyedPrefix[]): NamespaceStep {
  const corrupt = prefixes.flatMap(({ owner }) =>
    owner.owner === 'corrupt' ? [{ key: owner.key, reason: owner.reason }] : [],
  );
  const unrecognised = pass.phase === 'scan' ? (pass.page?.unrecognised ?? []) : [];
  const counted = withReport(pass, {
    totals: { prefixesSeen: prefixes.length, corrupt: corrupt.length, retainedUnrecognised: unrecognised.length },
    corruptLeases: corrupt,
    unrecognisedKeys: unrecognised,
  });
  if (!collecting(pass) || corrupt.length > 0) return endPage(counted);
  const live = prefixes.filter(({ owner }) => owner.owner === 'job').length;
  const claimedByOtherPasses = prefixes.filter(({ owner }) => owner.owner === 'another_pass').length;
  const toCollect = prefixes.filter(({ owner }) => owner.owner !== 'job' && owner.owner !== 'another_pass');
  const next = withReport(counted, { totals: { live, claimedByOtherPasses } });
  const rootGeneration = pass.rootGeneration === undefined ? {} : { rootGeneration: pass.rootGeneration };
  return toCollect.length
    ? { pass: next, next: 'command', command: { kind: 'collectPrefixes', prefixes: toCollect, ...rootGeneration } }
    : endPage(next);
}

/** The survey of the page in hand (none for an empty page). */
function surveyPage(pass: NamespacePass): NamespaceStep {
  const jobIds = pass.page?.found ?? [];
  return jobIds.length ? { pass, next: 'command', command: { kind: 'surveyLeases', jobIds } } : surveyed(pass, []);
}

/**
 * The namespace's next step after `result`, the answer to the command the last step asked for
 * (none at the start and after `pageDone`).
 */
export function planNamespace(pass: NamespacePass, result: CollectorResult | undefined): NamespaceStep {
  if (result === undefined) return { pass, next: 'command', command: { kind: 'listJobPrefixes', after: pass.after } };
  switch (result.kind) {
    case 'listed': {
      const marker = result.page.unrecognised.includes(compactionsPrefix(namespaceId(pass.namespaceId)));
      const next = { ...pass, page: result.page, ...(marker && { folderMarker: true }) };
      // Each namespace's root is read before its first job prefix is acted on; one with none needs no root.
      if (!pass.rootChecked && result.page.found.length > 0)
        return { pass: next, next: 'command', command: { kind: 'readRoot' } };
      return surveyPage(next);
    }
    case 'rootRead': {
      const { problem } = result;
      if (problem) {
        const skipped = withReport(
          { ...pass, rootChecked: true },
          { totals: { skippedNamespaces: 1 }, rootProblems: [{ namespaceId: pass.namespaceId, ...problem }] },
        );
        // A root past the readers' limit: its job prefixes wait for a root every reader can read, and its
        // retired segments are reclaimed now, since dropping their records is what shrinks it.
        if (problem.problem === 'oversize') return reclaimRetired({ ...skipped, page: undefined });
        // Retention wins: without a trusted root nothing is claimed or deleted in this namespace this pass.
        return done(skipped);
      }
      return surveyPage({
        ...pass,
        rootChecked: true,
        ...(result.generation !== undefined && { rootGeneration: result.generation }),
      });
    }
    case 'surveyed':
      return surveyed(pass, result.prefixes);
    case 'collected':
      return endPage(withReport(pass, result.report));
    case 'retiredReclaimed':
      return done(withReport(pass, retiredDelta(pass, result.outcome, result.manifestPartsDeleted)));
    case 'retiredFailed': {
      const key = inputSegmentsPrefix(namespaceId(pass.namespaceId));
      return done(withReport(pass, { totals: { failedPrefixes: 1 }, failures: [{ key, message: result.message }] }));
    }
    default:
      throw new PlanOutOfStepError('a namespace-level result', result.kind);
  }
}

/** One prefix being collected, and its owner so far. */
export interface PrefixPass {
  readonly namespaceId: string;
  readonly jobId: string;
  readonly owner: PrefixOwner;
  /** The generation of the root the pass judged the namespace by: the walk deletes nothing by an older root. */
  readonly rootGeneration?: number;
}

export type PrefixStep =
  | {
      readonly pass: PrefixPass;
      readonly delta: ReportDelta;
      readonly next: 'command';
      readonly command: CollectorCommand;
    }
  | { readonly pass: PrefixPass; readonly delta: ReportDelta; readonly next: 'done' };

/** After the walk: the lease this pass owns goes last, whatever became of the walk. */
function afterWalk(pass: PrefixPass, delta: ReportDelta): PrefixStep {
  if (pass.owner.owner !== 'collector') return { pass, delta, next: 'done' };
  const { lease, claim } = pass.owner;
  return {
    pass,
    delta,
    next: 'command',
    command: { kind: 'deleteLease', jobId: pass.jobId, ...(lease && { lease }), ...(claim && { claim }) },
  };
}

/**
 * Acts on an owner the pass may collect: counts it and walks its prefix, or it is live, another pass's or corrupt after
 * all.
 */
function actOn(pass: PrefixPass, owner: SettledOwner): PrefixStep {
  const next = { ...pass, owner };
  if (owner.owner === 'job') return { pass: next, delta: { totals: { live: 1 } }, next: 'done' };
  if (owner.owner === 'another_pass')
    return { pass: next, delta: { totals: { claimedByOtherPasses: 1 } }, next: 'done' };
  if (owner.owner === 'corrupt')
    return {
      pass: next,
      delta: { totals: { corrupt: 1 }, corruptLeases: [{ key: owner.key, reason: owner.reason }] },
      next: 'done',
    };
  const { lease, claim, created } = owner;
  const why: PrefixRule = {
    rule: created ? 'orphaned_prefix' : 'claimed_prefix',
    ...(lease && { lease }),
    ...(claim && { claim }),
  };
  const minRootGeneration = pass.rootGeneration === undefined ? {} : { minRootGeneration: pass.rootGeneration };
  return {
    pass: next,
    delta: { totals: created ? { orphaned: 1 } : { claimed: 1 } },
    next: 'command',
    command: { kind: 'reclaimPrefix', jobId: pass.jobId, why, ...minRootGeneration },
  };
}

/**
 * A prefix's next step: claim it (an expired lease, or none), walk, release; `delta` is what the step adds to the
 * report.
 */
export function planPrefix(pass: PrefixPass, result: CollectorResult | undefined): PrefixStep {
  if (result === undefined) {
    const { owner } = pass;
    return owner.owner === 'expired' || owner.owner === 'none'
      ? { pass, delta: {}, next: 'command', command: { kind: 'claimLease', jobId: pass.jobId, seen: owner } }
      : actOn(pass, owner);
  }
  switch (result.kind) {
    case 'claimed':
      return actOn(pass, result.owner);
    case 'reclaimed':
      return afterWalk(pass, tallyDelta(result.tally));
    case 'reclaimFailed': {
      const before = result.tally ? tallyDelta(result.tally) : {};
      const key = jobPrefix(namespaceId(pass.namespaceId), jobId(pass.jobId));
      return afterWalk(pass, {
        ...before,
        totals: { ...before.totals, failedPrefixes: 1 },
        failures: [{ key, message: result.message }],
      });
    }
    case 'leaseDeleted':
      return { pass, delta: { totals: { leasesDeleted: 1 } }, next: 'done' };
    case 'claimLost': {
      const key = jobPrefix(namespaceId(pass.namespaceId), jobId(pass.jobId));
      const message =
        "the lease is no longer this pass's claim (another pass took it over after it went unrefreshed): left to its owner";
      return { pass, delta: { totals: { failedPrefixes: 1 }, failures: [{ key, message }] }, next: 'done' };
    }
    case 'fenceFailed': {
      // WARN: unfenced, a claimed prefix is neither walked nor released: a lease deleted now would leave its objects to
      // passes that see no owner and fence nothing.
      const key = jobPrefix(namespaceId(pass.namespaceId), jobId(pass.jobId));
      const message = `not walked, the lease stays reaping for a later pass: the root fence was not written (${result.message})`;
      return { pass, delta: { totals: { failedPrefixes: 1 }, failures: [{ key, message }] }, next: 'done' };
    }
    default:
      throw new PlanOutOfStepError('a prefix-level result', result.kind);
  }
}

/** The command resumed at `position` (where an earlier attempt stood), or as it is when there is none. */
export const resumedAt = <C extends CollectorCommand>(command: C, position: CommandPosition | undefined): C =>
  position === undefined ? command : { ...command, from: position };

/** One prefix of a page between commands: its plan state, the command it awaits, and the position it reached. */
export interface PrefixAt {
  readonly pass: PrefixPass;
  readonly command: CollectorCommand;
  readonly position?: CommandPosition;
}

/**
 * Where the collection of a page stands; plain data, so it travels in heartbeats and failure
 * details, and a retried `collectPrefixes` resumes each prefix at the command it awaits.
 */
export interface PageCollection {
  /** What the page's settled steps added up to. */
  readonly report: GcReport;
  /** Per prefix of the page, in order: not started (`null`), awaiting a command, or `done`. */
  readonly prefixes: readonly (PrefixAt | 'done' | null)[];
  /** The page's root fence was written (or answered): its claims are all made and its walks may delete. */
  readonly fenced?: boolean;
}

/**
 * How the commands a command is made of run (a page's, its prefixes'), and whom it tells of each step (a heartbeat):
 * `onProgress` with its position, `onRead` after each lease a survey among them reads.
 */
export interface PageRun<P = CommandPosition> extends Pick<CommandProgress, 'onRead'> {
  readonly namespaceId: string;
  readonly rules: PassRules;
  /** Runs each command it is made of (a page's listing, survey and collection; a collection's claims, fence, walks). */
  readonly execute: CollectorExecutor;
  readonly onProgress?: (at: P) => void;
}

/**
 * Whether a prefix awaits a walk of a prefix this pass owns, however it came to own it: the fence
 * must be written before it deletes anything there. A prefix whose claim the pass created needs it
 * too: a lease missing now is no proof its job is gone, since a live lease can be deleted under its
 * job (by hand, or by a pass's late delete on a store that ignores `If-Match`) after the refresh a
 * publication in flight rests on. That publication read its root before the refresh, the refresh
 * came before the lease was gone, and the claim after, so the fence fails it as it fails one of a
 * claimed lease.
 */
const awaitsOwnedWalk = (p: PrefixAt | 'done' | null): p is PrefixAt =>
  p !== null && p !== 'done' && p.command.kind === 'reclaimPrefix' && p.pass.owner.owner === 'collector';

/**
 * Collects the prefixes of a page, `rules.prefixConcurrency` at a time (one with nothing else to do
 * while its manifest part is written gives up its turn meanwhile), each by its own
 * {@link planPrefix}, in two rounds: every claim first, then one `fenceRoot` command if the page
 * owns a prefix, then the walks and lease deletions (spec 6b). A corrupt lease,
 * or a command that failed, enters no further prefix in the round; those in flight finish (a
 * walk's lease still goes last). A failed prefix stays at the command it awaits, and the first
 * failure is thrown once the others have settled, so a retry from where the page stood (`from`) redoes only that.
 */
export async function collectPrefixes(
  command: CommandOf<'collectPrefixes'>,
  { namespaceId: namespace, rules, execute, onProgress }: PageRun<PageCollection>,
): Promise<GcReport> {
  const { prefixes, rootGeneration, from: resume } = command;
  let report = resume?.report ?? emptyReport(rules.nowMs, rules.dryRun);
  const at: (PrefixAt | 'done' | null)[] = resume ? [...resume.prefixes] : prefixes.map(() => null);
  let fenced = resume?.fenced === true;
  let failure: { readonly error: unknown } | undefined;
  const advance = (index: number, step: PrefixStep): void => {
    report = mergeReport(report, step.delta);
    at[index] = step.next === 'done' ? 'done' : { pass: step.pass, command: step.command };
  };
  const told = () => onProgress?.({ report, prefixes: [...at], ...(fenced && { fenced }) });
  // A prefix with nothing else to do while its manifest part is written (a walk's last batch) steps out of its
  // lane: no more than `prefixConcurrency` prefixes send requests at once, and the part's wait overlaps other
  // prefixes' work, whose batches fill the next part. The batches out of their lanes hold no more keys than a
  // batch per lane, so memory stays within twice what the lanes alone hold.
  const lanes = new Lanes(rules.prefixConcurrency, rules.prefixConcurrency * rules.keysPerFlush);
  const awaitPart: PartWait = (durable, lines) => lanes.stepOut(durable, lines);
  const generation = rootGeneration === undefined ? {} : { rootGeneration };
  /** One round: each prefix goes on while `goesOn` its next command. */
  const round = (goesOn: (command: CollectorCommand) => boolean) =>
    Promise.all(
      prefixes.map((found, index) =>
        lanes.hold(async () => {
          const entered = at[index];
          if (entered === 'done' || report.totals.corrupt > 0 || failure) return;
          if (entered === null)
            advance(index, planPrefix({ namespaceId: namespace, ...found, ...generation }, undefined));
          for (let now = at[index]; now && now !== 'done' && goesOn(now.command); now = at[index]) {
            const { pass, command } = now;
            const progress: CommandProgress = {
              onProgress: (position) => {
                at[index] = { pass, command, position };
                told();
              },
              awaitPart,
            };
            let result: CollectorResult;
            try {
              result = await execute(resumedAt(command, now.position), progress);
            } catch (error) {
              failure ??= { error };
              return;
            }
            advance(index, planPrefix(pass, result));
            told();
          }
        }),
      ),
    );
  /** The first failure of a round, once its other prefixes have settled. */
  const throwFailure = (): void => {
    if (failure) throw failure.error;
  };
  await round((command) => command.kind === 'claimLease');
  throwFailure();
  // WARN: the fence comes after every claim of the page and before any delete under a prefix it owns.
  if (!fenced && report.totals.corrupt === 0 && at.some(awaitsOwnedWalk)) {
    const result = await execute({ kind: 'fenceRoot' });
    if (result.kind === 'fenceFailed')
      at.forEach((p, index) => awaitsOwnedWalk(p) && advance(index, planPrefix(p.pass, result)));
    fenced = true;
    told();
  }
  await round(() => true);
  throwFailure();
  return report;
}

/**
 * Where a page's run stands; plain data, so it travels in heartbeats and failure details, and a retried `runPage`
 * goes on with the command the page awaits, resumed at `at`: the commands it finished are not run again.
 */
export interface PageStep {
  /** The pass as the page's finished commands left it. */
  readonly pass: NamespacePass;
  /** The command the page awaits, the next in plan order. */
  readonly command: CollectorCommand;
  /** How many of the page's commands are finished (the awaited one is the next). */
  readonly done: number;
  /** Where the awaited command stood when it last told (a walk's, a page collection's position). */
  readonly at?: CommandPosition;
  /**
   * The awaited command's activity failed for good with the page's: it comes to what its own row says that failure
   * means, as if it had been its own activity.
   */
  readonly failed?: CommandFailure;
}

/** What the awaited command of a page that failed for good comes to, as its row says (src/collector/commands). */
export type FailedInFlight = (
  command: CollectorCommand,
  failure: CommandFailure,
  progress: { readonly onProgress: (position: CommandPosition) => void },
) => Promise<CollectorResult>;

/**
 * Runs a namespace's plan from a page boundary (or its start) to the next one (or its end), one command after the
 * other in plan order, each through `page.execute`: the order of the plan is the order of the page's requests, so a
 * claim, the root fence and the walks it guards keep theirs. Tells `onProgress` where it stands after each command
 * and whenever the command in flight tells its own position.
 */
export async function runPage(
  command: CommandOf<'runPage'>,
  { execute, onProgress, onRead }: PageRun<PageStep>,
  failedInFlight: FailedInFlight,
): Promise<ResultOf<'runPage'>> {
  const { from } = command;
  let step: NamespaceStep = from
    ? { pass: from.pass, next: 'command', command: from.command }
    : planNamespace(command.pass, undefined);
  let [done, at, failed] = [from?.done ?? 0, from?.at, from?.failed];
  while (step.next === 'command') {
    const { pass, command: awaited } = step;
    const told = (position?: CommandPosition) => {
      at = position;
      onProgress?.({ pass, command: awaited, done, ...(at !== undefined && { at }) });
    };
    const resumed = resumedAt(awaited, at);
    if (!from || done > from.done) told(undefined);
    const result = failed
      ? await failedInFlight(resumed, failed, { onProgress: told })
      : await execute(resumed, { onProgress: told, ...(onRead && { onRead }) });
    [step, done, at, failed] = [planNamespace(pass, result), done + 1, undefined, undefined];
  }
  return { kind: 'pageRun', pass: step.pass, next: step.next };
}

/** Called at every page boundary with the pass as it stands (show progress, continue as new). */
export type AtPageEnd = (pass: NamespacePass) => Promise<void>;

/**
 * Runs a namespace's plan to the end, a page at a time through `execute` (one `runPage` a page: its listing, survey
 * and collection).
 */
export async function runNamespacePass(
  start: NamespacePass,
  execute: CollectorExecutor,
  atPageEnd: AtPageEnd,
): Promise<GcReport> {
  for (let pass = start; ;) {
    const result = await execute({ kind: 'runPage', pass });
    if (result.kind !== 'pageRun') throw new PlanOutOfStepError('a page run', result.kind);
    if (result.next === 'done') return result.pass.report;
    await atPageEnd(result.pass);
    pass = result.pass;
  }
}
