/**
 * The defects the simulator finds on today's code that are known and reported, each recognised by
 * the invariant it breaks and the evidence that tells it from any other cause. Until its fix lands,
 * a scenario whose first violation is one of them counts as that defect, not as a failure;
 * everything else fails the run. The CI test also expects each to be found, so this list cannot
 * outlive its fix unnoticed: once the fix is merged, its entry goes and the simulator holds the code
 * to the invariant again.
 */
import type { Timing } from '../../src/config';
import type { Invariants } from './invariants';
import type { Violation } from './sim';

export interface KnownDefect {
  readonly id: string;
  /** Where it is tracked. */
  readonly issue: string;
  readonly title: string;
  /** Whether `violation`, the first of its scenario, is this defect. */
  readonly matches: (
    violation: Violation,
    world: { readonly invariants: Invariants; readonly timing: Timing },
  ) => boolean;
}

/** None at present: every violation fails the run. */
export const KNOWN_DEFECTS: readonly KnownDefect[] = [];

/** The known defect `violation` is, if any. */
export function knownDefectOf(
  violation: Violation,
  world: { readonly invariants: Invariants; readonly timing: Timing },
  known: readonly KnownDefect[] = KNOWN_DEFECTS,
): KnownDefect | undefined {
  return known.find((defect) => defect.matches(violation, world));
}
