/**
 * The collector's activities: one per command of the pass plan, each a thin translation between
 * Temporal (heartbeats, typed failures) and `executeOnStore`, under the rules in its input (never
 * this worker's settings). Each may be retried: a retried claim whose earlier CAS landed meets 412
 * and leaves the `reaping` lease to the next pass, a walk resumes from its heartbeat, a delete of a
 * missing key succeeds.
 */
import { Context } from '@temporalio/activity';
import { recordClaim, recordManifestPart, recordReclaim, recordRetiredReclaim } from './metrics';
import { ApplicationFailure, CancelledFailure } from '@temporalio/common';
import { heartbeatEveryMs, type CompactionSettings } from '../config';
import { namespaceId } from '../keys';
import {
  collectPrefixes,
  executeOnStore,
  listNamespaces,
  reclaimPositionFrom,
  type ChildrenPage,
  type CollectorCommand,
  type CollectorExecutor,
  type CollectorResult,
  type PageCollection,
  type PassRules,
  type ReclaimPosition,
  type ReclaimTally,
  type WalkProgress,
} from '../protocol';
import type { RetiredPosition } from '../protocol/retired-reclaim';
import type { RootCodec } from '../root';
import type { ObjectStore } from '../store';
import { toFailure } from './failures';

export type { CorruptLease } from '../protocol';

/** The longest a reclaim of superseded segments goes without a heartbeat, whatever a request takes. */
const RETIRED_BEAT_MS = 10_000;

export interface GcDeps {
  readonly store: ObjectStore;
  readonly settings: CompactionSettings;
  /** How the root is read and its retired list rewritten: the codec the compactions publish with. */
  readonly rootCodec: RootCodec;
}

/**
 * The worker's settings a pass takes once, when it starts, through a local activity: the rules
 * travel in the pass's input from then on, so every activity of the pass decides by the same ones.
 */
export interface GcWorkflowSettings {
  readonly operationDeadlineMs: number;
  readonly heartbeatTimeoutMs: number;
  readonly leaseExpiryMs: number;
  readonly stagingGraceMs: number;
  readonly readerGraceMs: number;
  readonly lostWriteGraceMs: number;
  readonly manifestRetentionMs: number;
}

/** A command of a namespace's pass plan, with the pass's rules. */
export interface CommandInput<C extends CollectorCommand> {
  readonly namespaceId: string;
  readonly rules: PassRules;
  readonly command: C;
}
type Input<K extends CollectorCommand['kind']> = CommandInput<Extract<CollectorCommand, { kind: K }>>;

/**
 * A failed walk still deleted what it deleted, and a failed page still claimed what it claimed:
 * where it stood rides on the failure (a cancellation's too), so the pass can report and release it.
 */
function withProgress(err: unknown, progress: ReclaimTally | PageCollection | undefined): unknown {
  if (err instanceof CancelledFailure) return new CancelledFailure(err.message, [progress]);
  const failure = toFailure(err);
  if (!(failure instanceof ApplicationFailure) || !(err instanceof Error)) return failure;
  return ApplicationFailure.create({ type: failure.type ?? err.name, message: failure.message, nonRetryable: failure.nonRetryable === true, cause: err, details: [progress] });
}

type ResultOf<K extends CollectorCommand['kind']> = Extract<
  CollectorResult,
  {
    kind: {
      listJobPrefixes: 'listed';
      readRoot: 'rootRead';
      surveyLeases: 'surveyed';
      claimLease: 'claimed';
      reclaimPrefix: 'reclaimed';
      deleteLease: 'leaseDeleted';
      collectPrefixes: 'collected';
      reclaimRetiredSegments: 'retiredReclaimed';
      fenceRoot: 'rootFenced' | 'fenceFailed';
    }[K];
  }
>;

