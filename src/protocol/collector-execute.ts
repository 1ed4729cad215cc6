/**
 * Runs the commands of a namespace's pass plan against the store: the one executor behind the
 * collector's activities and behind tests and benchmarks that run a pass without Temporal.
 */
import { jobId, type NamespaceId } from '../keys';
import { jsonRootCodec, type RootCodec } from '../root';
import type { ObjectStore } from '../store';
import {
  claimLease,
  deleteLease,
  findRootProblem,
  listJobPrefixes,
  reclaimPrefix,
  START_OF_WALK,
  surveyLeases,
  type ReclaimPosition,
} from './collector';
import type { CollectorCommand, CollectorResult, PassRules } from './collector-plan';
import { reclaimRetiredSegments } from './retired-reclaim';

/** Where a reclaim command resumes and whom it tells of its progress (Temporal heartbeats, or a test's own retries). */
export interface WalkProgress {
  readonly resume: ReclaimPosition;
  readonly onProgress: (position: ReclaimPosition) => void;
  /** Called after each lease a survey reads and each page or batch of superseded segments: a sign of life. */
  readonly onRead?: () => void;
}

/**
 * Executes one command of a namespace's pass plan against the store, under the pass's rules, reading
 * the root with `codec` (the worker's). Failures are thrown, for the caller to retry (an activity's
 * retry policy, a test's loop).
 */
export async function executeOnStore(
  store: ObjectStore,
  ns: NamespaceId,
  rules: PassRules,
  command: CollectorCommand,
  progress: WalkProgress = { resume: START_OF_WALK, onProgress: () => {} },
  codec: RootCodec = jsonRootCodec,
): Promise<CollectorResult> {
  switch (command.kind) {
    case 'listJobPrefixes':
      return { kind: 'listed', page: await listJobPrefixes(store, ns, command.after, rules.prefixesPerPage) };
    case 'readRoot':
      return { kind: 'rootRead', problem: (await findRootProblem(store, ns, codec)) ?? null };
    case 'surveyLeases':
      return { kind: 'surveyed', prefixes: await surveyLeases(store, ns, command.jobIds.map(jobId), rules, progress.onRead) };
    case 'claimLease':
      return { kind: 'claimed', owner: await claimLease(store, { namespaceId: ns, jobId: jobId(command.jobId) }, rules, command.seen) };
    case 'reclaimPrefix':
      return { kind: 'reclaimed', tally: await reclaimPrefix(store, { namespaceId: ns, jobId: jobId(command.jobId) }, rules, progress.resume, progress.onProgress, codec) };
    case 'deleteLease':
      await deleteLease(store, { namespaceId: ns, jobId: jobId(command.jobId) });
      return { kind: 'leaseDeleted' };
    case 'reclaimRetiredSegments':
      return { kind: 'retiredReclaimed', outcome: await reclaimRetiredSegments(store, ns, rules, progress.onRead ?? (() => {}), codec) };
  }
}
