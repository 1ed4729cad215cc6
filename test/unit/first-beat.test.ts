/**
 * The work's heartbeats: none in an attempt's first beat interval, one then if any was asked for, at once when told.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { beatsAfterFirstInterval } from '../../src/activities/first-beat';

describe('an attempt heartbeats from one beat interval on', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it('sends none in the first interval, then the beats asked for there as one, then every beat asked for', () => {
    const sent: number[] = [];
    const beats = beatsAfterFirstInterval(() => sent.push(Date.now()), 5000);
    const start = Date.now();
    beats.beat();
    vi.advanceTimersByTime(2000);
    beats.beat();
    vi.advanceTimersByTime(2999);
    expect(sent).toEqual([]);
    vi.advanceTimersByTime(1);
    expect(sent).toEqual([start + 5000]);
    beats.beat();
    beats.beat();
    expect(sent).toHaveLength(3);
  });

  it('sends nothing when no beat was asked for, nor after a successful end', () => {
    const sent: number[] = [];
    const quiet = beatsAfterFirstInterval(() => sent.push(1), 5000);
    vi.advanceTimersByTime(10_000);
    const succeeded = beatsAfterFirstInterval(() => sent.push(2), 5000);
    succeeded.beat();
    succeeded.end(false);
    vi.advanceTimersByTime(10_000);
    expect(sent).toEqual([]);
    quiet.end(false);
  });

  it('sends the deferred beat at once when the attempt fails in its first interval: the next attempt resumes from it', () => {
    const sent: number[] = [];
    const beats = beatsAfterFirstInterval(() => sent.push(Date.now()), 5000);
    const start = Date.now();
    beats.beat();
    vi.advanceTimersByTime(1500);
    beats.end(true);
    vi.advanceTimersByTime(10_000);
    expect(sent).toEqual([start + 1500]);
  });

  it('sends at once when told, in the first interval too, and no deferred beat after it', () => {
    const sent: number[] = [];
    const beats = beatsAfterFirstInterval(() => sent.push(Date.now()), 5000);
    const start = Date.now();
    beats.beat();
    vi.advanceTimersByTime(1000);
    beats.now();
    vi.advanceTimersByTime(10_000);
    expect(sent).toEqual([start + 1000]);
  });
});
