/** The heartbeats of one activity attempt: what to send, and when. */
export interface AttemptBeats {
  /** Asks for a beat: sent at once when the wait since the last (or before the first) is up, else at its end. */
  readonly beat: () => void;
  /** Sends at once (a failing attempt's last details, which the next attempt reads). */
  readonly now: () => void;
  /**
   * Ends the attempt's beats. A beat still deferred is sent when the attempt failed, since the progress it
   * carries is what the next attempt resumes from; after a success nothing reads it.
   */
  readonly end: (failed: boolean) => void;
}

/**
 * How far apart two heartbeats of one attempt are at least. Temporal's SDK encodes the details of every heartbeat it
 * is handed (a payload conversion each) and then sends at most one per throttle interval (0.8 of the heartbeat
 * timeout, seconds), so beats asked for more often cost CPU and carry nothing more to the server.
 */
export const BEAT_GAP_MS = 250;

/**
 * Heartbeats through `send`, none before `firstAtMs` and none within `gapMs` of the last: a beat asked for sooner
 * is sent when the wait is up, as one however many were asked for (`send` reads the latest details when it runs).
 */
export function spacedBeats(send: () => void, { firstAtMs = Date.now(), gapMs = BEAT_GAP_MS } = {}): AttemptBeats {
  let nextAtMs = firstAtMs;
  let deferred: NodeJS.Timeout | undefined;
  const now = () => {
    clearTimeout(deferred);
    deferred = undefined;
    nextAtMs = Date.now() + gapMs;
    send();
  };
  const beat = () => {
    const waitMs = nextAtMs - Date.now();
    if (waitMs <= 0) now();
    else deferred ??= setTimeout(now, waitMs);
  };
  const end = (failed: boolean) => {
    if (failed && deferred !== undefined) now();
    clearTimeout(deferred);
  };
  return { beat, now, end };
}

/**
 * Heartbeats through `send` from one beat interval after the attempt started on: Temporal's SDK sends
 * an attempt's first heartbeat at once and throttles the rest, and a first one at once would carry
 * nothing a retry needs (the attempt's input and the last attempt's details already hold it), so
 * deferring it saves a billable action per attempt. A beat asked for earlier is sent when the interval
 * is up, so the first reaches Temporal within the interval that spaces every later pair, or when the
 * attempt fails first. Later beats are {@link BEAT_GAP_MS} apart at least.
 */
export const beatsAfterFirstInterval = (send: () => void, intervalMs: number): AttemptBeats =>
  spacedBeats(send, { firstAtMs: Date.now() + intervalMs });