export function createGcActivities({ store, settings, rootCodec }: GcDeps) {
  const { timing } = settings;
  /** Every command runs through the same executor as a pass run without Temporal. */
  const executeCommand = (input: CommandInput<CollectorCommand>, command: CollectorCommand, progress: WalkProgress) =>
    executeOnStore(store, namespaceId(input.namespaceId), input.rules, command, { onManifestPart: (key, lines) => recordManifestPart(key, lines, input.rules.dryRun), ...progress }, rootCodec);
  const run = async <K extends CollectorCommand['kind']>(input: Input<K>, progress: WalkProgress = { onProgress: () => {} }): Promise<ResultOf<K>> =>
    (await executeCommand(input, input.command, progress)) as ResultOf<K>;
  return {
    async gcSettings(): Promise<GcWorkflowSettings> {
      const { operationDeadlineMs, leaseExpiryMs, stagingGraceMs, readerGraceMs, lostWriteGraceMs } = timing;
      const { heartbeatTimeoutMs, manifestRetentionMs } = settings;
      return { operationDeadlineMs, heartbeatTimeoutMs, leaseExpiryMs, stagingGraceMs, readerGraceMs, lostWriteGraceMs, manifestRetentionMs };
    },

    async listNamespaces(input: { after?: string; limit: number }): Promise<ChildrenPage<string>> {
      return listNamespaces(store, input.after, input.limit);
    },

    listJobPrefixes: (input: Input<'listJobPrefixes'>) => run(input),

    /** Reads the namespace's root once; a problem (missing, corrupt, unreadable) skips the namespace for the pass. */
    readRoot: (input: Input<'readRoot'>) => run(input),

    /** Reads the leases of one page once and decides each owner at the pass's clock, claiming nothing; heartbeats after each read. */
    async surveyLeases(input: Input<'surveyLeases'>) {
      const ctx = Context.current();
      const result = await run(input, { onProgress: () => {}, onRead: () => ctx.heartbeat() });
      for (const { owner } of result.prefixes) recordClaim(owner, input.rules.dryRun);
      return result;
    },

    /** Claims the prefix with the survey's read: one CAS, no GET. */
    async claimLease(input: Input<'claimLease'>) {
      const result = await run(input);
      recordClaim(result.owner, input.rules.dryRun);
      return result;
    },

    /**
     * Walks the prefix from the command's `from`; its position travels in Temporal heartbeats, so a
     * retried attempt resumes where the last one stood.
     */
    async reclaimPrefix(input: Input<'reclaimPrefix'>) {
      const ctx = Context.current();
      let position = reclaimPositionFrom(ctx.info.heartbeatDetails, input.command.from);
      const onProgress = (p: ReclaimPosition) => {
        position = p;
        ctx.heartbeat(p);
      };
      try {
        const result = await run({ ...input, command: { ...input.command, from: position } }, { onProgress });
        recordReclaim(result.tally, input.rules.dryRun);
        return result;
      } catch (err) {
        throw withProgress(err, position.tally);
      }
    },

    /**
     * Collects a page's prefixes in one activity, each by the plan's own steps (claim, walk, lease
     * last) through the same executor. Every step and walk page is heartbeated, so a retried
     * attempt resumes each prefix at the command it awaited (a walk at its position); a cancelled
     * attempt starts no further command, and a failed one hands where it stood to the workflow.
     */
    async collectPrefixes(input: Input<'collectPrefixes'>) {
      const ctx = Context.current();
      const { rules } = input;
      let at = ctx.info.heartbeatDetails as PageCollection | undefined;
      const execute: CollectorExecutor = async (command, walk) => {
        if (ctx.cancellationSignal.aborted) throw ctx.cancellationSignal.reason;
        let position = command.kind === 'reclaimPrefix' ? command.from : undefined;
        const onProgress = (p: ReclaimPosition) => {
          position = p;
          walk.onProgress(p);
        };
        try {
          const result = await executeCommand(input, command, { ...walk, onProgress });
          if (result.kind === 'claimed') recordClaim(result.owner, rules.dryRun);
          if (result.kind === 'reclaimed') recordReclaim(result.tally, rules.dryRun);
          return result;
        } catch (err) {
          // A walk no retry can finish fails its prefix now, as its own activity would: the plan still releases the lease.
          const failure = toFailure(err);
          if (command.kind !== 'reclaimPrefix' || !(failure instanceof ApplicationFailure) || !failure.nonRetryable) throw err;
          return { kind: 'reclaimFailed', tally: position?.tally, message: failure.message };
        }
      };
      const page = {
        ...(at && { resume: at }),
        onProgress: (p: PageCollection) => {
          at = p;
          ctx.heartbeat(p);
        },
      };
      try {
        return { kind: 'collected' as const, report: await collectPrefixes(input.namespaceId, input.command.prefixes, rules, execute, page) };
      } catch (err) {
        throw withProgress(err, at);
      }
    },

    deleteLease: (input: Input<'deleteLease'>) => run(input),

    /** The root fence of a page (spec 6b): one CAS of the root, generation + 1; retried on a lost race. */
    fenceRoot: (input: Input<'fenceRoot'>) => run(input),

    /**
     * Superseded segments and lost writes of one namespace (spec 6a), at the pass's clock and reader
     * grace. Its position travels in heartbeats, after every listing page and batch and at least every
     * {@link RETIRED_BEAT_MS} while a request is in flight, so a retried attempt resumes where the last stood.
     */
    async reclaimRetiredSegments(input: Input<'reclaimRetiredSegments'>) {
      const ctx = Context.current();
      let position = (ctx.info.heartbeatDetails as RetiredPosition | undefined) ?? input.command.from;
      const beat = setInterval(() => ctx.heartbeat(position), Math.min(RETIRED_BEAT_MS, heartbeatEveryMs(settings)));
      const onRetiredProgress = (p: RetiredPosition) => {
        position = p;
        ctx.heartbeat(p);
      };
      try {
        const result = await run({ ...input, command: { ...input.command, ...(position && { from: position }) } }, { onProgress: () => {}, onRetiredProgress });
        if ('tally' in result.outcome) recordRetiredReclaim(result.outcome.tally, input.rules.dryRun);
        return result;
      } finally {
        clearInterval(beat);
      }
    },
  };
}

export type GcActivities = ReturnType<typeof createGcActivities>;
