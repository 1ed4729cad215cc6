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
import { heartbeatEveryMs, type CompactionSettings, type Timing } from '../config';
import { namespaceId, STORE_CLOCK_KEY } from '../keys';
import {
  collectPrefixes,
  executeOnStore,
  listNamespaces,
  passDeleter,
  reclaimPositionFrom,
  type ChildrenPage,
  type CollectorCommand,
  type CollectorExecutor,
  type CollectorResult,
  type Deleter,
  type PageCollection,
  type PassRules,
  type ReclaimPosition,
  type ReclaimTally,
  type WalkProgress,
} from '../collector';
import type { RootCodec } from '../root';
import { storeIdentity, type ObjectStore } from '../store';
import { toFailure } from './failures';
import type { StoreBound } from './store-binding';

export type { CorruptLease } from '../collector';

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
export type GcWorkflowSettings = Pick<
  Timing,
  | 'operationDeadlineMs'
  | 'leaseRefreshIntervalMs'
  | 'leaseExpiryMs'
  | 'stagingGraceMs'
  | 'readerGraceMs'
  | 'lostWriteGraceMs'
  | 'clockSafetyMarginMs'
> &
  Pick<CompactionSettings, 'heartbeatTimeoutMs' | 'manifestRetentionMs'> & {
    /** The worker's store: a pass started without naming one collects it. Absent in runs recorded before. */
    readonly store?: string;
  };

/** A command of a namespace's pass plan, with the pass's rules. */
export interface CommandInput<C extends CollectorCommand> extends StoreBound {
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
  return ApplicationFailure.create({
    type: failure.type ?? err.name,
    message: failure.message,
    nonRetryable: failure.nonRetryable === true,
    cause: err,
    details: [progress],
  });
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
      deleteLease: 'leaseDeleted' | 'claimLost';
      collectPrefixes: 'collected';
      reclaimRetiredSegments: 'retiredReclaimed';
      fenceRoot: 'rootFenced' | 'fenceFailed';
    }[K];
  }
>;

/** The metrics of a command's result: what every path that claims, walks or reclaims reports. */
function recordResult(result: CollectorResult, dryRun: boolean): void {
  if (result.kind === 'surveyed') for (const { owner } of result.prefixes) recordClaim(owner, dryRun);
  if (result.kind === 'claimed') recordClaim(result.owner, dryRun);
  if (result.kind === 'reclaimed') recordReclaim(result.tally, dryRun);
  if (result.kind === 'retiredReclaimed' && 'tally' in result.outcome)
    recordRetiredReclaim(result.outcome.tally, dryRun);
}

type Run = <K extends CollectorCommand['kind']>(
  input: Input<K>,
  progress?: WalkProgress,
  deletes?: Deleter,
) => Promise<ResultOf<K>>;

/**
 * The executor of a page's commands inside its activity, all through one deleter (their manifest
 * lines share parts): a cancelled attempt starts no further command, and a walk no retry can finish
 * fails its prefix now, as its own activity would, so the plan still releases the lease.
 */
function pageExecutor(
  run: Run,
  input: Input<'collectPrefixes'>,
  signal: AbortSignal,
  deletes: Deleter,
): CollectorExecutor {
  return async (command, walk) => {
    if (signal.aborted) throw signal.reason;
    let position = command.kind === 'reclaimPrefix' ? command.from : undefined;
    const onProgress = (p: ReclaimPosition) => {
      position = p;
      walk.onProgress(p);
    };
    try {
      return await run({ ...input, command } as Input<typeof command.kind>, { ...walk, onProgress }, deletes);
    } catch (err) {
      const failure = toFailure(err);
      if (command.kind !== 'reclaimPrefix' || !(failure instanceof ApplicationFailure) || !failure.nonRetryable)
        throw err;
      return { kind: 'reclaimFailed', tally: position?.tally, message: failure.message };
    }
  };
}

/**
 * Where an activity stands, told to Temporal in heartbeats: it starts where a retried attempt's
 * predecessor last stood (else at `from`), and `failed` hands it to the workflow on a failure.
 */
function heartbeated<P>(from: P) {
  const ctx = Context.current();
  const at = { position: (ctx.info.heartbeatDetails as P | undefined) ?? from };
  return {
    at,
    tell: (p: P) => {
      at.position = p;
      ctx.heartbeat(p);
    },
  };
}

/** The metrics of the manifest parts a pass's deleter writes. */
const manifestPartRecorder = (dryRun: boolean) => (key: string, lines: number) =>
  recordManifestPart(key, lines, dryRun);

/** Every command runs through the same executor as a pass run without Temporal, and reports its metrics. */
function commandRunner(store: ObjectStore, rootCodec: RootCodec): Run {
  return async (input, progress = { onProgress: () => {} }, deletes) => {
    const { dryRun } = input.rules;
    const result = await executeOnStore(
      store,
      namespaceId(input.namespaceId),
      input.rules,
      input.command,
      { onManifestPart: manifestPartRecorder(dryRun), ...progress },
      { codec: rootCodec, ...(deletes && { deletes }) },
    );
    recordResult(result, dryRun);
    return result as ResultOf<typeof input.command.kind>;
  };
}

/** The worker's settings a pass takes once, named one by one: nothing else of the worker's leaks into its rules. */
async function passSettings(store: ObjectStore, settings: CompactionSettings): Promise<GcWorkflowSettings> {
  const { timing } = settings;
  return {
    operationDeadlineMs: timing.operationDeadlineMs,
    heartbeatTimeoutMs: settings.heartbeatTimeoutMs,
    leaseRefreshIntervalMs: timing.leaseRefreshIntervalMs,
    leaseExpiryMs: timing.leaseExpiryMs,
    stagingGraceMs: timing.stagingGraceMs,
    readerGraceMs: timing.readerGraceMs,
    lostWriteGraceMs: timing.lostWriteGraceMs,
    clockSafetyMarginMs: timing.clockSafetyMarginMs,
    manifestRetentionMs: settings.manifestRetentionMs,
    store: await storeIdentity(store),
  };
}

