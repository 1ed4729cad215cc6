/** What every party of a scenario shares: the simulation, the model, the invariants and the settings they run under. */
import type { CompactionSettings, Timing } from '../../src/config';
import { ACTIVITY_BACKOFF, backoffDelayMs } from '../../src/config/retry';
import type { NamespaceId } from '../../src/keys';
import type { Invariants } from './invariants';
import type { Model } from './model';
import type { Sim } from './sim';

export interface Env {
  readonly sim: Sim;
  readonly model: Model;
  readonly invariants: Invariants;
  readonly ns: NamespaceId;
  readonly timing: Timing;
  readonly settings: CompactionSettings;
  /** Real milliseconds per simulated one: Temporal's backoff shrinks with the timings. */
  readonly backoffScale: number;
  /** Attempts of a short activity: enough to span a lease expiry of backoff, as the workflow's `attemptsSpanning`. */
  readonly shortAttempts: number;
  /** The wait before retry `n` (from 1), on the activities' backoff, shrunk. */
  retryDelayMs(n: number): number;
}

export const retryDelayOf =
  (backoffScale: number) =>
  (n: number): number =>
    Math.max(1, Math.round(backoffDelayMs(ACTIVITY_BACKOFF, Math.max(0, n - 1)) * backoffScale));
