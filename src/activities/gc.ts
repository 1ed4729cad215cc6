/**
 * The collector's activities: thin translations between Temporal (heartbeats, typed failures)
 * and src/protocol/collector. Each is idempotent, so Temporal may retry any of them: a claim
 * re-reads the lease, a walk resumes from its heartbeat, a delete of a missing key succeeds.
 */
import { Context } from '@temporalio/activity';
import { recordClaim, recordReclaim, recordRetiredReclaim } from './metrics';
import { ApplicationFailure } from '@temporalio/common';
import type { CompactionSettings } from '../config';
import { jobId, leaseKey, namespaceId, type MetadataCompactionId, type NamespaceId } from '../keys';
import {
  claimLease,
  deleteLease,
  findRootProblem,
  listJobPrefixes,
  listNamespaces,
  reclaimPositionFrom,
  reclaimPrefix,
  surveyLease,
  type ChildrenPage,
  type ClaimOutcome,
  type ReclaimPosition,
  type ReclaimTally,
  type RootProblem,
} from '../protocol/collector';
import { leaseReadOf, readLease, type JobRef } from '../protocol/lease-read';
import { reclaimRetiredSegments, type RetiredReclaimOutcome } from '../protocol/retired-reclaim';
import { inBatches } from '../store/batches';
import type { ObjectStore } from '../store';
import { toFailure } from './failures';

export interface GcDeps {
  readonly store: ObjectStore;
  readonly settings: CompactionSettings;
}

/** The worker's settings the collector workflows need; read once through a local activity, so replay sees the same values. */
export interface GcWorkflowSettings {
  readonly operationDeadlineMs: number;
  readonly heartbeatTimeoutMs: number;
  /** The worker's reader grace: a pass fixes it at its start and hands it to every decision. Absent from histories that predate it. */
  readonly readerGraceMs?: number;
}

export interface PrefixInput {
  readonly namespaceId: string;
  readonly jobId: string;
}

export interface PassInput {
  /** The pass's fixed clock. */
  readonly nowMs: number;
  readonly dryRun: boolean;
}

export interface ReclaimInput extends PrefixInput, PassInput {
  readonly keysPerFlush: number;
  readonly reportLimit: number;
  /** The pass's reader grace; unset by workflows that predate it, which fall back to this worker's. */
  readonly readerGraceMs?: number;
}

export interface RetiredReclaimInput extends PassInput {
  readonly namespaceId: string;
  readonly readerGraceMs: number;
  readonly keysPerFlush: number;
  readonly reportLimit: number;
}

export interface CorruptLease {
  readonly key: string;
  readonly reason: string;
}

/** A job prefix a survey left for the pass to collect; an `expired` one is claimed with what the survey read. */
export type SurveyedPrefix =
  | { readonly jobId: string; readonly owner: 'none' | 'collector' }
  | ({ readonly jobId: string; readonly owner: 'expired' } & SeenLease);

/** One read of every lease of a page of job prefixes, decided at the pass's clock. */
export interface LeaseSurvey {
  readonly corrupt: CorruptLease[];
  /** Live leases: retained, and nothing more to do for them in this pass. */
  readonly live: number;
  readonly toCollect: SurveyedPrefix[];
}

/**
 * An expired lease as a survey read it, handed to the claim so it needs no second GET: the claim's
 * CAS uses this ETag, and `lease` is the text read, so the claim writes exactly what a fresh GET
 * would have led to.
 */
export interface SeenLease {
  readonly etag: string;
  readonly lease: string;
}

/** Leases read in parallel by one scan: the DeleteObjects parallelism of the S3 adapter, for the same reason. */
const SCAN_CONCURRENCY = 8;

/** Reads the lease of every job of a page, {@link SCAN_CONCURRENCY} at a time, heartbeating after each read. */
async function eachLease<T>(ns: NamespaceId, jobIds: readonly string[], read: (job: JobRef) => Promise<T>): Promise<T[]> {
  const ctx = Context.current();
  const pages = await inBatches(jobIds, 1, SCAN_CONCURRENCY, (batch) =>
    Promise.all(
      batch.map(async (id) => {
        const result = await read({ namespaceId: ns, jobId: jobId(id) });
        ctx.heartbeat();
        return result;
      }),
    ),
  );
  return pages.flat();
}

const prefixOf = (input: PrefixInput): { namespaceId: NamespaceId; jobId: MetadataCompactionId } => ({
  namespaceId: namespaceId(input.namespaceId),
  jobId: jobId(input.jobId),
});

/** A failed walk still deleted what it deleted: its tally rides on the failure, so the pass can report it. */
function withTally(err: unknown, tally: ReclaimTally): unknown {
  const failure = toFailure(err);
  if (!(failure instanceof ApplicationFailure) || !(err instanceof Error)) return failure;
  return ApplicationFailure.create({ type: failure.type ?? err.name, message: failure.message, nonRetryable: failure.nonRetryable === true, cause: err, details: [tally] });
}

