/**
 * The collector's activities: one per command of the pass plan, each a thin translation between
 * Temporal (heartbeats, typed failures) and `executeOnStore`, under the rules in its input (never
 * this worker's settings). Each may be retried: a retried claim whose earlier CAS landed meets 412
 * and leaves the `reaping` lease to the next pass, a walk resumes from its heartbeat, a delete of a
 * missing key succeeds.
 */
import { Context } from '@temporalio/activity';
import { ApplicationFailure, CancelledFailure } from '@temporalio/common';
import {
  byItsCommands,
  COMMAND_KINDS,
  executeOnStore,
  listNamespaces,
  passDeleter,
  resumedAt,
  rowOf,
  type ChildrenPage,
  type CollectorCommand,
  type CollectorExecutor,
  type CollectorResult,
  type CommandKind,
  type CommandPosition,
  type CommandProgress,
  type Deleter,
  type PassRules,
  type ResultOf,
} from '../collector';
import { heartbeatEveryMs, type CompactionSettings, type Timing } from '../config';
import { namespaceId, STORE_CLOCK_KEY } from '../keys';
import type { RootCodec } from '../root';
import { storeIdentity, type ObjectStore } from '../store';
import { spacedBeats } from './beats';
import { toFailure } from './failures';
import { recordClaim, recordManifestPart, recordReclaim, recordRetiredReclaim } from './metrics';
import type { StoreBound } from './store-binding';

export type { CorruptLease } from '../collector';

/** The longest a command whose row says `timer` goes without a heartbeat, whatever a request takes. */
const BEAT_MS = 10_000;

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
    /** The worker's store: a pass started without naming one collects it. */
    readonly store: string;
  };

/** A command of a namespace's pass plan, with the pass's rules. */
export interface CommandInput<C extends CollectorCommand = CollectorCommand> extends StoreBound {
  readonly namespaceId: string;
  readonly rules: PassRules;
  readonly command: C;
}
type Input<K extends CommandKind> = CommandInput<Extract<CollectorCommand, { kind: K }>>;

/**
 * A failed command still did what it did (a walk deleted, a page claimed): where it stood rides on the failure (a
 * cancellation's too), as its row says ({@link CommandKindRow.stood}), so the pass can report and release it.
 */
function withProgress(err: unknown, stood: unknown): unknown {
  if (err instanceof CancelledFailure) return new CancelledFailure(err.message, [stood]);
  const failure = toFailure(err);
  if (!(failure instanceof ApplicationFailure) || !(err instanceof Error)) return failure;
  return ApplicationFailure.create({
    type: failure.type ?? err.name,
    message: failure.message,
    nonRetryable: failure.nonRetryable === true,
    cause: err,
    details: [stood],
  });
}

/** The metrics of a command's result: what every path that claims, walks or reclaims reports. */
function recordResult(result: CollectorResult, dryRun: boolean): void {
  if (result.kind === 'surveyed') for (const { owner } of result.prefixes) recordClaim(owner, dryRun);
  if (result.kind === 'claimed') recordClaim(result.owner, dryRun);
  if (result.kind === 'reclaimed') recordReclaim(result.tally, dryRun);
  if (result.kind === 'retiredReclaimed' && 'tally' in result.outcome)
    recordRetiredReclaim(result.outcome.tally, dryRun);
}

/** Runs one command of a pass on this worker's store, through `deletes` (a page's), and reports its metrics. */
type Run = (input: CommandInput, progress?: CommandProgress, deletes?: Deleter) => Promise<CollectorResult>;

/** The metrics of the manifest parts a pass's deleter writes. */
const manifestPartRecorder = (dryRun: boolean) => (key: string, lines: number) =>
  recordManifestPart(key, lines, dryRun);

/** Every command runs through the same executor as a pass run without Temporal, and reports its metrics. */
function commandRunner(store: ObjectStore, rootCodec: RootCodec): Run {
  return async (input, progress = {}, deletes) => {
    const { dryRun } = input.rules;
    const pass = { store, namespaceId: namespaceId(input.namespaceId), rules: input.rules, codec: rootCodec };
    const result = await executeOnStore({ ...pass, ...(deletes && { deletes }) }, input.command, {
      onManifestPart: manifestPartRecorder(dryRun),
      ...progress,
    });
    recordResult(result, dryRun);
    return result;
  };
}

