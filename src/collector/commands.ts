/**
 * The collector's command kinds, declared once: for each, the store work it asks for, what it answers, how its activity
 * runs and what its failure means to the pass. The plan's commands and results, the executor over the store
 * (`execute.ts`, the table's store column), the activities (src/activities/gc) and the workflow's dispatch
 * (src/workflows/gc) are all derived from {@link COMMAND_KINDS}; a new kind is a row here, a row of the store column,
 * and a step of the plan that asks for it. Pure (no I/O, no Temporal): the workflow bundle carries it.
 */
import { jobId, jobPrefix, namespaceId } from '../keys';
import type { ClaimableOwner, HeldClaim, SettledOwner, SurveyedPrefix } from './claim';
import type { ChildrenPage } from './listing';
import type { LeaseFacts, PartWait } from './manifest';
import {
  collectPrefixes,
  resumedAt,
  runPage,
  type NamespacePass,
  type PageCollection,
  type PageRun,
  type PageStep,
} from './plan';
import type { GcReport } from './report';
import type { RetiredPosition, RetiredReclaimOutcome } from './retired-reclaim';
import type { RootProblem } from './root-problem';
import type { PassRules } from './rules';
import type { PrefixRule, ReclaimPosition, ReclaimTally } from './walk';

/**
 * Per kind: the command's fields (store work, always within the namespace of its pass), the results it answers (its
 * failure's among them), and the position a command that resumes reports while it runs.
 */
export interface CommandTypes {
  listJobPrefixes: {
    command: { readonly after: string | undefined };
    result: { readonly kind: 'listed'; readonly page: ChildrenPage<string> };
  };
  readRoot: {
    command: object;
    /**
     * `generation`: of the root the pass judges the namespace by; every later root read must be at least as new
     * (spec 6c.5).
     */
    result: { readonly kind: 'rootRead'; readonly problem: RootProblem | null; readonly generation?: number };
  };
  /** One GET per lease, owners decided at the pass's clock; nothing is claimed. */
  surveyLeases: {
    command: { readonly jobIds: readonly string[] };
    result: { readonly kind: 'surveyed'; readonly prefixes: readonly SurveyedPrefix[] };
  };
  /**
   * Claim for this pass: CAS an expired lease to `reaping` with the survey's ETag, or create a `reaping` lease where
   * there is none.
   */
  claimLease: {
    command: { readonly jobId: string; readonly seen: ClaimableOwner };
    result: { readonly kind: 'claimed'; readonly owner: SettledOwner };
  };
  /**
   * Walk the prefix, deleting old unreferenced staged segments (none in a dry run); `from`: a walk an earlier activity
   * started goes on after its position, its tally counted on, so nothing is counted twice or lost.
   */
  reclaimPrefix: {
    command: {
      readonly jobId: string;
      readonly from?: ReclaimPosition;
      readonly why?: PrefixRule;
      readonly minRootGeneration?: number;
    };
    result:
      | { readonly kind: 'reclaimed'; readonly tally: ReclaimTally }
      /** The walk failed for good (its retries spent); `tally` is what it did before. */
      | { readonly kind: 'reclaimFailed'; readonly tally: ReclaimTally | undefined; readonly message: string };
    position: ReclaimPosition;
  };
  /**
   * The collectable prefixes of a page, each by its own `planPrefix` (claim, walk, lease last): one activity per page,
   * not three per prefix. `from`: where an earlier attempt left the page.
   */
  collectPrefixes: {
    command: {
      readonly prefixes: readonly SurveyedPrefix[];
      readonly rootGeneration?: number;
      readonly from?: PageCollection;
    };
    /** What the page's prefixes added to the report. */
    result: { readonly kind: 'collected'; readonly report: GcReport };
    position: PageCollection;
  };
  /**
   * The plan's commands from a page boundary (or the start) to the next (or the end), in plan order: the page's
   * listing, survey and collection, the retired reclaim after the last. One activity a page, not one a command.
   * `from`: where an earlier attempt left the page.
   */
  runPage: {
    command: { readonly pass: NamespacePass; readonly from?: PageStep };
    /** The pass at the next page boundary (`pageDone`) or at its end (`done`). */
    result: { readonly kind: 'pageRun'; readonly pass: NamespacePass; readonly next: 'pageDone' | 'done' };
    position: PageStep;
  };
  /**
   * Delete the lease this pass owns, last, also after a failed walk, if it is still this pass's claim; `lease`: as the
   * claim read it, for the manifest; `claim`: the claim as the pass wrote it.
   */
  deleteLease: {
    command: { readonly jobId: string; readonly lease?: LeaseFacts; readonly claim?: HeldClaim };
    result:
      | { readonly kind: 'leaseDeleted' }
      /** The lease was no longer this pass's claim (another pass took it over): left to its owner. */
      | { readonly kind: 'claimLost' };
  };
  /**
   * Retired segments and lost writes (spec 6a), once every job prefix is done and none was corrupt; `from`: a reclaim
   * an earlier attempt started goes on after its position, its tally counted on.
   */
  reclaimRetiredSegments: {
    command: { readonly from?: RetiredPosition };
    result:
      /** `manifestPartsDeleted`: parts of the namespace's manifests past the retention, reclaimed after the retired. */
      | {
          readonly kind: 'retiredReclaimed';
          readonly outcome: RetiredReclaimOutcome;
          readonly manifestPartsDeleted: number;
        }
      /** The reclaim failed for good (its retries spent). */
      | { readonly kind: 'retiredFailed'; readonly message: string };
    position: RetiredPosition;
  };
  /**
   * The root fence (spec 6b): one CAS of the namespace root, generation + 1 and nothing else, after a page's claims and
   * before any of its walks, so a publication CAS a claimed job sent earlier fails.
   */
  fenceRoot: {
    command: object;
    result:
      | { readonly kind: 'rootFenced' }
      /**
       * No fence was written (no root, a corrupt one, or the CAS failed for good): the page's claimed prefixes delete
       * nothing.
       */
      | { readonly kind: 'fenceFailed'; readonly message: string };
  };
}

