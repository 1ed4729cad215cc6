/** How budgets measure elapsed time. */
import { performance } from 'node:perf_hooks';

/**
 * Milliseconds since the call, for a budget: the larger of the monotonic and the wall-clock elapsed
 * time. A monotonic clock may not count a host suspend (a paused VM, a laptop lid) while the store's
 * clock does; the wall clock may be stepped back. Taking the larger, neither shortens a budget.
 */
export function stopwatch(): () => number {
  const [monotonicAt, wallAt] = [performance.now(), Date.now()];
  return () => Math.max(performance.now() - monotonicAt, Date.now() - wallAt);
}
