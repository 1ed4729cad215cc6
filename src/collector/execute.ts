/**
 * Runs the commands of a namespace's pass plan against the store: the table's store column, one function per command
 * kind (src/collector/commands), behind the collector's activities and behind tests and benchmarks that run a pass
 * without Temporal.
 */
import { jobId, passId, rootKey, type NamespaceId } from '../keys';
import type { RootCodec } from '../root';
import type { ObjectStore } from '../store';
import { dryRunStore } from '../store/dry-run';
import { fenceRoot } from '../protocol/root-io';
import { claimLease, deleteLease, surveyLeases } from './claim';
import {
  COMMAND_KINDS,
  type CollectorCommand,
  type CollectorExecutor,
  type CollectorResult,
  type CommandKind,
  type CommandOf,
  type CommandProgress,
  type ResultOf,
} from './commands';
import { listJobPrefixes } from './listing';
import type { PageRun } from './plan';
import { deleterOf, type Deleter } from './manifest';
import { reclaimExpiredManifests } from './manifest-reclaim';
import { reclaimRetiredSegments } from './retired-reclaim';
import { findRootProblem, rootProblemOf } from './root-problem';
import type { PassRules } from './rules';
import { reclaimPrefix, START_OF_WALK } from './walk';

/**
 * The deleter of a namespace's pass: through the dry-run store in a dry run, each batch recorded
 * first in the pass's manifest (none for a pass that writes none); `onPart` is told of every part.
 */
export function passDeleter(
  store: ObjectStore,
  ns: NamespaceId,
  rules: PassRules,
  onPart?: (key: string, lines: number) => void,
): Deleter {
  const manifest =
    rules.manifests === false
      ? undefined
      : {
          store,
          namespaceId: ns,
          passId: passId(rules.passId),
          nowMs: rules.nowMs,
          dryRun: rules.dryRun,
          ...(onPart && { onPart }),
        };
  return deleterOf(rules.dryRun ? dryRunStore(store) : store, manifest);
}

/** Where the commands of a namespace's pass run: its store, namespace and rules, and how they read and delete. */
export interface PassOnStore {
  readonly store: ObjectStore;
  readonly namespaceId: NamespaceId;
  readonly rules: PassRules;
  /** How the root is read and written (the worker's codec). */
  readonly codec: RootCodec;
  /** The {@link passDeleter} the commands of one page share (so their lines share parts); a fresh one by default. */
  readonly deletes?: Deleter;
  /**
   * The wall clock claims are stamped and refreshed at (the seed: a claim's heartbeat is the stamp of that lease
   * write).
   */
  readonly clockMs?: () => number;
}

/** What one command runs with: the pass's store (the dry-run store in a dry run), its deleter, and its progress. */
interface Execution extends Required<PassOnStore> {
  readonly progress: CommandProgress;
  /** The deleter, waiting for a part out of its lane when the command has nothing else to do meanwhile. */
  readonly awaiting: Deleter;
  /** Runs another command of the pass (the commands a page is made of). */
  readonly execute: CollectorExecutor;
}

/** How a command made of commands runs them: each through the pass's executor, telling its progress. */
const pageOf = ({ namespaceId, rules, execute, progress }: Execution): PageRun => ({
  namespaceId,
  rules,
  execute,
  ...(progress.onProgress && { onProgress: progress.onProgress }),
  ...(progress.onRead && { onRead: progress.onRead }),
});

type OnStore<K extends CommandKind> = (command: CommandOf<K>, at: Execution) => Promise<ResultOf<K>>;