export type CommandKind = keyof CommandTypes;
/** The command of kind `K`. */
export type CommandOf<K extends CommandKind> = { readonly kind: K } & CommandTypes[K]['command'];
/** What a command of kind `K` comes to. */
export type ResultOf<K extends CommandKind> = CommandTypes[K]['result'];
/** Where a command of kind `K` stands while it runs (`never` for a kind that does not resume). */
export type PositionOf<K extends CommandKind> = K extends CommandKind
  ? CommandTypes[K] extends { position: infer P }
    ? P
    : never
  : never;

/** Store work the plan asks for, always within the namespace of its pass. */
export type CollectorCommand = { [K in CommandKind]: CommandOf<K> }[CommandKind];
/** What a command came to. */
export type CollectorResult = { [K in CommandKind]: ResultOf<K> }[CommandKind];
/** Where a command that resumes stands. */
export type CommandPosition = { [K in CommandKind]: PositionOf<K> }[CommandKind];

/** Whom a command tells of its progress (Temporal heartbeats, or a test's own retries). */
export interface CommandProgress {
  /** Called with the command's position after each step, so a retried command can go on from there. */
  readonly onProgress?: (position: CommandPosition) => void;
  /** Called after each lease a survey reads: a sign of life. */
  readonly onRead?: () => void;
  /** Called after each part of the pass's manifest is written, with its key and number of lines (metrics). */
  readonly onManifestPart?: (key: string, lines: number) => void;
  /**
   * How a command of a page's prefix with nothing else to do waits for a manifest part: out of its lane, so another
   * prefix works meanwhile.
   */
  readonly awaitPart?: PartWait;
}

/** Runs one command; transient failures are its own to retry, a failure it throws is for good. */
export type CollectorExecutor = (command: CollectorCommand, progress?: CommandProgress) => Promise<CollectorResult>;

/** A command's activity that failed for good (its retries spent), or that the pass's cancellation stopped. */
export interface CommandFailure {
  /** The message of the failure that names the cause. */
  readonly message: string;
  /** False: the activity did not fail; the pass was cancelled around it. */
  readonly activityFailed: boolean;
  /** What the failure carried of where the activity stood ({@link CommandKindRow.stood}). */
  readonly details?: unknown;
  /** An activity that timed out: its last heartbeat (its position). */
  readonly lastHeartbeat?: unknown;
}

/**
 * What a failure means to the pass: a result the plan goes on from; the command again, run in the workflow one
 * activity per command it is made of (`byCommand`); or nothing, and the namespace's pass fails.
 */
export type FailureMeaning<K extends CommandKind> = ResultOf<K> | { readonly byCommand: CommandOf<K> } | undefined;

