/**
 * One compaction of one family group, orchestrated as the protocol's steps: fix the group's inputs,
 * create the lease, compact under it with the keeper beside the work, publish by CAS, leave the lease
 * in place. Deterministic: the job id comes from the workflow's seeded randomness, every I/O is an
 * activity, every decision a pure function of what the activities returned.
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
import { ApplicationFailureCategory } from '@temporalio/common';
import type { CompactionActivities, CompactionOutput, WorkflowSettings } from '../activities/compaction';
import type { HeldLease, InputListRef, PublicationOutcome } from '../protocol';
import {
  familyGroup,
  InvalidKeyError,
  namespaceId,
  newJobId,
  rootKey,
  type FamilyGroup,
  type MetadataCompactionId,
  type NamespaceId,
} from '../keys';
import { attemptsSpanning } from '../config/retry';
import type { FailureType } from '../errors';
import { activityOptions } from './activity-options';
import { workflowRandom } from './workflow-random';
import { CompactionGroup, CompactionJobId, CompactionNamespace, CompactionOutcome } from './search-attributes';

export interface CompactionInput {
  readonly namespaceId: string;
  readonly group: string;
  /** Set by continue-as-new: the jobs of this workflow that were fenced before this one. */
  readonly fencedJobIds?: readonly string[];
  /**
   * The store the run works on (its identity: S3 bucket and endpoint, or the embedded file), as the
   * client that started it named it; unset, the store of the worker that runs its first workflow task.
   * An activity reaching a worker bound to another store fails `StoreMismatch`, naming both.
   */
  readonly store?: string;
}

/**
 * How a job ended: `published` (the root names its outputs), `unchanged` (a group of one segment with
 * nothing to drop, left alone: no new root generation), `fenced` (the lease was lost; a new job runs),
 * `abandoned` (its inputs left the group meanwhile), `superseded` (it lost every root race).
 */
export type CompactionOutcomeName = 'published' | 'unchanged' | 'fenced' | 'abandoned' | 'superseded';

