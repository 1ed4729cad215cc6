/**
 * A retried attempt's `resume` is whatever the last attempt heartbeated, possibly by another
 * compactor or another version: the reference compactor checks it is its own progress before it
 * trusts it, and refuses anything else with a non-retryable typed failure; read loosely, a foreign
 * progress made it write nothing and return no outputs, which publication took for the group's
 * new contents. On the embedded store, with the package's own writer and compactor.
 */
import { ApplicationFailure } from '@temporalio/common';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { toFailure } from '../../src/activities/failures';
import {
  NO_PROGRESS,
  ProgressMismatchError,
  referenceCompactor,
  resumeProgress,
  type CompactionProgress,
} from '../../src/compactor';
import { familyGroup, jobId, namespaceId } from '../../src/keys';
import { createEmbeddedObjectStore, type ObjectStore } from '../../src/store';
import { makeInputs, writeInputs } from '../support/records';

const job = {
  namespaceId: namespaceId('resume'),
  jobId: jobId('cmp_0123456789abcdef0123456789abcdef'),
  group: familyGroup('inodes'),
};

describe("the reference compactor's resume", () => {
  let store: ObjectStore;
  let inputs: string[];
  beforeEach(async () => {
    store = createEmbeddedObjectStore({ path: ':memory:' });
    inputs = await writeInputs(store, job.namespaceId, job.group, makeInputs(3, 50));
  });
  afterEach(() => store.close());

  const compactFrom = (resume: unknown) =>
    referenceCompactor.compact({
      job,
      inputs,
      store,
      limits: { targetSegmentBytes: 1024, maxFanIn: 8 },
      resume: resume as CompactionProgress,
      heartbeat: () => {},
    });

  it("refuses progress without its fields (another compactor's) with ProgressMismatchError, and writes nothing", async () => {
    const before = (await store.list({ prefix: 'namespaces/resume/metadata/compactions/' })).objects.length;
    await expect(compactFrom({ outputsWritten: 3, cursor: 'k9' })).rejects.toThrow(ProgressMismatchError);
    expect((await store.list({ prefix: 'namespaces/resume/metadata/compactions/' })).objects.length).toBe(before);
  });

  it('refuses its own fields without its version, or with another one: a progress of another version is not a position', async () => {
    const unversioned = { segmentsFinished: 2, lastKey: 'k1', recordsOut: 9, bytesOut: 99 };
    await expect(compactFrom(unversioned)).rejects.toThrow(/not the reference compactor's progress of version 2/);
    await expect(compactFrom({ ...NO_PROGRESS, version: 1 })).rejects.toThrow(ProgressMismatchError);
    await expect(compactFrom({ ...NO_PROGRESS, version: 3 })).rejects.toThrow(ProgressMismatchError);
  });

  it('refuses fields of the wrong type or an impossible combination', () => {
    for (const resume of [
      null,
      7,
      'x',
      [],
      { ...NO_PROGRESS, segmentsFinished: -1 },
      { ...NO_PROGRESS, lastKey: 'k' },
      { ...NO_PROGRESS, segmentsFinished: 1 },
      { ...NO_PROGRESS, runs: { fanIn: 1, parts: [] } },
      { ...NO_PROGRESS, runs: { fanIn: 4, parts: ['1'] } },
      { ...NO_PROGRESS, recordsOut: 1.5 },
      { ...NO_PROGRESS, segmentsFinished: 1, lastKey: 'k\uD800' },
    ]) {
      expect(() => resumeProgress(job, resume), JSON.stringify(resume)).toThrow(ProgressMismatchError);
    }
  });

  it('takes no progress as a first attempt and its own progress as a position', async () => {
    const full = await compactFrom(undefined);
    expect(full.outputs.length).toBeGreaterThan(1);
    const own: CompactionProgress = { ...NO_PROGRESS, segmentsFinished: 1, lastKey: 'k0', recordsOut: 1, bytesOut: 10 };
    expect(resumeProgress(job, own)).toBe(own);
    expect(resumeProgress(job, JSON.parse(JSON.stringify({ ...own, runs: { fanIn: 4, parts: [2, 3] } })))).toEqual({
      ...own,
      runs: { fanIn: 4, parts: [2, 3] },
    });
  });

  it('takes as its own the progress of a cut that finished only a tombstone segment: a position with no output yet', () => {
    const tombstonesOnly: CompactionProgress = { ...NO_PROGRESS, tombstoneSegmentsFinished: 1, lastKey: 'inode/0' };
    expect(resumeProgress(job, tombstonesOnly)).toBe(tombstonesOnly);
  });

  it('is a non-retryable failure of type ProgressMismatch naming the job and the progress it was given', () => {
    let refused: unknown;
    try {
      resumeProgress(job, { outputsWritten: 3 });
    } catch (err) {
      refused = err;
    }
    const failure = toFailure(refused) as ApplicationFailure;
    expect([failure.type, failure.nonRetryable]).toEqual(['ProgressMismatch', true]);
    expect(failure.message).toContain(job.jobId);
    expect(failure.message).toContain('{"outputsWritten":3}');
  });
});
