/** The streak of failed attempts that ends a job: counted only while the same error recurs with no progress between. */
import { ApplicationFailure } from '@temporalio/common';
import { describe, expect, it } from 'vitest';
import { toFailure } from '../../src/activities/failures';
import { MAX_RECURRING_ATTEMPTS, nextStreak, RecurringFailureError } from '../../src/compactor';
import { jobId, namespaceId } from '../../src/keys';

const job = { namespaceId: namespaceId('streak'), jobId: jobId('cmp_0123456789abcdef0123456789abcdef') };

describe('a failure streak', () => {
  it('grows by one for each attempt that failed with the same error', () => {
    let streak = nextStreak(undefined, 'RangeError: record "k7" is too long');
    for (let i = 2; i <= MAX_RECURRING_ATTEMPTS; i++)
      streak = nextStreak(streak, 'RangeError: record "k7" is too long');
    expect(streak.attempts).toBe(MAX_RECURRING_ATTEMPTS);
  });

  it('starts again at one on another error, or after progress (no previous streak)', () => {
    const two = nextStreak(nextStreak(undefined, 'Error: a'), 'Error: a');
    expect(nextStreak(two, 'Error: b')).toEqual({ error: 'Error: b', attempts: 1 });
    expect(nextStreak(undefined, 'Error: a')).toEqual({ error: 'Error: a', attempts: 1 });
  });

  it('ends the job as a non-retryable RecurringFailure naming the job, the count and the error', () => {
    const failure = toFailure(
      new RecurringFailureError(job, { error: 'RangeError: record "k7" is too long', attempts: 3 }),
    ) as ApplicationFailure;
    expect([failure.type, failure.nonRetryable]).toEqual(['RecurringFailure', true]);
    expect(failure.message).toContain(job.jobId);
    expect(failure.message).toContain('failed 3 attempts in a row');
    expect(failure.message).toContain('record "k7"');
  });
});
