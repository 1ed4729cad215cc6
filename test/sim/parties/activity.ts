/**
 * Temporal's part, played by the simulation: an activity's attempts under its retry policy, each
 * attempt a promise of the party; an attempt past its start-to-close timeout is abandoned, not
 * stopped (its requests may still land), and the next attempt runs beside it, as a Temporal worker
 * leaves an unheartbeated activity running after its timeout.
 */
import { ACTIVITY_BACKOFF, backoffDelayMs } from '../../../src/config/retry';
import { TypedError } from '../../../src/errors';
import { PartyGaveUp, type Party } from '../sim';

export interface ActivityPolicy {
  readonly attempts: number;
  /** An attempt still running this long after it started is timed out and retried. */
  readonly startToCloseMs?: number;
  /** Real milliseconds per simulated millisecond of the backoff: the timings are shrunk, so is Temporal's backoff. */
  readonly backoffScale: number;
}

/**
 * Whether Temporal's retry policy retries `err`: a typed error by its own rule; anything else is a bug, and ends the
 * party.
 */
const retried = (err: unknown): boolean => err instanceof TypedError && err.retryable;

class TimedOut {}

/** Runs `attempt` (given its attempt number, from 1) until it succeeds, fails for good, or its attempts are spent. */
export async function runActivity<T>(
  party: Party,
  name: string,
  policy: ActivityPolicy,
  attempt: (n: number) => Promise<T>,
): Promise<T> {
  let last: unknown;
  for (let n = 1; n <= policy.attempts; n++) {
    const running = attempt(n);
    // An abandoned attempt runs on: its failure is nobody's to handle.
    running.catch(() => undefined);
    let outcome: { ok: T } | { err: unknown };
    if (policy.startToCloseMs === undefined)
      outcome = await running.then(
        (ok) => ({ ok }),
        (err: unknown) => ({ err }),
      );
    else {
      const timer = new AbortController();
      const timeout = party.sleep(policy.startToCloseMs, timer.signal).then(() => ({ err: new TimedOut() }));
      outcome = await Promise.race([
        running.then(
          (ok) => ({ ok }),
          (err: unknown) => ({ err }),
        ),
        timeout,
      ]);
      timer.abort();
    }
    if ('ok' in outcome) return outcome.ok;
    last = outcome.err;
    if (last instanceof TimedOut) party.log(`${name} attempt ${n} timed out and runs on abandoned`);
    else if (!retried(last)) throw last;
    else party.log(`${name} attempt ${n} failed: ${(last as Error).message.split('\n')[0]}`);
    await party.sleep(Math.max(1, Math.round(backoffDelayMs(ACTIVITY_BACKOFF, n - 1) * policy.backoffScale)));
  }
  throw new PartyGaveUp(
    `${party.name}: ${name} gave up after ${policy.attempts} attempts (${last instanceof TimedOut ? 'timed out' : (last as Error).message.split('\n')[0]})`,
  );
}