/** How each kind of command runs against the store: the table's store column. */
const ON_STORE: { readonly [K in CommandKind]: OnStore<K> } = {
  listJobPrefixes: async (command, { store, namespaceId, rules }) => ({
    kind: 'listed',
    page: await listJobPrefixes(store, namespaceId, command.after, rules.prefixesPerPage),
  }),
  readRoot: async (_, { store, namespaceId, codec }) => {
    const judged = await findRootProblem(store, namespaceId, codec);
    return { kind: 'rootRead', ...('problem' in judged ? judged : { problem: null, generation: judged.generation }) };
  },
  surveyLeases: async (command, { store, namespaceId, rules, progress }) => ({
    kind: 'surveyed',
    prefixes: await surveyLeases(store, { namespaceId, jobIds: command.jobIds.map(jobId) }, rules, progress.onRead),
  }),
  claimLease: async (command, { store, namespaceId, rules, clockMs }) => ({
    kind: 'claimed',
    owner: await claimLease(store, { namespaceId, jobId: jobId(command.jobId) }, rules, {
      seen: command.seen,
      clockMs,
    }),
  }),
  reclaimPrefix: async (command, { store, namespaceId, rules, codec, deletes, clockMs, progress }) => {
    const walk = {
      codec,
      from: command.from ?? START_OF_WALK,
      deletes,
      clockMs,
      ...(progress.onProgress && { onProgress: progress.onProgress }),
      ...(command.why && { why: command.why }),
      ...(progress.awaitPart && { awaitLastPart: progress.awaitPart }),
      ...(command.minRootGeneration !== undefined && { minRootGeneration: command.minRootGeneration }),
    };
    const tally = await reclaimPrefix(store, { namespaceId, jobId: jobId(command.jobId) }, rules, walk);
    return { kind: 'reclaimed', tally };
  },
  collectPrefixes: (command, at) => COMMAND_KINDS.collectPrefixes.byCommands(command, pageOf(at)),
  runPage: (command, at) => COMMAND_KINDS.runPage.byCommands(command, pageOf(at)),
  deleteLease: async (command, { store, namespaceId, rules, awaiting }) => {
    const job = { namespaceId, jobId: jobId(command.jobId) };
    const { lease, claim } = command;
    const deleted = await deleteLease(store, job, rules.passId, { deletes: awaiting, lease, claim });
    return deleted ? { kind: 'leaseDeleted' } : { kind: 'claimLost' };
  },
  reclaimRetiredSegments: async (command, { store, namespaceId, rules, codec, awaiting, progress }) => {
    const run = {
      codec,
      deletes: awaiting,
      ...(command.from && { from: command.from }),
      ...(progress.onProgress && { onProgress: progress.onProgress }),
    };
    const outcome = await reclaimRetiredSegments(store, namespaceId, rules, run);
    // The namespace's expired manifests go last, like retired segments only where the root was readable.
    if (!('tally' in outcome) || rules.manifestRetentionMs === undefined) {
      return { kind: 'retiredReclaimed', outcome, manifestPartsDeleted: 0 };
    }
    const retention = { nowMs: rules.nowMs, retentionMs: rules.manifestRetentionMs };
    const manifestPartsDeleted = await reclaimExpiredManifests(store, namespaceId, retention, awaiting);
    return { kind: 'retiredReclaimed', outcome, manifestPartsDeleted };
  },
  fenceRoot: async (_, { store, namespaceId, codec }) => {
    try {
      return (await fenceRoot(store, namespaceId, codec))
        ? { kind: 'rootFenced' }
        : { kind: 'fenceFailed', message: `root ${rootKey(namespaceId)} does not exist` };
    } catch (err) {
      // A corrupt root cannot be fenced, and no retry changes that; an unreachable store is retried.
      const problem = rootProblemOf(err, namespaceId);
      if (problem?.problem !== 'corrupt') throw err;
      return { kind: 'fenceFailed', message: problem.reason };
    }
  },
};

/** Runs `command` by its kind's row of the store column. */
const onStore = <K extends CommandKind>(command: CommandOf<K>, at: Execution): Promise<ResultOf<K>> =>
  (ON_STORE[command.kind] as OnStore<K>)(command, at);

/**
 * Executes one command of a namespace's pass plan against the store, under the pass's rules.
 * Failures are thrown, for the caller to retry (an activity's retry policy, a test's loop). A dry run
 * is the same execution against a store that records its writes instead of making them: the one
 * place the flag decides anything but the report and metrics.
 */
export function executeOnStore(
  pass: PassOnStore,
  command: CollectorCommand,
  progress: CommandProgress = {},
): Promise<CollectorResult> {
  const full: Required<PassOnStore> = {
    ...pass,
    store: pass.rules.dryRun ? dryRunStore(pass.store) : pass.store,
    deletes: pass.deletes ?? passDeleter(pass.store, pass.namespaceId, pass.rules, progress.onManifestPart),
    clockMs: pass.clockMs ?? Date.now,
  };
  // A command with nothing else to do while its part is written waits for it out of its lane (a page's prefixes);
  // the commands of a page share its deleter.
  const execute: CollectorExecutor = (next, inner = {}) =>
    executeOnStore({ ...pass, deletes: full.deletes }, next, inner);
  const awaiting = progress.awaitPart ? full.deletes.awaitingPartsWith(progress.awaitPart) : full.deletes;
  return onStore(command, { ...full, progress, awaiting, execute });
}
