/**
 * The worker process's V8 heaps: how far the old generation grows before a full collection, and how large the young
 * generation may grow. V8's flags are process-wide; a flag given to node itself is left as given.
 */
import { setFlagsFromString } from 'node:v8';
import { PROCESS_SETTINGS, settingFromEnv } from '../config';

/** What {@link tightenHeap} sets: 0 leaves V8's own. */
export interface HeapLimits {
  /** `--heap-growing-percent`: read at every full collection, so it applies from the next one on. */
  readonly growthPercent: number;
  /** `--max-semi-space-size`: read when a heap is set up, it bounds the isolates created later (workflow threads). */
  readonly semiSpaceMib: number;
}

const FLAGS = { growthPercent: '--heap-growing-percent', semiSpaceMib: '--max-semi-space-size' } as const;

/** Sets V8's flags for the heaps of a worker process from `limits` (by default the environment's settings). */
export function tightenHeap(
  limits: HeapLimits = {
    growthPercent: settingFromEnv(PROCESS_SETTINGS, 'heapGrowthPercent'),
    semiSpaceMib: settingFromEnv(PROCESS_SETTINGS, 'semiSpaceMib'),
  },
): void {
  const given = [...process.execArgv, ...(process.env.NODE_OPTIONS ?? '').split(/\s+/)].map((arg) =>
    arg.replaceAll('_', '-'),
  );
  for (const [limit, flag] of Object.entries(FLAGS) as [keyof HeapLimits, string][]) {
    if (limits[limit] > 0 && !given.some((arg) => arg.startsWith(flag))) setFlagsFromString(`${flag}=${limits[limit]}`);
  }
}
