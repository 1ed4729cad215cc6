/**
 * Heartbeats through `send` from one beat interval after the attempt started on: Temporal's SDK sends
 * an attempt's first heartbeat at once and throttles the rest, and a first one at once would carry
 * nothing a retry needs (the attempt's input and the last attempt's details already hold it), so
 * deferring it saves a billable action per attempt. A beat asked for earlier is sent when the interval
 * is up, so the first reaches Temporal within the interval that spaces every later pair; `now` sends
 * at once (a failing attempt's last details, which the next attempt reads).
 */
export function beatsAfterFirstInterval(send: () => void, intervalMs: number): { beat: () => void; now: () => void; stop: () => void } {
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
  return { beat, now, stop: () => clearTimeout(deferred) };
}
