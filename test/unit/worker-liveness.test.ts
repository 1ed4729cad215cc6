/**
 * Which pollers of a task queue are live workers, judged from the pollers the server lists and the workers' heartbeats.
 */
import { describe, expect, it } from 'vitest';
import { describeWorkers, judgePollers, LIVE_POLLER_WINDOW_MS } from '../../src/client/workers';

const NOW = 10_000_000;
const poller = (identity: string, agoMs: number) => ({ identity, lastAccessMs: NOW - agoMs });

describe('judgePollers', () => {
  it('without heartbeats, a poller seen within the window is live and one seen before it is not', () => {
    expect(judgePollers([poller('a', 1_000), poller('b', LIVE_POLLER_WINDOW_MS + 1)], [], NOW)).toEqual({
      live: ['a'],
      stopped: [],
    });
  });

  it('a poller whose worker said it stopped after that poll is not live, and is named with the time it stopped', () => {
    const judged = judgePollers(
      [poller('a', 6_000)],
      [{ identity: 'a', running: false, heartbeatMs: NOW - 5_000 }],
      NOW,
    );
    expect(judged).toEqual({ live: [], stopped: [{ identity: 'a', how: 'stopped', atMs: NOW - 5_000 }] });
    expect(describeWorkers({ ...judged, heartbeats: true }, NOW)).toBe('no worker polls it: a stopped 5 s ago');
  });

  it('a worker under the same identity that polled after the old one stopped is live', () => {
    expect(
      judgePollers([poller('a', 1_000)], [{ identity: 'a', running: false, heartbeatMs: NOW - 20_000 }], NOW),
    ).toEqual({ live: ['a'], stopped: [] });
  });

  it('a worker that still says running but missed three heartbeats is silent (a crash); one that polled since is live', () => {
    const beat = { identity: 'a', running: true, heartbeatMs: NOW - 40_000, intervalMs: 10_000 };
    expect(judgePollers([poller('a', 41_000)], [beat], NOW)).toEqual({
      live: [],
      stopped: [{ identity: 'a', how: 'silent', atMs: NOW - 40_000 }],
    });
    expect(judgePollers([poller('a', 1_000)], [beat], NOW).live).toEqual(['a']);
    // Two missed heartbeats are not yet a crash; an interval not known (one heartbeat so far) never judges.
    expect(judgePollers([poller('a', 25_000)], [{ ...beat, heartbeatMs: NOW - 25_000 }], NOW).live).toEqual(['a']);
    expect(judgePollers([poller('a', 41_000)], [{ ...beat, intervalMs: undefined }], NOW).live).toEqual(['a']);
  });

  it('a worker that stopped and is no longer listed as a poller is still named among the stopped, for five minutes', () => {
    expect(judgePollers([], [{ identity: 'a', running: false, heartbeatMs: NOW - 5_000 }], NOW).stopped).toEqual([
      { identity: 'a', how: 'stopped', atMs: NOW - 5_000 },
    ]);
    expect(judgePollers([], [{ identity: 'a', running: false, heartbeatMs: NOW - 6 * 60_000 }], NOW).stopped).toEqual(
      [],
    );
  });

  it('says what it could not tell: with pollers and no heartbeats listed, a stopped worker may still count', () => {
    expect(describeWorkers({ live: ['a'], stopped: [], heartbeats: false }, NOW)).toBe(
      'polled by a (this server lists no worker heartbeats: a worker stopped less than 75 s ago still counts)',
    );
    expect(
      describeWorkers(
        { live: [], stopped: [], heartbeats: true, lastPoller: { identity: 'b', seenAtMs: NOW - 90_000 } },
        NOW,
      ),
    ).toBe('no worker polls it: the last one, b, polled 90 s ago');
  });
});
