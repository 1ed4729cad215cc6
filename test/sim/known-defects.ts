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

export const KNOWN_DEFECTS: readonly KnownDefect[] = [
  {
    id: 'lost-root',
    issue: '41.5',
    title: 'a deleted root is re-created from empty by the next writer; the collector then deletes what the old root named',
    // The root cause of whatever breaks after it: every later violation is its consequence.
    matches: (_, { invariants }) => invariants.rootRecreatedEvent !== undefined,
  },
  {
    id: 'registration-twice',
    issue: '41.4',
    title: "a registration whose answer was lost is applied twice (the SDK retry's 412 taken for a lost race): the group names its segment twice",
    matches: (v) => v.invariant === 'groupsNameEachSegmentOnce' && ['writer', 'service'].includes(evidence<string>(v, 'party') ?? ''),
  },
  {
    id: 'two-collectors',
    issue: '41.6',
    title: 'two collector passes own one claimed prefix (a claim writes the same bytes whoever claims; a claimer meeting `reaping` takes it as its own)',
    matches: (v) => v.invariant === 'atMostOneOwner' && (evidence<string[]>(v, 'owners') ?? []).every((owner) => owner !== 'job'),
  },
  {
    id: 'late-writer-cas',
    issue: '41.1',
    title: "a writer's root CAS sent within its budget lands late and registers a segment the collector deleted as a lost write",
    matches: (v, { timing }) => {
      const namer = evidence<Namer>(v, 'namer');
      return v.invariant === 'rootNamesOnlyExistingObjects' && namer !== undefined && ['writer', 'service'].includes(namer.kind ?? '') && namer.sentAt !== undefined && namer.at - namer.sentAt > timing.operationDeadlineMs;
    },
  },
  {
    id: 'late-retirement',
    issue: '41.2',
    title: "a root write that retires segments lands more than T after the clock it retired them at: readers' promise cut short",
    matches: (v, { timing }) => {
      const retiredBy = evidence<Retirement>(v, 'retiredBy');
      return v.invariant === 'readersReadWithinPromise' && retiredBy !== undefined && retiredBy.landedLateMs > timing.gcMinGraceMs;
    },
  },
  {
    id: 'older-write-after-compaction',
    issue: '41.3',
    title: 'a write older than a tombstone registers after the publication that dropped the tombstone: the deleted key is back',
    matches: (v, { invariants }) => {
      if (v.invariant !== 'readerViewMatchesModel') return false;
      const { expected, expectedWrite, seenWrite } = (v.evidence ?? {}) as Partial<ViewError>;
      const group = evidence<string>(v, 'group');
      if (!expected || !('tombstone' in expected) || expectedWrite?.landedEvent === undefined || seenWrite?.landedEvent === undefined || !group) return false;
      const dropped = droppedAt(invariants, group, expected.key, expected.seq, expectedWrite.landedEvent);
      return dropped !== undefined && dropped.party === 'job' && seenWrite.landings.some((landing) => landing.event > dropped.event);
    },
  },
];

/** The known defect `violation` is, if any. */
export function knownDefectOf(violation: Violation, world: { readonly invariants: Invariants; readonly timing: Timing }, known: readonly KnownDefect[] = KNOWN_DEFECTS): KnownDefect | undefined {
  return known.find((defect) => defect.matches(violation, world));
}