/** How a command's activity is timed: a few store calls, many (heartbeated), or a page's (it waits on cancellation). */
export type ActivityClass = 'short' | 'heartbeated' | 'page';

/** One row of the table. */
export interface CommandKindRow<K extends CommandKind> {
  /** How its activity is timed (src/workflows/activity-options). */
  readonly activity: ActivityClass;
  /**
   * What its activity heartbeats: nothing; a beat per lease read; its position after each step (a retried attempt
   * resumes there), `timer`: also every few seconds while a request is in flight.
   */
  readonly heartbeat: 'none' | 'reads' | 'position' | 'position and timer';
  /** `false`: the pass's cancellation does not stop it (a claimed lease is never stranded). */
  readonly cancellable?: false;
  /** Its activity's summary in the UI: what it touches. */
  readonly summary: (command: CommandOf<K>, ns: string) => string;
  /** What a failure of its activity carries of where it stood (none: the failure alone). */
  readonly stood?: (position: PositionOf<K>) => unknown;
  /** What its failure means (none: the namespace's pass fails; the next pass retries it). */
  readonly failed?: (command: CommandOf<K>, failure: CommandFailure) => FailureMeaning<K>;
  /** A command made of other commands: how it runs them, each through `page.execute`. */
  readonly byCommands?: (command: CommandOf<K>, page: PageRun<PositionOf<K>>) => Promise<ResultOf<K>>;
}

const prefixOf = (ns: string, job: string): string => jobPrefix(namespaceId(ns), jobId(job));

/** Every command kind: what its activity is, what it shows, and what its failure means. */
export const COMMAND_KINDS = {
  listJobPrefixes: { activity: 'short', heartbeat: 'none', summary: (_, ns) => `list job prefixes of ${ns}` },
  /** A root problem (missing, corrupt, unreadable) is an answer: it skips the namespace for the pass. */
  readRoot: { activity: 'short', heartbeat: 'none', summary: (_, ns) => `read the root of ${ns}` },
  surveyLeases: {
    activity: 'heartbeated',
    heartbeat: 'reads',
    summary: (command, ns) => `survey ${command.jobIds.length} leases of ${ns}`,
  },
  claimLease: {
    activity: 'short',
    heartbeat: 'none',
    summary: (command, ns) => `claim ${prefixOf(ns, command.jobId)}`,
  },
  reclaimPrefix: {
    activity: 'heartbeated',
    heartbeat: 'position',
    summary: (command, ns) => `reclaim ${prefixOf(ns, command.jobId)}`,
    stood: (position) => position.tally,
    // Whatever stopped the walk (its retries spent, the pass cancelled), the plan still releases the lease.
    failed: (_, failure) => ({
      kind: 'reclaimFailed',
      tally: failure.details as ReclaimTally | undefined,
      message: failure.message,
    }),
  },
  collectPrefixes: {
    activity: 'page',
    heartbeat: 'position',
    summary: (command, ns) => `collect ${command.prefixes.length} job prefixes of ${ns}`,
    stood: (position) => position,
    byCommands: async (command, page) => ({ kind: 'collected', report: await collectPrefixes(command, page) }),
    // Its retries spent (or cancelled): each prefix goes on from where it stood (a walk after its saved position), one
    // activity per command, so every claimed lease is still released.
    failed: (command, failure) => {
      if (!failure.activityFailed) return undefined;
      const from = (failure.details ?? failure.lastHeartbeat) as PageCollection | undefined;
      return { byCommand: { ...command, ...(from && { from }) } };
    },
  },
  runPage: {
    activity: 'page',
    heartbeat: 'position and timer',
    summary: ({ pass }, ns) =>
      `${pass.phase} a page of job prefixes of ${ns} ${pass.after === undefined ? 'from the start' : `after ${pass.after}`}`,
    stood: (position) => position,
    byCommands: (command, page) =>
      // `failed` below hands on only a failure the awaited command's row gives a meaning.
      runPage(command, page, (awaited, failure, progress) =>
        failedCommand(awaited, failure, { ...page, ...progress })!,
      ),
    // Its retries spent (or cancelled): the command in flight comes to what its own row says of that failure (a page
    // collection goes on command by command), and the rest of the page runs one activity per command.
    failed: (command, failure) => {
      if (!failure.activityFailed) return undefined;
      const from = (failure.details ?? failure.lastHeartbeat) as PageStep | undefined;
      if (!from) return { byCommand: command };
      const awaited = resumedAt(from.command, from.at);
      const row = rowOf(awaited);
      const stood = from.at === undefined ? undefined : row.stood?.(from.at);
      const failed = { message: failure.message, activityFailed: true, ...(stood != null && { details: stood }) };
      return row.failed?.(awaited, failed) === undefined
        ? undefined
        : { byCommand: { ...command, from: { ...from, failed } } };
    },
  },
  deleteLease: {
    activity: 'short',
    heartbeat: 'none',
    cancellable: false,
    summary: (command, ns) => `delete lease of ${prefixOf(ns, command.jobId)}`,
  },
  reclaimRetiredSegments: {
    activity: 'heartbeated',
    heartbeat: 'position and timer',
    summary: (_, ns) => `reclaim retired segments of ${ns}`,
    failed: (_, failure) => (failure.activityFailed ? { kind: 'retiredFailed', message: failure.message } : undefined),
  },
  fenceRoot: {
    activity: 'short',
    heartbeat: 'none',
    summary: (_, ns) => `fence the root of ${ns}`,
    failed: (_, failure) => (failure.activityFailed ? { kind: 'fenceFailed', message: failure.message } : undefined),
  },
} satisfies { readonly [K in CommandKind]: CommandKindRow<K> };

