/**
 * The defects the simulator finds on today's code that are known and being fixed (issue 41, "every
 * deletion fenced by the root"), each recognised by the invariant it breaks and the evidence that
 * tells it from any other cause. Until their fix lands, a scenario whose first violation is one of
 * them counts as that defect, not as a failure; everything else fails the run. The CI test also
 * expects each to be found, so this list cannot outlive its fix unnoticed: once the fix is merged,
 * its entry goes and the simulator holds the code to the invariant again.
 */
import type { Timing } from '../../src/config';
import type { Invariants, Namer, Retirement } from './invariants';
import type { ViewError } from './model';
import type { Violation } from './sim';

export interface KnownDefect {
  readonly id: string;
  /** Where it is tracked. */
  readonly issue: string;
  readonly title: string;
  /** Whether `violation`, the first of its scenario, is this defect. */
  readonly matches: (violation: Violation, world: { readonly invariants: Invariants; readonly timing: Timing }) => boolean;
}

const evidence = <T>(violation: Violation, name: string): T | undefined => violation.evidence?.[name] as T | undefined;

/** The first root version, after `afterEvent`, in which no segment of `group` holds the record (`key`, `seq`): where a publication dropped it. */
function droppedAt(invariants: Invariants, group: string, key: string, seq: number, afterEvent: number): { event: number; party?: string } | undefined {
  for (const version of invariants.roots) {
    if (version.event <= afterEvent || !version.root) continue;
    const holds = (version.root.groups[group] ?? []).some((segment) => invariants.segmentRecords.get(segment)?.some((r) => r.key === key && r.seq === seq));
    if (!holds) return { event: version.event, party: version.request?.party.kind };
  }
  return undefined;
}

export const KNOWN_DEFECTS: readonly KnownDefect[] = [];

/** The known defect `violation` is, if any. */
export function knownDefectOf(violation: Violation, world: { readonly invariants: Invariants; readonly timing: Timing }, known: readonly KnownDefect[] = KNOWN_DEFECTS): KnownDefect | undefined {
  return known.find((defect) => defect.matches(violation, world));
}
