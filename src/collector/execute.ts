/**
 * Runs the commands of a namespace's pass plan against the store: the one executor behind the
 * collector's activities and behind tests and benchmarks that run a pass without Temporal.
 */
import { jobId, passId, rootKey, type NamespaceId } from '../keys';
import type { RootCodec } from '../root';
import type { ObjectStore } from '../store';
import { dryRunStore } from '../store/dry-run';
import { claimLease, deleteLease, surveyLeases } from './claim';
import { findRootProblem, rootProblemOf } from './root-problem';
import { listJobPrefixes } from './listing';
import { reclaimPrefix, START_OF_WALK } from './walk';
import {
  collectPrefixes,
  type CollectorCommand,
  type CollectorResult,
  type PassRules,
  type WalkProgress,
} from './plan';
import { reclaimRetiredSegments, START_OF_RETIRED } from './retired-reclaim';
import { fenceRoot } from '../protocol/root-io';
import { deleterOf, type Deleter } from './manifest';
import { reclaimExpiredManifests } from './manifest-reclaim';

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

/** What the commands of a pass run with besides the store and the rules. */
export interface ExecutionContext {
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

/**
 * Executes one command of a namespace's pass plan against the store, under the pass's rules.
 * Failures are thrown, for the caller to retry (an activity's retry policy, a test's loop). A dry run
 * is the same execution against a store that records its writes instead of making them: the one
 * place the flag decides anything but the report and metrics.
 */
export async function executeOnStore(
  store: ObjectStore,
  ns: NamespaceId,
  rules: PassRules,
  command: CollectorCommand,
  progress: WalkProgress,
  context: ExecutionContext,
): Promise<CollectorResult> {
  const deletes = context.deletes ?? passDeleter(store, ns, rules, progress.onManifestPart);
  return execute(rules.dryRun ? dryRunStore(store) : store, ns, rules, command, progress, {
    ...context,
    deletes,
    clockMs: context.clockMs ?? Date.now,
  });
}

async function execute(
  store: ObjectStore,
  ns: NamespaceId,
  rules: PassRules,
  command: CollectorCommand,
  progress: WalkProgress,
  context: Required<ExecutionContext>,
): Promise<CollectorResult> {
  const { codec, clockMs, deletes: pageDeletes } = context;
  // A command with nothing else to do while its part is written waits for it out of its lane (a page's prefixes).
  const deletes = progress.awaitPart ? pageDeletes.awaitingPartsWith(progress.awaitPart) : pageDeletes;
  const job = (id: string) => ({ namespaceId: ns, jobId: jobId(id) });
  switch (command.kind) {
    case 'listJobPrefixes':
      return { kind: 'listed', page: await listJobPrefixes(store, ns, command.after, rules.prefixesPerPage) };
    case 'readRoot':
      return {
        kind: 'rootRead',
        ...(await findRootProblem(store, ns, codec).then((judged) =>
          'problem' in judged ? judged : { problem: null, generation: judged.generation },
        )),
      };
    case 'surveyLeases':
      return {
        kind: 'surveyed',
        prefixes: await surveyLeases(store, ns, command.jobIds.map(jobId), rules, progress.onRead),
      };
    case 'claimLease':
      return { kind: 'claimed', owner: await claimLease(store, job(command.jobId), rules, command.seen, clockMs) };
    case 'reclaimPrefix': {
      const walk = {
        codec,
        from: command.from ?? START_OF_WALK,
        onProgress: progress.onProgress,
        deletes: pageDeletes,
        clockMs,
        ...(command.why && { why: command.why }),
        ...(progress.awaitPart && { awaitLastPart: progress.awaitPart }),
        ...(command.minRootGeneration !== undefined && { minRootGeneration: command.minRootGeneration }),
      };
      return { kind: 'reclaimed', tally: await reclaimPrefix(store, job(command.jobId), rules, walk) };
    }
    case 'collectPrefixes': {
      const inner = (next: CollectorCommand, walk: WalkProgress) => execute(store, ns, rules, next, walk, context);
      return {
        kind: 'collected',
        report: await collectPrefixes(ns, command.prefixes, rules, inner, progress.page, command.rootGeneration),
      };
    }
    case 'deleteLease':
      return (await deleteLease(store, job(command.jobId), rules.passId, deletes, command.lease, command.claim))
        ? { kind: 'leaseDeleted' }
        : { kind: 'claimLost' };
    case 'reclaimRetiredSegments': {
      const outcome = await reclaimRetiredSegments(
        store,
        ns,
        rules,
        command.from ?? START_OF_RETIRED,
        progress.onRetiredProgress ?? (() => {}),
        codec,
        deletes,
      );
      // The namespace's expired manifests go last, like superseded segments only where the root was readable.
      if (!('tally' in outcome) || rules.manifestRetentionMs === undefined)
        return { kind: 'retiredReclaimed', outcome };
      const manifestPartsDeleted = await reclaimExpiredManifests(
        store,
        ns,
        rules.nowMs,
        rules.manifestRetentionMs,
        deletes,
      );
      return { kind: 'retiredReclaimed', outcome: { ...outcome, manifestPartsDeleted } };
    }
    case 'fenceRoot':
      try {
        return (await fenceRoot(store, ns, codec))
          ? { kind: 'rootFenced' }
          : { kind: 'fenceFailed', message: `root ${rootKey(ns)} does not exist` };
      } catch (err) {
        // A corrupt root cannot be fenced, and no retry changes that; an unreachable store is retried.
        const problem = rootProblemOf(err, ns);
        if (problem?.problem !== 'corrupt') throw err;
        return { kind: 'fenceFailed', message: problem.reason };
      }
  }
}
