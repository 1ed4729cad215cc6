/**
 * A compaction workflow, step by step as `compactionWorkflow` runs it, each step the code its
 * activity runs: the group's inputs fixed in the input list (`checkInputs`, `writeInputList`,
 * as `readGroup` does), the lease created, the reference compactor under the lease with a keeper
 * refreshing it at `keepLease`'s cadence (`refreshJobLease`), publication with its budget and
 * retries (an attempt past its timeout runs on abandoned beside the next), and a new job when fenced.
 */
import { referenceCompactor, type CompactionOutputs } from '../../../src/compactor';
import { runCompactionAttempt } from '../../../src/compactor/attempt';
import { checkInputs } from '../../../src/compactor/inputs';
import { TypedError, firstLineOf } from '../../../src/errors';
import { familyGroup, leaseKey, newJobId, type FamilyGroup } from '../../../src/keys';
import {
  createJobLease,
  LeaseLostError,
  publicationLimits,
  publicationOfReclaimedJob,
  publishCompaction,
  settlePublication,
  readInputListIfAny,
  readInputListUnderLease,
  readRoot,
  refreshJobLease,
  writeInputList,
  type HeldLease,
  type InputList,
  type InputListRef,
  type JobRef,
  type PublicationOutcome,
} from '../../../src/protocol';
import { groupSegments, jsonRootCodec } from '../../../src/root';
import { decideJobEnd } from '../../../src/workflows/compaction';
import type { Env } from '../env';
import { PartyGaveUp, type Party } from '../sim';
import { shortKey } from '../trace';
import { runActivity } from './activity';

export interface CompactionPlan {
  readonly afterMs: number;
  readonly group: string;
  /** Target output size and fan-in: small, so a few records make several outputs, sometimes intermediate runs. */
  readonly targetSegmentBytes: number;
  readonly maxFanIn: number;
  /** How long the workflow waits for a worker between fixing its inputs and creating its lease (no worker free). */
  readonly leaseDelayMs: number;
  /** … and between its work and its publication: long enough, and the lease expires meanwhile. */
  readonly publishDelayMs: number;
}

/** Steps of a publication's jitter draw: each a scenario choice, 0 (no wait) the benign one. */
const RANDOM_STEPS = 1024;

/** How the compaction of one job ended, as the workflow reports it (or the reason it failed). */
export type JobEndName = PublicationOutcome['outcome'] | 'unchanged' | 'empty';

/** The `readGroup` activity: the group's segments from one root read, checked, in an input list of this attempt. */
async function readGroup(
  party: Party,
  env: Env,
  job: JobRef,
  group: FamilyGroup,
  attempt: number,
): Promise<InputListRef | undefined> {
  const { root } = await readRoot(party.store, env.ns, jsonRootCodec);
  const inputs = [...groupSegments(root, group)];
  const etags = await checkInputs(party.store, group, inputs, env.settings.maxInputSegmentBytes);
  if (inputs.length === 0) return undefined;
  return writeInputList(party.store, job, attempt, { group, inputs, etags });
}

/**
 * The lease as the keeper holds it, and the compactor's progress: the heartbeat details a retried attempt resumes from.
 */
interface Details {
  held: HeldLease;
  progress: unknown;
}

/**
 * The keeper of `keepLease`: each refresh due one interval after the heartbeat last written; a failing
 * refresh retried with backoff until one could no longer be sent a deadline before the lease expires.
 * Looks at `stop` only between refreshes. Rejects with {@link LeaseLostError} when the lease is lost.
 */
