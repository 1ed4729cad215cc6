/**
 * Compacting and publishing a group on a store directly, without Temporal: the reference compactor's attempts, killed
 * and resumed, and the publication.
 */
import {
  referenceCompactor,
  stagedStore,
  type CompactionJob,
  type CompactionOutputs,
  type CompactionProgress,
  type MergeLimits,
} from '../../src/compactor';
import { createJobLease, publishCompaction, type PublicationOutcome } from '../../src/protocol';
import { jsonRootCodec } from '../../src/root';
import type { ObjectStore } from '../../src/store';

/** Thrown by a test's heartbeat to kill an attempt. */
export class Killed extends Error {}

/**
 * An attempt killed after the `after`-th progress it heartbeats; `lostBeat`: Temporal kept only the beat before it (its
 * throttle did not send the last).
 */
export interface Kill {
  readonly after: number;
  readonly lostBeat: boolean;
}

/**
 * Runs the reference compactor, killing the attempt after the `kills[i]`-th progress it heartbeats;
 * the next attempt resumes from the last progress, or the one before when `lostBeat`. `onProgress`
 * sees every progress heartbeated (a test checks it as the worker would).
 */
export async function compactWithKills(
  store: ObjectStore,
  job: CompactionJob,
  inputs: readonly string[],
  limits: MergeLimits,
  kills: readonly Kill[] = [],
  onProgress: (progress: CompactionProgress) => void = () => {},
): Promise<CompactionOutputs> {
  let resume: CompactionProgress | undefined;
  for (const kill of [...kills, undefined]) {
    const beats: CompactionProgress[] = [];
    try {
      return await referenceCompactor.compact({
        job,
        inputs,
        store: stagedStore(store, job),
        limits,
        resume,
        heartbeat: (progress) => {
          if (progress === undefined) return;
          onProgress(progress as CompactionProgress);
          beats.push(progress as CompactionProgress);
          if (kill && beats.length >= kill.after) throw new Killed();
        },
      });
    } catch (err) {
      if (!(err instanceof Killed)) throw err;
      resume = (kill!.lostBeat ? beats.at(-2) : beats.at(-1)) ?? resume;
    }
  }
  throw new Error('unreachable');
}

/** Publishes `result` of `job` (which read `inputs`) under a fresh lease, with the reference root codec. */
export async function publishJob(
  store: ObjectStore,
  job: CompactionJob,
  inputs: readonly string[],
  result: CompactionOutputs,
): Promise<PublicationOutcome> {
  await createJobLease(store, {
    namespaceId: job.namespaceId,
    jobId: job.jobId,
    ownerId: 'test',
    startedAtMs: Date.now(),
  });
  return publishCompaction(
    store,
    {
      namespaceId: job.namespaceId,
      jobId: job.jobId,
      group: job.group,
      inputs,
      outputs: result.outputs,
      tombstones: result.tombstones ?? [],
      ...(result.tombstoneSeqFloor !== undefined && { tombstoneSeqFloor: result.tombstoneSeqFloor }),
    },
    {
      budgetMs: 60_000,
      maxRootRaces: 5,
      raceBackoff: { firstMs: 10, maxMs: 100 },
      // No time passes between root races: the tests decide what races, not a timer.
      clock: { leaseClockMs: () => Date.now(), elapsedMs: () => 0, sleep: () => Promise.resolve() },
      codec: jsonRootCodec,
    },
  );
}