/**
 * The executor of a page's commands inside its activity, all through one deleter (their manifest
 * lines share parts), a command made of commands (a page's collection) by its commands: a cancelled attempt starts no
 * further command, and a command no retry can finish means now what its row says its failure means, as its own
 * activity's would (a walk fails its prefix, so the plan still releases the lease).
 */
function pageExecutor(run: Run, input: CommandInput, signal: AbortSignal, deletes: Deleter): CollectorExecutor {
  return byItsCommands(input.namespaceId, input.rules, async (command, progress = {}) => {
    if (signal.aborted) throw signal.reason;
    const row = rowOf(command);
    let position = 'from' in command ? command.from : undefined;
    const onProgress = (p: CommandPosition) => {
      position = p;
      progress.onProgress?.(p);
    };
    try {
      return await run({ ...input, command }, { ...progress, onProgress }, deletes);
    } catch (err) {
      const failure = toFailure(err);
      if (!(failure instanceof ApplicationFailure) || !failure.nonRetryable) throw err;
      const stood = position && row.stood?.(position);
      const meant = row.failed?.(command, { message: failure.message, activityFailed: true, details: stood });
      if (meant === undefined || 'byCommand' in meant) throw err;
      return meant;
    }
  });
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

/** What every command's activity runs with. */
interface ActivityDeps {
  readonly run: Run;
  readonly store: ObjectStore;
  /** How often a command whose row says `timer` heartbeats while a request is in flight. */
  readonly beatEveryMs: number;
}

/**
 * The activity of a command kind, as its row says: it heartbeats what the row names, a retried attempt resumes where
 * its predecessor's last heartbeat stood (else at the command's `from`), and a failure carries where it stood. A
 * command made of others (a page) runs them through one deleter, their manifest lines sharing parts.
 */
function commandActivity({ run, store, beatEveryMs }: ActivityDeps) {
  return async (input: CommandInput): Promise<CollectorResult> => {
    const ctx = Context.current();
    const row = rowOf(input.command);
    if (row.heartbeat === 'none') return run(input);
    // Beats at most one a gap, each with the latest position (src/activities/beats): a page tells its position at every
    // step and lease read, and each beat handed to the SDK is encoded whole.
    if (row.heartbeat === 'reads') {
      const beats = spacedBeats(() => ctx.heartbeat());
      return run(input, { onRead: beats.beat }).finally(() => beats.end(false));
    }
    const from = (input.command as { readonly from?: CommandPosition }).from;
    let position = (ctx.info.heartbeatDetails as CommandPosition | undefined) ?? from;
    const beats = spacedBeats(() => ctx.heartbeat(position));
    const onProgress = (p: CommandPosition) => {
      position = p;
      beats.beat();
    };
    const timer = row.heartbeat === 'position and timer' ? setInterval(beats.beat, beatEveryMs) : undefined;
    const command = resumedAt(input.command, position);
    let failed = false;
    try {
      if (!row.byCommands) return await run({ ...input, command }, { onProgress });
      const { dryRun } = input.rules;
      const deletes = passDeleter(store, namespaceId(input.namespaceId), input.rules, manifestPartRecorder(dryRun));
      const execute = pageExecutor(run, input, ctx.cancellationSignal, deletes);
      // A survey among the commands beats at every lease it reads, with where the page stands.
      const page = { namespaceId: input.namespaceId, rules: input.rules, execute };
      return await row.byCommands(command, { ...page, onProgress, onRead: beats.beat });
    } catch (err) {
      failed = true;
      // The failure carries where the attempt stood, however long ago its last beat was sent.
      throw row.stood ? withProgress(err, position === undefined ? undefined : row.stood(position)) : err;
    } finally {
      clearInterval(timer);
      // A retried attempt resumes from the last heartbeat: a failing one sends the beat it deferred.
      beats.end(failed);
    }
  };
}

export function createGcActivities({ store, settings, rootCodec }: GcDeps) {
  const deps = {
    run: commandRunner(store, rootCodec),
    store,
    beatEveryMs: Math.min(BEAT_MS, heartbeatEveryMs(settings)),
  };
  // One activity per command kind, named by it: what each does is its row's (src/collector/commands).
  const commands = Object.fromEntries(
    (Object.keys(COMMAND_KINDS) as CommandKind[]).map((kind) => [kind, commandActivity(deps)]),
  ) as { readonly [K in CommandKind]: (input: Input<K>) => Promise<ResultOf<K>> };
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
    ...commands,
  };
}

export type GcActivities = ReturnType<typeof createGcActivities>;
