/**
 * The reference compactor: streams a k-way merge of a group's input segments into output
 * segments of a target size under the job's prefix. Output segment ids are derived from the job
 * and the segment's index, so a resumed attempt rewrites nothing it finished and a re-run of a
 * half-written segment lands on the same key with the same bytes.
 */
import { createHash } from 'node:crypto';
import { segmentId, stagedSegmentKey, type SegmentId } from '../keys';
import type { JobRef } from '../protocol';
import { mergeSegments, readSegment, SEGMENT_EXTENSION, SegmentBuilder } from '../segments';
import type { ObjectStore } from '../store';

/** Where a compaction stands; kept in Temporal heartbeat details so a retried attempt resumes. Constant size, however long the job. */
export interface CompactionProgress {
  readonly segmentsFinished: number;
  /** Last key of the last finished segment: a resumed attempt skips every key up to it. */
  readonly lastKey: string | null;
  readonly recordsOut: number;
  readonly bytesOut: number;
}

export const NO_PROGRESS: CompactionProgress = { segmentsFinished: 0, lastKey: null, recordsOut: 0, bytesOut: 0 };

export function outputSegmentId(job: JobRef, index: number): SegmentId {
  const digest = createHash('sha256').update(`${job.jobId}/${index}`).digest('hex');
  return segmentId(`seg_${digest.slice(0, 32)}`);
}

export const outputSegmentKey = (job: JobRef, index: number): string =>
  stagedSegmentKey(job.namespaceId, job.jobId, outputSegmentId(job, index), SEGMENT_EXTENSION);

export const outputSegmentKeys = (job: JobRef, progress: CompactionProgress): string[] =>
  Array.from({ length: progress.segmentsFinished }, (_, i) => outputSegmentKey(job, i));

export interface CompactionHooks {
  /** Called after each output segment is stored; the activity heartbeats it. */
  readonly onSegmentFinished: (progress: CompactionProgress) => void;
  /** Called every few thousand records, so the activity can heartbeat and notice cancellation. */
  readonly onRecords: (recordsIn: number) => void;
}

/**
 * How a worker turns a group's inputs into staged output: {@link compactGroup} in production; a
 * test compactor (see `waiting.ts`) for benchmarks that only need the job to hold its lease.
 */
export type Compactor = (
  store: ObjectStore,
  job: JobRef,
  inputs: readonly string[],
  targetSegmentBytes: number,
  resume: CompactionProgress,
  hooks: CompactionHooks,
) => Promise<CompactionProgress>;

/**
 * Merges all of the group's segments (so tombstones are dropped) from `resume` on.
 * Memory: one output segment being built plus, per input, about two of the store's read windows
 * (an open input holds no connection: the store reads it in bounded requests, see `getStream`).
 */
export const compactGroup: Compactor = async (store, job, inputs, targetSegmentBytes, resume, hooks) => {
  const streams = await Promise.all(inputs.map(async (key) => readSegment(key, (await store.getStream(key)).body)));
  let progress = resume;
  let builder = new SegmentBuilder();
  let recordsIn = 0;
  const flush = async () => {
    await store.put(outputSegmentKey(job, progress.segmentsFinished), builder.encode());
    progress = {
      segmentsFinished: progress.segmentsFinished + 1,
      lastKey: builder.lastKey,
      recordsOut: progress.recordsOut + builder.count,
      bytesOut: progress.bytesOut + builder.size,
    };
    hooks.onSegmentFinished(progress);
    builder = new SegmentBuilder();
  };
  for await (const record of mergeSegments(streams, { dropTombstones: true, after: resume.lastKey ?? undefined })) {
    builder.add(record);
    if (++recordsIn % 2048 === 0) hooks.onRecords(recordsIn);
    if (builder.size >= targetSegmentBytes) await flush();
  }
  if (builder.count > 0) await flush();
  return progress;
};

export { waitingCompactor } from './waiting';
