/**
 * A compactor's progress travels in Temporal heartbeat details: the heartbeat a compactor is handed
 * refuses progress over MAX_PROGRESS_BYTES of JSON, or not JSON at all, with a non-retryable typed
 * error naming the size, the limit and the fix, and the refusal fails the attempt even when the
 * compactor catches it.
 */
import { ApplicationFailure } from '@temporalio/common';
import { describe, expect, it } from 'vitest';
import { toFailure } from '../../src/activities/failures';
import {
  checkProgress,
  MAX_PROGRESS_BYTES,
  ProgressRefusedError,
  withCheckedProgress,
  type CompactionProgress,
} from '../../src/compactor';
import { planMerge } from '../../src/compactor/plan';
import { resolveSettings } from '../../src/config';
import { jobId, namespaceId } from '../../src/keys';

const job = { namespaceId: namespaceId('progress'), jobId: jobId('cmp_0123456789abcdef0123456789abcdef') };
/** A progress whose JSON is exactly `bytes` long: `{"p":"…"}`. */
const progressOf = (bytes: number) => ({ p: 'x'.repeat(bytes - 8) });

const refusalOf = (run: () => unknown): ProgressRefusedError => {
  try {
    run();
  } catch (err) {
    expect(err).toBeInstanceOf(ProgressRefusedError);
    return err as ProgressRefusedError;
  }
  throw new Error('not refused');
};

describe('checkProgress', () => {
  it('passes progress of up to MAX_PROGRESS_BYTES of JSON and returns its JSON', () => {
    expect(checkProgress(job, { written: 3, lastKey: 'k/9' })).toBe('{"written":3,"lastKey":"k/9"}');
    expect(Buffer.byteLength(checkProgress(job, progressOf(MAX_PROGRESS_BYTES)))).toBe(MAX_PROGRESS_BYTES);
  });

  it('refuses progress one byte over the limit, naming the job, the size, the limit and the fix', () => {
    const err = refusalOf(() => checkProgress(job, progressOf(MAX_PROGRESS_BYTES + 1)));
    expect(err.message).toContain(job.jobId);
    expect(err.message).toContain(`${MAX_PROGRESS_BYTES + 1} bytes of JSON, over the limit of ${MAX_PROGRESS_BYTES}`);
    expect(err.message).toMatch(/small position.*staged objects/);
  });

  it('refuses progress that is not JSON: a BigInt, a cycle, a function', () => {
    const cycle: Record<string, unknown> = {};
    cycle.self = cycle;
    for (const progress of [{ n: 1n }, cycle, () => 1]) {
      expect(refusalOf(() => checkProgress(job, progress)).message).toMatch(/^[^\n]*that is not JSON .*no cycles\)$/);
    }
  });

  it('is a non-retryable failure of type ProgressRefused', () => {
    const failure = toFailure(refusalOf(() => checkProgress(job, { n: 1n }))) as ApplicationFailure;
    expect([failure.type, failure.nonRetryable]).toEqual(['ProgressRefused', true]);
  });
});

describe('withCheckedProgress', () => {
  it('hands progress within the limit, and beats without progress, to the heartbeat', async () => {
    const beats: unknown[] = [];
    const result = await withCheckedProgress(
      job,
      (p) => beats.push(p),
      async (heartbeat) => {
        heartbeat({ written: 1 });
        heartbeat();
        return 'done';
      },
    );
    expect(result).toBe('done');
    expect(beats).toEqual([{ written: 1 }, undefined]);
  });

  it('keeps a refused progress out of the heartbeat and fails the attempt even when the compactor caught the throw', async () => {
    const beats: unknown[] = [];
    const attempt = withCheckedProgress(
      job,
      (p) => beats.push(p),
      async (heartbeat) => {
        try {
          heartbeat(progressOf(100 * 1024));
        } catch {
          // a compactor that swallows the refusal and goes on
        }
        heartbeat({ written: 1 });
        return 'done';
      },
    );
    await expect(attempt).rejects.toThrow(ProgressRefusedError);
    expect(beats).toEqual([{ written: 1 }]);
  });

  it('fails with the refusal, not with what the compactor threw after it', async () => {
    const attempt = withCheckedProgress(
      job,
      () => {},
      async (heartbeat) => {
        try {
          heartbeat({ n: 1n });
        } catch {
          throw new Error('wrapped by the plug-in');
        }
      },
    );
    await expect(attempt).rejects.toThrow(ProgressRefusedError);
  });
});

describe("the reference compactor's progress, which the activity does not check", () => {
  /**
   * The largest progress of a job over `inputs` at `fanIn`: every intermediate run finished, 999 parts each, a 1 KiB
   * last key.
   */
  const largest = (inputs: number, fanIn: number): number =>
    Buffer.byteLength(
      JSON.stringify({
        version: 2,
        segmentsFinished: 99_999,
        tombstoneSegmentsFinished: 99_999,
        lastKey: 'k'.repeat(1024),
        recordsOut: 1e12,
        bytesOut: 1e15,
        runs: { fanIn, parts: planMerge(inputs, fanIn).runs.map(() => 999) },
      } satisfies CompactionProgress),
    );

  it('fits the limit at the default fan-in even for 100,000 inputs, and would pass it only at a fan-in of 2 with tens of thousands', () => {
    expect(largest(100_000, resolveSettings({}).maxFanIn)).toBeLessThan(8 * 1024);
    expect(largest(1000, 2)).toBeLessThan(MAX_PROGRESS_BYTES);
    // Why it is exempt: refusing it would fail, after its runs, a job the package's own settings allow.
    expect(largest(20_000, 2)).toBeGreaterThan(MAX_PROGRESS_BYTES);
  });
});
