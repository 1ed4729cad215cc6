/** The heartbeats of one compaction attempt: what to send, and when. */
export interface AttemptBeats {
  /**
   * Asks for a beat: sent at once from one beat interval after the attempt started, at the end of that interval before
   * it.
   */
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
 * Heartbeats through `send` from one beat interval after the attempt started on: Temporal's SDK sends
 * an attempt's first heartbeat at once and throttles the rest, and a first one at once would carry
 * nothing a retry needs (the attempt's input and the last attempt's details already hold it), so
 * deferring it saves a billable action per attempt. A beat asked for earlier is sent when the interval
 * is up, so the first reaches Temporal within the interval that spaces every later pair, or when the
 * attempt fails first.
 */
export function beatsAfterFirstInterval(send: () => void, intervalMs: number): AttemptBeats {
  const firstAtMs = Date.now() + intervalMs;
  let deferred: NodeJS.Timeout | undefined;
  const now = () => {
    clearTimeout(deferred);
    deferred = undefined;
    send();
  };
  const beat = () => {
    const waitMs = firstAtMs - Date.now();
    if (waitMs <= 0) now();
    else deferred ??= setTimeout(now, waitMs);
  };
  const end = (failed: boolean) => {
    if (failed && deferred !== undefined) now();
    clearTimeout(deferred);
  };
  return { beat, now, end };
}
