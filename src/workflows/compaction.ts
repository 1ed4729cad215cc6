/**
 * One compaction of one family group, orchestrated: read the group, create the lease, hold it
 * while the work runs, stop holding, publish. Deterministic: the job id comes from the workflow's
 * seeded randomness, every I/O is an activity.
 */
import {
  ActivityCancellationType,
  ActivityFailure,
  ApplicationFailure,
  CancellationScope,
  continueAsNew,
  defineQuery,
  patched,
  proxyActivities,
  proxyLocalActivities,
  setCurrentDetails,
  setHandler,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { CompactionActivities, CompactionOutput } from '../activities/compaction';
import type { HeldLease } from '../protocol';
import { familyGroup, InvalidKeyError, namespaceId, newJobId, rootKey, type MetadataCompactionId } from '../keys';
import { attemptsSpanning } from '../config/retry';
import { activityOptions } from './activity-options';
import { CompactionGroup, CompactionJobId, CompactionNamespace, CompactionOutcome } from './search-attributes';

export interface CompactionInput {
  readonly namespaceId: string;
  readonly group: string;
  /** Set by continue-as-new: the jobs of this workflow that were fenced before this one. */
  readonly fencedJobIds?: readonly string[];
}

export type CompactionOutcomeName = 'published' | 'fenced' | 'abandoned' | 'superseded';

export interface CompactionResult {
  readonly outcome: CompactionOutcomeName;
  readonly namespaceId: string;
  readonly group: string;
  readonly jobId: string;
  readonly fencedJobIds: readonly string[];
  readonly inputs: readonly string[];
  readonly outputs: readonly string[];
  /** The job's staged tombstone segments: the root names them after the outputs only when segments were registered during the job. */
  readonly tombstones: readonly string[];
  readonly recordsOut: number;
  readonly bytesOut: number;
  readonly detail?: string;
}

export type CompactionPhase = 'reading group' | 'creating lease' | 'compacting' | 'stopping lease keeper' | 'publishing' | CompactionOutcomeName;

export interface LeaseView {
  readonly phase: CompactionPhase;
  readonly namespaceId: string;
  readonly group: string;
  readonly jobId?: string;
  readonly leaseStatus: 'none' | 'held' | 'lost' | 'left in place';
  readonly fencedJobIds: readonly string[];
}

export const leaseStateQuery = defineQuery<LeaseView>('leaseState');

const { compactionSettings } = proxyLocalActivities<CompactionActivities>({ startToCloseTimeout: '10 seconds', summary: "read the worker's timings" });

/** Math.random in a workflow is seeded per execution: a deterministic random source (job ids, pass ids). */
export const workflowRandom = (bytes: Uint8Array) => {
  for (let i = 0; i < bytes.length; i++) bytes[i] = Math.floor(Math.random() * 256);
};

const isLeaseLost = (err: unknown): boolean =>
  err instanceof ActivityFailure && err.cause instanceof ApplicationFailure && err.cause.type === 'LeaseLost';

/**
 * An activity's failure that ends the job (a missing or corrupt input, retries spent) fails the
 * workflow with the cause's own type and message on top, where a caller, the CLI and the UI read
 * first, rather than under a generic "activity task failed".
 */
const jobFailure = (err: unknown): unknown =>
  err instanceof ActivityFailure && err.cause instanceof ApplicationFailure
    ? ApplicationFailure.create({ type: err.cause.type ?? undefined, message: err.cause.message, nonRetryable: true, cause: err })
    : err;

/** The patch of the job's layout in fewer billable actions (issue 19): the keeper inside the work's activity, no upsert the start already made. */
const FEWER_ACTIONS = 'fewer-actions-per-job';

type Proxied = ReturnType<typeof proxyActivities<CompactionActivities>>;

/**
 * The keeper and the work as two activities, as runs recorded before {@link FEWER_ACTIONS} scheduled
 * them: a keeper that completes was stopped by the work's end on its worker; both are stopped before
 * the function returns, so no refresh runs beside the publication's own.
 */
async function holdBesideWork(
  show: (phase: CompactionPhase) => void,
  holdLease: Proxied['holdLease'],
  compactSegments: Proxied['compactSegments'],
  input: { namespaceId: string; jobId: string; group: string; inputs: string[]; held: HeldLease },
): Promise<{ compaction?: CompactionOutput; lost: boolean }> {
  const { held, ...work } = input;
  const holdScope = new CancellationScope();
  const workScope = new CancellationScope();
  const holding = holdScope.run(() => holdLease.executeWithOptions({ summary: `hold lease ${input.jobId}` }, [{ namespaceId: input.namespaceId, jobId: input.jobId, held }]));
  const working = workScope.run(() =>
    compactSegments.executeWithOptions({ summary: `compact ${input.inputs.length} segments of ${input.group}` }, [work]),
  );
  let compaction: CompactionOutput | undefined;
  let lost = false;
  try {
    compaction = await Promise.race([working, holding.then(() => working)]);
  } catch (err) {
    if (!isLeaseLost(err)) throw jobFailure(err);
    lost = true;
  } finally {
    show('stopping lease keeper');
    workScope.cancel();
    holdScope.cancel();
    const [, hold] = await Promise.allSettled([working, holding]);
    if (hold.status === 'rejected' && isLeaseLost(hold.reason)) lost = true;
  }
  return { compaction, lost };
}

export async function compactionWorkflow(input: CompactionInput): Promise<CompactionResult> {
  let ns, group;
  try {
    ns = namespaceId(input.namespaceId);
    group = familyGroup(input.group);
  } catch (err) {
    if (err instanceof InvalidKeyError) throw ApplicationFailure.nonRetryable(err.message, 'InvalidInput');
    throw err;
  }
  const fencedJobIds = [...(input.fencedJobIds ?? [])];
  const view: { -readonly [K in keyof LeaseView]: LeaseView[K] } = { phase: 'reading group', namespaceId: ns, group, leaseStatus: 'none', fencedJobIds };
  setHandler(leaseStateQuery, () => ({ ...view }));
  const show = (phase: CompactionPhase, extra = '') => {
    view.phase = phase;
    setCurrentDetails(
      `**${phase}** · namespace \`${ns}\` · group \`${group}\`${view.jobId ? ` · job \`${view.jobId}\`` : ''} · lease ${view.leaseStatus}` +
        (fencedJobIds.length ? ` · fenced before: ${fencedJobIds.length}` : '') +
        (extra ? `\n\n${extra}` : ''),
    );
  };
  // Runs recorded before this patch hold the lease in a separate activity beside the work and
  // upsert the namespace and group; new runs hold it inside the work's activity and upsert them only
  // when their start lacks them (startCompaction sets them): each upsert is a billable action.
  const fewerActions = patched(FEWER_ACTIONS);
  const started = workflowInfo().typedSearchAttributes;
  if (!fewerActions || started.get(CompactionNamespace) !== ns || started.get(CompactionGroup) !== group) {
    upsertSearchAttributes([
      { key: CompactionNamespace, value: ns },
      { key: CompactionGroup, value: group },
    ]);
  }
  show('reading group');

  const settings = await compactionSettings();
  const options = activityOptions(settings);
  // The short calls retry for at least a lease expiry: no store outage the lease would outlive ends
  // the job, and past it a collector may have claimed the lease anyway. Runs whose settings were
  // recorded before the expiry was among them keep the unlimited retries they started with.
  const maximumAttempts = settings.leaseExpiryMs === undefined ? undefined : attemptsSpanning(settings.leaseExpiryMs);
  const { readGroup, createLease, publish } = proxyActivities<CompactionActivities>(options.short(maximumAttempts));
  // Cancelling these waits until the activity has really stopped (the SDK default, TRY_CANCEL, would not).
  // No attempt limit: their attempts include every worker restart of a job that may run for hours,
  // so a count would end healthy jobs. The work under its lease ends on success, on a non-retryable
  // type (missing, oversized or corrupt input, a lost lease) or when cancelled.
  const { compactUnderLease, holdLease, compactSegments } = proxyActivities<CompactionActivities>({
    ...options.heartbeated('7 days'),
    cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
  });

  const { inputs, etags } = await readGroup.executeWithOptions({ summary: `read group ${group} of ${ns}` }, [{ namespaceId: ns, group }]).catch((err: unknown) => {
    throw jobFailure(err);
  });
  if (inputs.length === 0) throw ApplicationFailure.nonRetryable(`group ${group} of ${ns} has no segments in ${rootKey(ns)}: nothing to compact`, 'InvalidInput');

  const job: MetadataCompactionId = newJobId(workflowRandom);
  view.jobId = job;
  upsertSearchAttributes([{ key: CompactionJobId, value: job }]);
  show('creating lease');
  let held: HeldLease | undefined;
  try {
    held = await createLease.executeWithOptions({ summary: `create lease ${job}` }, [
      { namespaceId: ns, jobId: job, ownerId: settings.ownerId, startedAtMs: Date.now() },
    ]);
  } catch (err) {
    // A retried create can find its own lease already claimed: the job is fenced before its first output.
    if (!isLeaseLost(err)) throw jobFailure(err);
  }
  let compaction: CompactionOutput | undefined;
  let lost = held === undefined;
  if (held !== undefined) {
    const lease = held;
    view.leaseStatus = 'held';
    show('compacting', `${inputs.length} input segments`);

    // One activity holds the lease beside the work: one heartbeat stream, one slot per job.
    if (fewerActions) {
      try {
        compaction = await compactUnderLease.executeWithOptions({ summary: `compact ${inputs.length} segments of ${group} under lease ${job}` }, [
          { namespaceId: ns, jobId: job, group, inputs, etags, held: lease },
        ]);
      } catch (err) {
        if (!isLeaseLost(err)) throw jobFailure(err);
        lost = true;
      }
    } else {
      ({ compaction, lost } = await holdBesideWork(show, holdLease, compactSegments, { namespaceId: ns, jobId: job, group, inputs, held: lease }));
    }
  }

  const finish = (outcome: CompactionOutcomeName, detail?: string): CompactionResult => {
    upsertSearchAttributes([{ key: CompactionOutcome, value: outcome }]);
    view.leaseStatus = outcome === 'fenced' ? 'lost' : 'left in place';
    const result: CompactionResult = {
      outcome, namespaceId: ns, group, jobId: job, fencedJobIds, inputs,
      outputs: compaction?.outputs ?? [], tombstones: compaction?.tombstones ?? [], recordsOut: compaction?.progress.recordsOut ?? 0, bytesOut: compaction?.progress.bytesOut ?? 0, detail,
    };
    show(outcome, `${result.outputs.length} output segments, ${result.recordsOut} records, ${result.bytesOut} bytes${detail ? `\n\n${detail}` : ''}`);
    return result;
  };

  let result: CompactionResult;
  if (lost || !compaction) {
    result = finish('fenced', held === undefined ? 'the lease was claimed before its create was confirmed' : 'the lease was lost while compacting');
  } else {
    show('publishing', `${compaction.outputs.length} output segments, ${compaction.progress.recordsOut} records`);
    const published = await publish.executeWithOptions(
      { summary: `publish ${compaction.outputs.length} segments of ${job}`, startToCloseTimeout: settings.publicationTimeoutMs },
      [{ namespaceId: ns, jobId: job, group, inputs, outputs: compaction.outputs, tombstones: compaction.tombstones ?? [] }],
    ).catch((err: unknown) => {
      throw jobFailure(err);
    });
    const detail =
      published.outcome === 'fenced' ? published.reason
      : published.outcome === 'abandoned' ? `inputs no longer current: ${published.missingInputs.join(', ')}`
      : published.outcome === 'superseded' ? `lost ${published.lostRaces} root races`
      : `root generation ${published.rootGeneration}`;
    result = finish(published.outcome, detail);
  }

  if (result.outcome === 'fenced' && fencedJobIds.length < settings.maxFencedRuns) {
    // A fenced job never runs again under its id: a new run draws a new job id.
    await continueAsNew<typeof compactionWorkflow>({ namespaceId: ns, group, fencedJobIds: [...fencedJobIds, job] });
  }
  return result;
}