/** How a compaction run ended (`outcome`) and what it did: its job, inputs, outputs and counts. */
export interface CompactionResult {
  /** How the run ended (see {@link CompactionOutcomeName}). */
  readonly outcome: CompactionOutcomeName;
  /** The namespace of the group. */
  readonly namespaceId: string;
  /** The family group compacted. */
  readonly group: string;
  /** The last job's id: its lease and staged segments are under its prefix. */
  readonly jobId: string;
  /** Jobs of this run fenced before the last one, each followed by a new job. */
  readonly fencedJobIds: readonly string[];
  /**
   * How many input segments the job read; their keys are in its input list, never in a payload (a group may have
   * 100,000).
   */
  readonly inputCount: number;
  /** The key of the job's input list under its prefix, which the collector reclaims with the prefix. */
  readonly inputList: string;
  /**
   * The job's output segments in the group's order: the root names them when `published`; otherwise the collector
   * reclaims them with the job's prefix.
   */
  readonly outputs: readonly string[];
  /**
   * The job's staged tombstone segments: the root names them after the outputs only when segments were registered
   * during the job.
   */
  readonly tombstones: readonly string[];
  /** Records in `outputs`, as the compactor counted them. */
  readonly recordsOut: number;
  /** Bytes of `outputs` as stored. */
  readonly bytesOut: number;
  /** Why a run ended as it did, when the outcome alone does not say (the fence's reason, the inputs that left). */
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

const { compactionSettings } = proxyLocalActivities<CompactionActivities>({
  startToCloseTimeout: '10 seconds',
  summary: "read the worker's timings",
});

const isLeaseLost = (err: unknown): boolean =>
  err instanceof ActivityFailure &&
  err.cause instanceof ApplicationFailure &&
  err.cause.type === ('LeaseLost' satisfies FailureType);

/**
 * An activity's failure that ends the job (a missing or corrupt input, retries spent) fails the
 * workflow with the cause's own type and message on top, where a caller, the CLI and the UI read
 * first, rather than under a generic "activity task failed". An expected one (BENIGN: a typed error
 * no retry can fix) is logged by the worker once, as the workflow's failure: without this
 * function's stack, which says nothing about it.
 */
function jobFailure(err: unknown): unknown {
  if (!(err instanceof ActivityFailure && err.cause instanceof ApplicationFailure)) return err;
  const { type, message, category } = err.cause;
  const failure = ApplicationFailure.create({
    type: type ?? undefined,
    message,
    nonRetryable: true,
    cause: err,
    category: category ?? undefined,
  });
  if (category === ApplicationFailureCategory.BENIGN) failure.stack = `${failure.name}: ${message}`;
  return failure;
}

/**
 * A publication whose attempts were spent and which could not be settled either: its root CAS may
 * have landed, or may still land. The failure says so and how to tell.
 */
function unsettledPublication(err: unknown, ns: string, group: string, job: string): ApplicationFailure {
  const cause = jobFailure(err);
  const message =
    `the publication of job ${job} failed (${cause instanceof Error ? cause.message : String(cause)}) and could not be settled: the root of ${ns} may name its outputs, ` +
    `and a root write of it may still land. Read group ${group} (readGroupSnapshot) for keys under ${job}/: named, it was published; the next compaction of the group settles it either way`;
  return ApplicationFailure.create({
    type: 'PublicationUnsettled',
    message,
    nonRetryable: true,
    cause: cause instanceof Error ? cause : undefined,
  });
}

/** A lost lease is the job's end as `fenced` (undefined here); any other failure ends the workflow. */
const unlessLeaseLost = (err: unknown): undefined => {
  if (isLeaseLost(err)) return undefined;
  throw jobFailure(err);
};

/** The job's activities under the worker's settings. */
function jobActivities(settings: WorkflowSettings) {
  const options = activityOptions(settings);
  // The short calls retry for at least a lease expiry: no store outage the lease would outlive ends
  // the job, and past it a collector may have claimed the lease anyway.
  const short = proxyActivities<CompactionActivities>(options.short(attemptsSpanning(settings.leaseExpiryMs)));
  // Cancelling the work waits until the activity has really stopped (the SDK default, TRY_CANCEL, would not).
  // No attempt limit: its attempts include every worker restart of a job that may run for hours,
  // so a count would end healthy jobs. It ends on success, on a non-retryable type (missing, oversized
  // or corrupt input, a lost lease) or when cancelled.
  const { compactUnderLease } = proxyActivities<CompactionActivities>({
    ...options.heartbeated('7 days'),
    cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
  });
  return {
    readGroup: short.readGroup,
    createLease: short.createLease,
    publish: short.publish,
    settlePublication: short.settlePublication,
    compactUnderLease,
  };
}

/** What the job does after its work, decided from what it holds: publish, or end without a root write. */
export type JobEnd = { readonly kind: 'publish' } | { readonly kind: 'fenced' | 'unchanged'; readonly detail: string };

/**
 * A job whose lease was lost ends fenced. A group of one segment whose compaction left no tombstone
 * to stage had nothing to drop (a segment holds each key once): publishing would only write a new
 * root generation naming the same records, so the group is left alone and the outputs to the collector.
 */
export function decideJobEnd(held: boolean, compaction: CompactionOutput | undefined, inputCount: number): JobEnd {
  if (!held) return { kind: 'fenced', detail: 'the lease was claimed before its create was confirmed' };
  if (!compaction) return { kind: 'fenced', detail: 'the lease was lost while compacting' };
  if (inputCount === 1 && compaction.tombstones.length === 0)
    return { kind: 'unchanged', detail: 'one input segment with nothing to drop: the root is left as it was' };
  return { kind: 'publish' };
}

/** The publication's outcome in one line, for the result and the UI. */
export const publicationDetail = (published: PublicationOutcome): string =>
  published.outcome === 'fenced'
    ? published.reason
    : published.outcome === 'abandoned'
      ? `inputs no longer current, among them: ${published.missingInputs.join(', ')}`
      : published.outcome === 'superseded'
        ? `lost ${published.lostRaces} root races`
        : `root generation ${published.rootGeneration}`;

/** The job's state for the `leaseState` query and the UI's current details. */
function jobView(ns: string, group: string, fencedJobIds: readonly string[]) {
  const view: { -readonly [K in keyof LeaseView]: LeaseView[K] } = {
    phase: 'reading group',
    namespaceId: ns,
    group,
    leaseStatus: 'none',
    fencedJobIds,
  };
  setHandler(leaseStateQuery, () => ({ ...view }));
  const show = (phase: CompactionPhase, extra = '') => {
    view.phase = phase;
    setCurrentDetails(
      `**${phase}** · namespace \`${ns}\` · group \`${group}\`${view.jobId ? ` · job \`${view.jobId}\`` : ''} · lease ${view.leaseStatus}` +
        (fencedJobIds.length ? ` · fenced before: ${fencedJobIds.length}` : '') +
        (extra ? `\n\n${extra}` : ''),
    );
  };
  return { view, show };
}

/** The namespace and group of the input, validated: a bad id is invalid input, before anything runs. */
function validGroup(input: CompactionInput): { ns: NamespaceId; group: FamilyGroup } {
  try {
    return { ns: namespaceId(input.namespaceId), group: familyGroup(input.group) };
  } catch (err) {
    if (err instanceof InvalidKeyError) throw ApplicationFailure.nonRetryable(err.message, 'InvalidInput');
    throw err;
  }
}

/** What every step of one run works with: its ids, its store, the worker's settings and activities, its view. */
interface JobRun {
  readonly ns: NamespaceId;
  readonly group: FamilyGroup;
  readonly job: MetadataCompactionId;
  /** Named by every activity: a worker bound to another store refuses it. */
  readonly store: string;
  readonly settings: WorkflowSettings;
  readonly activities: ReturnType<typeof jobActivities>;
  readonly view: ReturnType<typeof jobView>['view'];
  readonly show: ReturnType<typeof jobView>['show'];
}

/**
 * One group's compaction under a lease: read, lease, compact, publish; a fenced job continues as new with a new job id.
 */
export async function compactionWorkflow(input: CompactionInput): Promise<CompactionResult> {
  const { ns, group } = validGroup(input);
  const fencedJobIds = [...(input.fencedJobIds ?? [])];
  const { view, show } = jobView(ns, group, fencedJobIds);
  tagGroup(ns, group);
  const settings = await compactionSettings();
  const activities = jobActivities(settings);
  const store = input.store ?? settings.store;
  const job: MetadataCompactionId = newJobId(workflowRandom);
  view.jobId = job;
  upsertSearchAttributes([{ key: CompactionJobId, value: job }]);
  const run: JobRun = { ns, group, job, store, settings, activities, view, show };

  const inputList = await fixInputs(run);
  const ref = { namespaceId: ns, jobId: job, inputList, store };
  const held = await createLease(run);
  const compaction = held && (await compactUnderLease(run, { ...ref, held }));

  // 4. Publish by CAS, unless the job is fenced or has nothing to change.
  const end = decideJobEnd(held !== undefined, compaction, inputList.count);
  let outcome: CompactionOutcomeName = end.kind === 'publish' ? 'published' : end.kind;
  let detail = end.kind === 'publish' ? undefined : end.detail;
  if (end.kind === 'publish' && compaction) {
    const published = await publishOutputs(run, ref, compaction);
    outcome = published.outcome;
    detail = publicationDetail(published);
  }

  const result = endJob(run, { outcome, detail, fencedJobIds, inputList, compaction });
  if (outcome === 'fenced' && fencedJobIds.length < settings.maxFencedRuns) {
    // A fenced job never runs again under its id: a new run draws a new job id.
    await continueAsNew<typeof compactionWorkflow>({
      namespaceId: ns,
      group,
      fencedJobIds: [...fencedJobIds, job],
      store,
    });
  }
  return result;
}

/**
 * Tags the run with its namespace and group, only when the start lacks them (startCompaction sets them): each upsert is
 * a billable action.
 */
function tagGroup(ns: NamespaceId, group: FamilyGroup): void {
  const started = workflowInfo().typedSearchAttributes;
  if (started.get(CompactionNamespace) !== ns || started.get(CompactionGroup) !== group) {
    upsertSearchAttributes([
      { key: CompactionNamespace, value: ns },
      { key: CompactionGroup, value: group },
    ]);
  }
}

/**
 * 1. Fixes the group's inputs in the job's input list, before the lease exists; a group with no segments is invalid
 * input.
 */
async function fixInputs({ ns, group, job, store, activities, show }: JobRun): Promise<InputListRef> {
  show('reading group');
  const inputList: InputListRef | undefined = await activities.readGroup
    .executeWithOptions({ summary: `read group ${group} of ${ns}` }, [{ namespaceId: ns, jobId: job, group, store }])
    .catch((err: unknown) => {
      throw jobFailure(err);
    });
  if (!inputList)
    throw ApplicationFailure.nonRetryable(
      `group ${group} of ${ns} has no segments in ${rootKey(ns)}: nothing to compact`,
      'InvalidInput',
    );
  return inputList;
}

/**
 * 2. Creates the lease. A retried create can find its own lease already claimed: fenced (undefined) before its first
 * output.
 */
async function createLease({ ns, job, store, settings, activities, show }: JobRun): Promise<HeldLease | undefined> {
  show('creating lease');
  return activities.createLease
    .executeWithOptions({ summary: `create lease ${job}` }, [
      { namespaceId: ns, jobId: job, ownerId: settings.ownerId, startedAtMs: Date.now(), store },
    ])
    .catch(unlessLeaseLost);
}

/**
 * 3. Compacts under the lease: one activity holds it beside the work, one heartbeat stream, one slot per job. Undefined
 * when the lease was lost.
 */
async function compactUnderLease(
  { group, job, activities, view, show }: JobRun,
  leased: JobInputs & { held: HeldLease },
): Promise<CompactionOutput | undefined> {
  view.leaseStatus = 'held';
  show('compacting', `${leased.inputList.count} input segments`);
  return activities.compactUnderLease
    .executeWithOptions({ summary: `compact ${leased.inputList.count} segments of ${group} under lease ${job}` }, [
      leased,
    ])
    .catch(unlessLeaseLost);
}

/** The job's namespace, id, input list and store: what its lease, compaction and publication activities name. */
interface JobInputs {
  readonly namespaceId: NamespaceId;
  readonly jobId: MetadataCompactionId;
  readonly inputList: InputListRef;
  readonly store: string;
}

/**
 * 4. Publishes the outputs by CAS. Its attempts spent, a root CAS of it may still be in flight and
 * land: the publication is then settled, so the run never ends failed beside a root that names its outputs.
 */
async function publishOutputs(
  { ns, group, job, store, settings, activities, show }: JobRun,
  ref: JobInputs,
  compaction: CompactionOutput,
): Promise<PublicationOutcome> {
  show('publishing', `${compaction.outputs.length} output segments, ${compaction.progress.recordsOut} records`);
  return activities.publish
    .executeWithOptions(
      {
        summary: `publish ${compaction.outputs.length} segments of ${job}`,
        startToCloseTimeout: settings.publicationTimeoutMs,
      },
      [
        {
          ...ref,
          outputs: compaction.outputs,
          tombstones: compaction.tombstones,
          ...(compaction.tombstoneSeqFloor !== undefined && { tombstoneSeqFloor: compaction.tombstoneSeqFloor }),
        },
      ],
    )
    .catch(async (err: unknown): Promise<PublicationOutcome> => {
      const settled = await activities.settlePublication
        .executeWithOptions({ summary: `settle the publication of ${job}` }, [
          {
            namespaceId: ns,
            jobId: job,
            group,
            store,
            outputs: compaction.outputs,
            tombstones: compaction.tombstones,
          },
        ])
        .catch(() => {
          throw unsettledPublication(err, ns, group, job);
        });
      if (settled.outcome === 'published') return settled;
      throw jobFailure(err);
    });
}

/** How the job ended and what it holds, for its result. */
interface JobEnding {
  readonly outcome: CompactionOutcomeName;
  readonly detail: string | undefined;
  readonly fencedJobIds: readonly string[];
  readonly inputList: InputListRef;
  readonly compaction: CompactionOutput | undefined;
}

/**
 * 5. The lease is left in place (a fenced job's is not ours): tags and shows the outcome, and returns the run's result.
 */
function endJob(
  { ns, group, job, view, show }: JobRun,
  { outcome, detail, fencedJobIds, inputList, compaction }: JobEnding,
): CompactionResult {
  upsertSearchAttributes([{ key: CompactionOutcome, value: outcome }]);
  view.leaseStatus = outcome === 'fenced' ? 'lost' : 'left in place';
  const result: CompactionResult = {
    outcome,
    namespaceId: ns,
    group,
    jobId: job,
    fencedJobIds,
    inputCount: inputList.count,
    inputList: inputList.key,
    outputs: compaction?.outputs ?? [],
    tombstones: compaction?.tombstones ?? [],
    recordsOut: compaction?.progress.recordsOut ?? 0,
    bytesOut: compaction?.progress.bytesOut ?? 0,
    detail,
  };
  show(
    outcome,
    `${result.outputs.length} output segments, ${result.recordsOut} records, ${result.bytesOut} bytes${detail ? `\n\n${detail}` : ''}`,
  );
  return result;
}