async function keepLease(env: Env, party: Party, job: JobRef, details: Details, stop: AbortSignal): Promise<void> {
  const { timing } = env;
  let beatAtMs = Math.min(details.held.lease.heartbeat_at_ms, party.clock());
  const waitUntil = async (untilMs: number) => {
    if (!stop.aborted && party.clock() < untilMs) await party.sleep(untilMs - party.clock(), stop);
  };
  for (let failures = 0; ;) {
    await waitUntil(beatAtMs + timing.leaseRefreshIntervalMs);
    if (stop.aborted) return;
    const sentAtMs = party.clock();
    try {
      details.held = await refreshJobLease(party.store, job, details.held, party.clock);
    } catch (err) {
      const lastSendMs = beatAtMs + timing.leaseExpiryMs - timing.operationDeadlineMs;
      const retrying = !(err instanceof TypedError && !err.retryable);
      if (err instanceof LeaseLostError) throw err;
      if (retrying && party.clock() >= lastSendMs)
        throw new LeaseLostError(
          leaseKey(job.namespaceId, job.jobId),
          `not refreshed before it would expire, the last refresh failing with: ${firstLineOf(err)}`,
        );
      if (!retrying) throw err;
      await waitUntil(Math.min(party.clock() + env.retryDelayMs(++failures), lastSendMs));
      continue;
    }
    failures = 0;
    beatAtMs = Math.min(details.held.lease.heartbeat_at_ms, sentAtMs);
    env.sim.count('lease refreshed by the keeper');
  }
}

/** One attempt of `compactUnderLease`: the reference compactor over the pinned inputs, the keeper beside it. */
async function compactAttempt(
  env: Env,
  party: Party,
  job: JobRef,
  plan: CompactionPlan,
  ref: InputListRef,
  details: Details,
): Promise<CompactionOutputs> {
  const input: InputList = await readInputListUnderLease(party.store, job, ref);
  const workEnded = new AbortController();
  let keeperFailure: { readonly error: unknown } | undefined;
  const keeping = keepLease(env, party, job, details, workEnded.signal).catch((error: unknown) => {
    keeperFailure = { error };
    throw error;
  });
  const working = runCompactionAttempt({
    store: party.store,
    compactor: referenceCompactor,
    job,
    input,
    limits: { targetSegmentBytes: plan.targetSegmentBytes, maxFanIn: plan.maxFanIn, segmentFormat: 1 },
    resume: details.progress,
    heartbeat: (progress) => {
      if (progress !== undefined) details.progress = progress;
      if (keeperFailure) throw keeperFailure.error;
    },
  }).finally(() => workEnded.abort());
  const [worked, kept] = await Promise.allSettled([working, keeping]);
  if (kept.status === 'rejected') throw kept.reason;
  if (worked.status === 'rejected') throw worked.reason;
  return worked.value;
}

/**
 * Runs the compaction workflow of one group to its end: a fenced job runs again as a new job, up to the settings'
 * limit.
 */