/**
 * The row of a command's kind, for code that handles every kind alike: a row is only ever given commands, positions
 * and results of its own kind.
 */
export const rowOf = (command: CollectorCommand): CommandKindRow<CommandKind> =>
  (COMMAND_KINDS as { readonly [K in CommandKind]: CommandKindRow<K> })[
    command.kind
  ] as unknown as CommandKindRow<CommandKind>;

/**
 * An executor that runs a command made of commands (a page, a page's collection) by its commands, each through itself,
 * and any other command through `leaf` (one command where a page's commands run: inside its activity, in a harness).
 */
export function byItsCommands(namespaceId: string, rules: PassRules, leaf: CollectorExecutor): CollectorExecutor {
  const execute: CollectorExecutor = (command, progress = {}) => {
    const { byCommands } = rowOf(command);
    if (!byCommands) return leaf(command, progress);
    const { onProgress, onRead } = progress;
    return byCommands(command, {
      namespaceId,
      rules,
      execute,
      ...(onProgress && { onProgress }),
      ...(onRead && { onRead }),
    });
  };
  return execute;
}

/** How a pass runs its commands: each through its activity, and what a rejection of that is. */
export interface CommandRunner {
  readonly namespaceId: string;
  readonly rules: PassRules;
  /** Runs the command's activity, retried as its policy says; rejects once it failed for good or was cancelled. */
  readonly activity: (command: CollectorCommand) => Promise<CollectorResult>;
  /** The command failure a rejection of `activity` is; undefined for anything else, which is rethrown. */
  readonly failureOf: (err: unknown) => CommandFailure | undefined;
}

/**
 * The pass's executor: each command through its activity; a failure for good means what the command's row says (a
 * result the plan goes on from, the command again one activity per command it is made of, or, rethrown, the end of
 * the namespace's pass). The workflow and the harnesses that stand in for it run commands through this one function.
 */
export function passExecutor({ namespaceId, rules, activity, failureOf }: CommandRunner): CollectorExecutor {
  const execute: CollectorExecutor = async (command) => {
    try {
      return await activity(command);
    } catch (err) {
      const after = failedCommand(command, failureOf(err), { namespaceId, rules, execute });
      if (after === undefined) throw err;
      return after;
    }
  };
  return execute;
}

/**
 * What a command whose activity failed for good comes to, as its row says: a result the plan goes on from, or the
 * command again run by its commands through `page.execute`; undefined where the namespace's pass fails.
 */
function failedCommand(
  command: CollectorCommand,
  failure: CommandFailure | undefined,
  page: PageRun,
): Promise<CollectorResult> | undefined {
  const row = rowOf(command);
  const meant = failure && row.failed?.(command, failure);
  if (meant === undefined) return undefined;
  if (!('byCommand' in meant)) return Promise.resolve(meant);
  // A row answers `byCommand` only if it says how the command runs by its commands (COMMAND_KINDS).
  return row.byCommands!(meant.byCommand, page);
}