export function createGcActivities({ store, settings }: GcDeps) {
  const { timing } = settings;
  return {
    async gcSettings(): Promise<GcWorkflowSettings> {
      return { operationDeadlineMs: timing.operationDeadlineMs, heartbeatTimeoutMs: settings.heartbeatTimeoutMs, readerGraceMs: timing.readerGraceMs };
    },

    async listNamespaces(input: { after?: string; limit: number }): Promise<ChildrenPage<string>> {
      return listNamespaces(store, input.after, input.limit);
    },

    async listJobPrefixes(input: { namespaceId: string; after?: string; limit: number }): Promise<ChildrenPage<string>> {
      return listJobPrefixes(store, namespaceId(input.namespaceId), input.after, input.limit);
    },

    /** Reads the namespace's root once; a problem (missing, corrupt, unreadable) skips the namespace for the pass. */
    async findRootProblem(input: { namespaceId: string }): Promise<RootProblem | null> {
      return (await findRootProblem(store, namespaceId(input.namespaceId))) ?? null;
    },

    /**
     * Reads the leases of one page of job prefixes and reports the corrupt ones. Read-only: a
     * namespace with a corrupt lease is found out before its pass claims or deletes anything.
     */
    async findCorruptLeases(input: { namespaceId: string; jobIds: string[] }): Promise<CorruptLease[]> {
      const reads = await eachLease(namespaceId(input.namespaceId), input.jobIds, async (job) => ({ job, read: await readLease(store, job) }));
      return reads.flatMap(({ job, read }) => ('corrupt' in read ? [{ key: leaseKey(job.namespaceId, job.jobId), reason: read.corrupt }] : []));
    },

    /**
     * Reads the leases of one page of job prefixes once and decides each owner at the pass's clock,
     * claiming nothing: live ones are only counted, the rest are handed back to be collected.
     */
    async surveyLeases(input: { namespaceId: string; jobIds: string[] } & PassInput): Promise<LeaseSurvey> {
      const clock = { nowMs: input.nowMs, leaseExpiryMs: timing.leaseExpiryMs };
      const outcomes = await eachLease(namespaceId(input.namespaceId), input.jobIds, async (job) => ({ job, outcome: await surveyLease(store, job, clock) }));
      const survey: { corrupt: CorruptLease[]; live: number; toCollect: SurveyedPrefix[] } = { corrupt: [], live: 0, toCollect: [] };
      for (const { job, outcome } of outcomes) {
        if (outcome.owner === 'expired') {
          survey.toCollect.push({ jobId: job.jobId, owner: 'expired', etag: outcome.read.etag, lease: new TextDecoder().decode(outcome.read.bytes) });
          continue;
        }
        recordClaim(outcome, input.dryRun);
        if (outcome.owner === 'corrupt') survey.corrupt.push({ key: outcome.key, reason: outcome.reason });
        else if (outcome.owner === 'job') survey.live++;
        else survey.toCollect.push({ jobId: job.jobId, owner: outcome.owner });
      }
      return survey;
    },

    /** Claims the prefix; with `seen` (a survey's read of an expired lease) the claim is one CAS, no GET. */
    async claimLease(input: PrefixInput & PassInput & { seen?: SeenLease }): Promise<ClaimOutcome> {
      const job = prefixOf(input);
      const seen = input.seen && leaseReadOf({ body: new TextEncoder().encode(input.seen.lease), etag: input.seen.etag }, job);
      const outcome = await claimLease(store, job, { nowMs: input.nowMs, leaseExpiryMs: timing.leaseExpiryMs }, input.dryRun, seen);
      recordClaim(outcome, input.dryRun);
      return outcome;
    },

    /** Walks the prefix; its position travels in Temporal heartbeats, so a retried attempt resumes where the last one stood. */
    async reclaimPrefix(input: ReclaimInput): Promise<ReclaimTally> {
      const ctx = Context.current();
      let position = reclaimPositionFrom(ctx.info.heartbeatDetails);
      const onProgress = (p: ReclaimPosition) => {
        position = p;
        ctx.heartbeat(p);
      };
      try {
        const options = { ...input, stagingGraceMs: timing.stagingGraceMs, readerGraceMs: input.readerGraceMs ?? timing.readerGraceMs };
        const tally = await reclaimPrefix(store, prefixOf(input), options, position, onProgress);
        recordReclaim(tally, input.dryRun);
        return tally;
      } catch (err) {
        throw withTally(err, position.tally);
      }
    },

    /**
     * Reclaims the namespace's due retired segments and lost writes at the pass's rules (lost
     * writes age by T); idempotent, so a retried attempt lists again and finds deleted keys gone.
     */
    async reclaimRetiredSegments(input: RetiredReclaimInput): Promise<RetiredReclaimOutcome> {
      const ctx = Context.current();
      const outcome = await reclaimRetiredSegments(store, namespaceId(input.namespaceId), { ...input, lostWriteGraceMs: timing.gcMinGraceMs }, () => ctx.heartbeat());
      if ('tally' in outcome) recordRetiredReclaim(outcome.tally, input.dryRun);
      return outcome;
    },

    async deleteLease(input: PrefixInput): Promise<void> {
      await deleteLease(store, prefixOf(input));
    },
  };
}

export type GcActivities = ReturnType<typeof createGcActivities>;
