/**
 * The collector's activities: thin translations between Temporal (heartbeats, typed failures)
 * and src/protocol/collector. Each is idempotent, so Temporal may retry any of them: a claim
 * re-reads the lease, a walk resumes from its heartbeat, a delete of a missing key succeeds.
 */
import { Context } from '@temporalio/activity';
import { recordClaim, recordReclaim } from './metrics';
import { ApplicationFailure } from '@temporalio/common';
import type { CompactionSettings } from '../config';
import { jobId, leaseKey, namespaceId, type MetadataCompactionId, type NamespaceId } from '../keys';
import {
  claimLease,
  deleteLease,
  listJobPrefixes,
  listNamespaces,
  reclaimPositionFrom,
  reclaimPrefix,
  type ChildrenPage,
  type ClaimOutcome,
  type ReclaimPosition,
  type ReclaimTally,
} from '../protocol/collector';
import { readLease } from '../protocol/lease-read';
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
}

export interface CorruptLease {
  readonly key: string;
  readonly reason: string;
}

/** Leases read in parallel by one scan: the DeleteObjects parallelism of the S3 adapter, for the same reason. */
const SCAN_CONCURRENCY = 8;

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
      return { operationDeadlineMs: timing.operationDeadlineMs, heartbeatTimeoutMs: settings.heartbeatTimeoutMs };
    },

    async listNamespaces(input: { after?: string; limit: number }): Promise<ChildrenPage<string>> {
      return listNamespaces(store, input.after, input.limit);
    },

    async listJobPrefixes(input: { namespaceId: string; after?: string; limit: number }): Promise<ChildrenPage<string>> {
      return listJobPrefixes(store, namespaceId(input.namespaceId), input.after, input.limit);
    },

    /**
     * Reads the leases of one page of job prefixes and reports the corrupt ones. Read-only: a
     * namespace with a corrupt lease is found out before its pass claims or deletes anything.
     */
    async findCorruptLeases(input: { namespaceId: string; jobIds: string[] }): Promise<CorruptLease[]> {
      const ctx = Context.current();
      const ns = namespaceId(input.namespaceId);
      const scan = async (id: string): Promise<CorruptLease[]> => {
        const job = jobId(id);
        const read = await readLease(store, { namespaceId: ns, jobId: job });
        ctx.heartbeat();
        return 'corrupt' in read ? [{ key: leaseKey(ns, job), reason: read.corrupt }] : [];
      };
      const found = await inBatches(input.jobIds, 1, SCAN_CONCURRENCY, (batch) => Promise.all(batch.map(scan)));
      return found.flat(2);
    },

    async claimLease(input: PrefixInput & PassInput): Promise<ClaimOutcome> {
      const outcome = await claimLease(store, prefixOf(input), { nowMs: input.nowMs, leaseExpiryMs: timing.leaseExpiryMs }, input.dryRun);
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
        const tally = await reclaimPrefix(store, prefixOf(input), { ...input, stagingGraceMs: timing.stagingGraceMs }, position, onProgress);
        recordReclaim(tally, input.dryRun);
        return tally;
      } catch (err) {
        throw withTally(err, position.tally);
      }
    },

    async deleteLease(input: PrefixInput): Promise<void> {
      await deleteLease(store, prefixOf(input));
    },
  };
}

export type GcActivities = ReturnType<typeof createGcActivities>;
