/**
 * An attempt's heartbeats: none in a compaction attempt's first beat interval, one then if any was asked for, at once
 * when told; never two within the gap, the beats asked for inside it sent as one at its end.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { BEAT_GAP_MS, beatsAfterFirstInterval, spacedBeats } from '../../src/activities/beats';

describe('an attempt heartbeats from one beat interval on', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it('sends none in the first interval, then the beats asked for there as one, then one a gap', () => {
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
    vi.advanceTimersByTime(BEAT_GAP_MS);
    beats.beat();
    beats.beat();
    expect(sent).toEqual([start + 5000, start + 5000 + BEAT_GAP_MS]);
    vi.advanceTimersByTime(BEAT_GAP_MS);
    expect(sent).toEqual([start + 5000, start + 5000 + BEAT_GAP_MS, start + 5000 + 2 * BEAT_GAP_MS]);
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

describe('spaced beats', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it('sends the first at once, then the many asked for within a gap as one with the latest details at its end', () => {
    const sent: number[] = [];
    let details = 0;
    const beats = spacedBeats(() => sent.push(details));
    details = 1;
    beats.beat();
    for (details = 2; details <= 100; details++) beats.beat();
    details = 100;
    expect(sent).toEqual([1]);
    vi.advanceTimersByTime(BEAT_GAP_MS - 1);
    expect(sent).toEqual([1]);
    vi.advanceTimersByTime(1);
    expect(sent).toEqual([1, 100]);
    vi.advanceTimersByTime(10 * BEAT_GAP_MS);
    expect(sent).toEqual([1, 100]);
    beats.end(false);
  });

  it('sends a beat still deferred when the attempt fails, none after it succeeds', () => {
    const sent: string[] = [];
    const failed = spacedBeats(() => sent.push('failed'));
    const succeeded = spacedBeats(() => sent.push('succeeded'));
    for (const beats of [failed, succeeded]) [1, 2].forEach(() => beats.beat());
    failed.end(true);
    succeeded.end(false);
    vi.advanceTimersByTime(10 * BEAT_GAP_MS);
    expect(sent).toEqual(['failed', 'succeeded', 'failed']);
  });
});