/** A walk of one prefix resumed at its predecessor attempt's heartbeat; a failure carries the tally it reached. */
async function reclaimPrefixResuming(run: Run, input: Input<'reclaimPrefix'>) {
  const walk = heartbeated(reclaimPositionFrom(undefined, input.command.from));
  try {
    return await run({ ...input, command: { ...input.command, from: walk.at.position } }, { onProgress: walk.tell });
  } catch (err) {
    throw withProgress(err, walk.at.position.tally);
  }
}

/**
 * A page's prefixes collected through one deleter, resumed at the page's heartbeat; a failure carries the page's report
 * so far.
 */
async function collectPageResuming(run: Run, store: ObjectStore, input: Input<'collectPrefixes'>) {
  const page = heartbeated<PageCollection | undefined>(undefined);
  const resume = page.at.position;
  const deletes = passDeleter(
    store,
    namespaceId(input.namespaceId),
    input.rules,
    manifestPartRecorder(input.rules.dryRun),
  );
  const execute = pageExecutor(run, input, Context.current().cancellationSignal, deletes);
  try {
    return {
      kind: 'collected' as const,
      report: await collectPrefixes(
        input.namespaceId,
        input.command.prefixes,
        input.rules,
        execute,
        { ...(resume && { resume }), onProgress: page.tell },
        input.command.rootGeneration,
      ),
    };
  } catch (err) {
    throw withProgress(err, page.at.position);
  }
}

/** A reclaim of superseded segments resumed at its heartbeat, which a timer repeats while a request is in flight. */
async function reclaimRetiredResuming(run: Run, settings: CompactionSettings, input: Input<'reclaimRetiredSegments'>) {
  const ctx = Context.current();
  const reclaim = heartbeated(input.command.from);
  const beat = setInterval(
    () => ctx.heartbeat(reclaim.at.position),
    Math.min(RETIRED_BEAT_MS, heartbeatEveryMs(settings)),
  );
  try {
    const from = reclaim.at.position;
    return await run(
      { ...input, command: { ...input.command, ...(from && { from }) } },
      { onProgress: () => {}, onRetiredProgress: reclaim.tell },
    );
  } finally {
    clearInterval(beat);
  }
}

export function createGcActivities({ store, settings, rootCodec }: GcDeps) {
  const run = commandRunner(store, rootCodec);
  return {
    gcSettings: (): Promise<GcWorkflowSettings> => passSettings(store, settings),
    /**
     * The store's clock: the `LastModified` of an object written now outside `namespaces/` (left in
     * place, so even a dry run deletes nothing), or null when the store gives none. The pass compares it
     * with its own (spec 6c.6). `_input` names the run's store, which the store binding checks.
     */
    async storeClock(_input: StoreBound): Promise<number | null> {
      await store.put(STORE_CLOCK_KEY, new TextEncoder().encode('clock'));
      return (await store.get(STORE_CLOCK_KEY)).lastModified?.getTime() ?? null;
    },
    listNamespaces: async (input: StoreBound & { after?: string; limit: number }): Promise<ChildrenPage<string>> =>
      listNamespaces(store, input.after, input.limit),
    listJobPrefixes: (input: Input<'listJobPrefixes'>) => run(input),
    /** Reads the namespace's root once; a problem (missing, corrupt, unreadable) skips the namespace for the pass. */
    readRoot: (input: Input<'readRoot'>) => run(input),
    /**
     * Reads the leases of one page once and decides each owner at the pass's clock, claiming nothing; heartbeats after
     * each read.
     */
    surveyLeases: (input: Input<'surveyLeases'>) =>
      run(input, { onProgress: () => {}, onRead: () => Context.current().heartbeat() }),
    /** Claims the prefix with the survey's read: one CAS (a create where there was no lease), no GET. */
    claimLease: (input: Input<'claimLease'>) => run(input),
    /**
     * Walks the prefix from the command's `from`; its position travels in heartbeats, so a retried attempt resumes
     * where the last one stood.
     */
    reclaimPrefix: (input: Input<'reclaimPrefix'>) => reclaimPrefixResuming(run, input),
    /**
     * Collects a page's prefixes in one activity, each by the plan's own steps (claim, fence, walk,
     * lease last) through the same executor. Every step and walk page is heartbeated, so a retried
     * attempt resumes each prefix at the command it awaited (a walk at its position); a failed one
     * hands where it stood to the workflow.
     */
    collectPrefixes: (input: Input<'collectPrefixes'>) => collectPageResuming(run, store, input),
    deleteLease: (input: Input<'deleteLease'>) => run(input),
    /** The root fence of a page (spec 6b): one CAS of the root, generation + 1; retried on a lost race. */
    fenceRoot: (input: Input<'fenceRoot'>) => run(input),
    /**
     * Superseded segments and lost writes of one namespace (spec 6a), at the pass's clock and reader
     * grace. Its position travels in heartbeats, after every listing page and batch and at least every
     * {@link RETIRED_BEAT_MS} while a request is in flight, so a retried attempt resumes where the last stood.
     */
    reclaimRetiredSegments: (input: Input<'reclaimRetiredSegments'>) => reclaimRetiredResuming(run, settings, input),
  };
}

export type GcActivities = ReturnType<typeof createGcActivities>;
