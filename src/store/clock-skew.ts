/**
 * How far a store's clock is from ours, judged from one write: pure, so the store check and the
 * collector workflow (whose clock is the Temporal server's) judge alike.
 */

/**
 * S3's `LastModified` has one-second resolution: a time truncated to the second is up to this much earlier than the
 * write.
 */
export const LAST_MODIFIED_RESOLUTION_MS = 1000;

/**
 * The least skew a write's `LastModified` proves against the clock that read `sentAt` before the
 * write and `answeredAt` after it: ahead when it is later than the answer, behind when even its second
 * ended before the request was sent. Round trips make it a lower bound only. Whether it is within
 * `allowedMs`, and a line that says so.
 */
export function clockSkew(
  lastModified: Date | undefined,
  sentAt: number,
  answeredAt: number,
  allowedMs: number,
): [boolean, string] {
  if (!lastModified) return [false, 'the store gave no LastModified: the collector would take every object for young'];
  const at = lastModified.getTime();
  const ahead = at - answeredAt;
  const behind = sentAt - (at + LAST_MODIFIED_RESOLUTION_MS);
  const skew = Math.max(0, ahead, behind);
  const side =
    skew === 0
      ? 'between sending and answer by the local clock'
      : `${ahead > 0 ? `${ahead} ms ahead of` : `${behind} ms behind`} the local clock`;
  return [skew <= allowedMs, `LastModified ${lastModified.toISOString()}: ${side} (allowed ${allowedMs} ms)`];
}
