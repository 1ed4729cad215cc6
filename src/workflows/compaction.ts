/**
 * One compaction of one family group, orchestrated: read the group, create the lease, hold it
 * while the work runs, stop holding, publish. Deterministic: the job id comes from the workflow's
 * seeded randomness, every I/O is an activity.
 */
import {
  ActivityCancellationType,
  ActivityFailure,
  ApplicationFailure,
  continueAsNew,
  defineQuery,
  proxyActivities,
  proxyLocalActivities,
  setCurrentDetails,
  setHandler,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { CompactionActivities, CompactionOutput } from '../activities/compaction';
import type { HeldLease } from '../protocol';
import { NON_RETRYABLE_TYPES } from '../activities/failures';
import { familyGroup, InvalidKeyError, namespaceId, newJobId, rootKey, type MetadataCompactionId } from '../keys';
import { ACTIVITY_BACKOFF, attemptsSpanning } from '../config/retry';
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

export type CompactionPhase = 'reading group' | 'creating lease' | 'compacting' | 'publishing' | CompactionOutcomeName;

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

/** Math.random in a workflow is seeded per execution: a deterministic 128-bit source. */
const workflowRandom = (bytes: Uint8Array) => {
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
  // Upserted only when the start lacks them (startCompaction sets them): each upsert is a billable action.
  const started = workflowInfo().typedSearchAttributes;
  if (started.get(CompactionNamespace) !== ns || started.get(CompactionGroup) !== group) {
    upsertSearchAttributes([
      { key: CompactionNamespace, value: ns },
      { key: CompactionGroup, value: group },
    ]);
  }
  show('reading group');

  const settings = await compactionSettings();
  const { initialIntervalMs, backoffCoefficient, maximumIntervalMs } = ACTIVITY_BACKOFF;
  const retry = { initialInterval: initialIntervalMs, backoffCoefficient, maximumInterval: maximumIntervalMs, nonRetryableErrorTypes: [...NON_RETRYABLE_TYPES] };
  const shortCall = 4 * settings.operationDeadlineMs + 10_000;
  // The short calls retry for at least a lease expiry: no store outage the lease would outlive ends
  // the job, and past it a collector may have claimed the lease anyway.
  const maximumAttempts = attemptsSpanning(settings.leaseExpiryMs);
  const { readGroup, createLease, publish } = proxyActivities<CompactionActivities>({ startToCloseTimeout: shortCall, retry: { ...retry, maximumAttempts } });
  // Cancelling these waits until the activity has really stopped (the SDK default, TRY_CANCEL, would not).
  // No attempt limit: their attempts include every worker restart of a job that may run for hours,
  // so a count would end healthy jobs. The work under its lease ends on success, on a non-retryable
  // type (missing, oversized or corrupt input, a lost lease) or when cancelled.
  const { compactUnderLease } = proxyActivities<CompactionActivities>({
    startToCloseTimeout: '7 days',
    heartbeatTimeout: settings.heartbeatTimeoutMs,
    cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
    retry,
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
    try {
      compaction = await compactUnderLease.executeWithOptions({ summary: `compact ${inputs.length} segments of ${group} under lease ${job}` }, [
        { namespaceId: ns, jobId: job, group, inputs, etags, held: lease },
      ]);
    } catch (err) {
      if (!isLeaseLost(err)) throw jobFailure(err);
      lost = true;
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
      [{ namespaceId: ns, jobId: job, group, inputs, outputs: compaction.outputs, tombstones: compaction.tombstones }],
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