export async function runCompaction(env: Env, party: Party, plan: CompactionPlan): Promise<JobEndName> {
  await party.sleep(plan.afterMs);
  const group = familyGroup(plan.group);
  const { timing, settings } = env;
  const short = {
    attempts: env.shortAttempts,
    startToCloseMs: 4 * timing.operationDeadlineMs + timing.operationDeadlineMs,
    backoffScale: env.backoffScale,
  };
  for (let run = 0; ; run++) {
    const job: JobRef = { namespaceId: env.ns, jobId: newJobId() };
    party.log(`job ${shortKey(job.jobId)} compacts ${group}`);
    const ref = await runActivity(party, 'readGroup', short, (attempt) => readGroup(party, env, job, group, attempt));
    if (!ref) {
      party.log('the group has no segments: nothing to compact');
      return 'empty';
    }
    party.log(`inputs fixed: ${ref.count} segments`);
    await party.sleep(plan.leaseDelayMs);
    const startedAtMs = party.clock();
    let held: HeldLease | undefined;
    let compaction: CompactionOutputs | undefined;
    try {
      held = await runActivity(party, 'createLease', short, () =>
        createJobLease(party.store, { ...job, ownerId: party.name, startedAtMs }),
      );
      const details: Details = { held, progress: undefined };
      compaction = await runActivity(party, 'compactUnderLease', { attempts: 20, backoffScale: env.backoffScale }, () =>
        compactAttempt(env, party, job, plan, ref, details),
      );
    } catch (err) {
      if (!(err instanceof LeaseLostError)) throw err;
      party.log(`lease lost: ${err.reason}`);
    }
    const output = compaction && {
      outputs: [...compaction.outputs],
      tombstones: [...(compaction.tombstones ?? [])],
      ...(typeof compaction.tombstoneSeqFloor === 'number' && { tombstoneSeqFloor: compaction.tombstoneSeqFloor }),
      progress: { recordsOut: compaction.recordsOut, bytesOut: compaction.bytesOut },
    };
    const end = decideJobEnd(held !== undefined, output, ref.count);
    let outcome: JobEndName = end.kind === 'publish' ? 'published' : end.kind;
    if (end.kind === 'publish' && output) {
      await party.sleep(plan.publishDelayMs);
      party.log(`publishing ${output.outputs.length} outputs and ${output.tombstones.length} tombstone segments`);
      const publication = { ...job, group, outputs: output.outputs, tombstones: output.tombstones };
      const published = await runActivity(
        party,
        'publish',
        { ...short, startToCloseMs: settings.timing.publicationBudgetMs + 4 * timing.operationDeadlineMs },
        async () => {
          const start = party.elapsed();
          const list = await readInputListIfAny(party.store, job, ref);
          return list
            ? publishCompaction(
                party.store,
                {
                  ...publication,
                  inputs: list.inputs,
                  ...('tombstoneSeqFloor' in output && { tombstoneSeqFloor: output.tombstoneSeqFloor }),
                },
                {
                  ...publicationLimits(settings),
                  clock: {
                    leaseClockMs: party.clock,
                    elapsedMs: () => party.elapsed() - start,
                    sleep: (ms) => party.sleep(ms),
                    random: () => env.sim.choices.next(RANDOM_STEPS) / RANDOM_STEPS,
                  },
                  codec: jsonRootCodec,
                },
              )
            : publicationOfReclaimedJob(
                party.store,
                { ...job, outputs: output.outputs, tombstones: output.tombstones },
                jsonRootCodec,
              );
        },
      ).catch(async (err: unknown): Promise<PublicationOutcome> => {
        // As the workflow: its attempts spent, the publication is settled (a CAS of it may still land), and the job
        // fails unless the root names it.
        if (!(err instanceof TypedError || err instanceof PartyGaveUp)) throw err;
        const settled = await runActivity(party, 'settlePublication', short, () =>
          settlePublication(party.store, { ...publication, inputs: [] }, jsonRootCodec),
        );
        env.sim.count(`publication settled: ${settled.outcome}`);
        party.log(`publication settled: ${settled.outcome}`);
        if (settled.outcome === 'published') return settled;
        throw err;
      });
      outcome = published.outcome;
    }
    env.sim.count(`job ${outcome}`);
    party.log(`job ${shortKey(job.jobId)} ${outcome}`);
    if (outcome !== 'fenced' || run >= settings.maxFencedRuns) return outcome;
  }
}

export interface TriggerPlan {
  /** How often the trigger looks at the root. */
  readonly everyMs: number;
  /**
   * A group with at least this many segments gets a compaction (one at a time per group, as a workflow id per group
   * gives).
   */
  readonly threshold: number;
  /**
   * Percent of its jobs cut off from the store from their first root write (their publication) for
   * longer than a lease expiry: the CAS lands, if at all, after a pass could claim the job.
   */
  readonly cutOffPercent: number;
}

/**
 * The metadata service's compaction trigger: it reads the root now and then and starts a compaction
 * workflow for every group with enough segments, none of a group while its last is still running.
 * Jobs then start right after the registrations that warrant them, where the interleavings are.
 */
export async function runCompactionTrigger(
  env: Env,
  party: Party,
  plan: TriggerPlan,
  start: (group: string, done: () => void) => void,
): Promise<void> {
  const running = new Set<string>();
  while (!env.sim.healed) {
    await party.sleep(plan.everyMs);
    let root;
    try {
      ({ root } = await readRoot(party.store, env.ns, jsonRootCodec));
    } catch (err) {
      if (!(err instanceof TypedError)) throw err;
      continue;
    }
    for (const [group, segments] of Object.entries(root.groups)) {
      if (segments.length < plan.threshold || running.has(group) || env.sim.healed) continue;
      running.add(group);
      start(group, () => running.delete(group));
    }
  }
}
