/**
 * The metadata service's writer for the package's formats: writes sorted input segments and registers
 * them in the namespace root within the writer budget. The demo and the tests seed groups with it too.
 */
import { timingFromEnv } from '../config/environment';
import { quoted, TypedError } from '../errors';
import { familyGroup, inputSegmentKey, namespaceId, newSegmentId, type FamilyGroup, type NamespaceId } from '../keys';
import { updateRoot } from '../protocol/root-io';
import { stopwatch } from '../protocol/stopwatch';
import { addSegments, jsonRootCodec } from '../root';
import {
  asSegmentRecord,
  DEFAULT_SEGMENT_FORMAT_VERSION,
  encodeSegment,
  InvalidSegmentInputError,
  recordProblem,
  SEGMENT_EXTENSION,
  type SegmentFormatVersion,
  type SegmentRecord,
} from '../segments';
import type { GroupRef } from '../reader';
import type { ObjectStore } from '../store';

/** Records the writer refuses: defined beside the rule they break (src/segments/records.ts), thrown here. */
export { InvalidSegmentInputError };

/**
 * The writer budget was spent before a root CAS could be sent: the segment was written but not
 * registered, and this writer sends nothing more for it. It is an ordinary lost write, condemned and
 * deleted after the lost-write grace; write the records again as a new segment.
 */
export class WriterBudgetExceededError extends TypedError {
  readonly failureType = 'WriterBudgetExceeded';
  constructor(
    readonly segmentKey: string,
    readonly spentMs: number,
    readonly budgetMs: number,
  ) {
    super(
      `segment ${segmentKey} not registered: ${Math.round(spentMs)} ms since its PUT started exceeds the writer budget of ${budgetMs} ms; ` +
        'it is a lost write the collector deletes after the lost-write grace',
    );
  }
}

/** How long {@link writeInputSegment} may take to register its segment, and the clock that measures it. */
export interface WriterOptions {
  /**
   * From before the segment PUT until each root CAS is sent (spec 6a.4): it bounds the work spent on
   * a registration, not its safety (the root fences that, spec 6c). Defaults to
   * `COMPACTION_WRITER_BUDGET_MS` of the environment (15 min unset).
   */
  readonly writerBudgetMs?: number;
  /**
   * Milliseconds since the writer started, for the budget; a {@link stopwatch} started before the PUT unless a test
   * brings its own.
   */
  readonly elapsedMs?: () => number;
  /** The writer's wall clock, for its root writes (spec 6a.1); `Date.now` unless a test brings its own. */
  readonly clockMs?: () => number;
  /** The segment format to write; `DEFAULT_SEGMENT_FORMAT_VERSION` unless given (a compactor reads both). */
  readonly segmentFormat?: SegmentFormatVersion;
}

/**
 * Encodes the records sorted by key, or refuses them: every record is checked first with the rule
 * of every format the package writes (`recordProblem`: well-formed text, the record bound), whatever
 * `version` is, so the writer never stores what a later compaction, into outputs of any format and
 * through runs of format 2, would refuse (a group stuck on a record), nor text an encoding would change.
 */
function encodeInputSegment(
  ns: NamespaceId,
  group: FamilyGroup,
  records: readonly SegmentRecord[],
  version: SegmentFormatVersion,
): Uint8Array {
  const refuse = (reason: string, recordIndex?: number) =>
    new InvalidSegmentInputError({ namespaceId: ns, group, reason, recordIndex });
  if (!Array.isArray(records) || records.length === 0) throw refuse('no records: an input segment holds at least one');
  const keyOf = (record: unknown): unknown =>
    typeof record === 'object' && record !== null ? (record as { key?: unknown }).key : undefined;
  const keyless = records.findIndex((r) => typeof keyOf(r) !== 'string');
  if (keyless >= 0) throw refuse(`record ${keyless} has no string key`, keyless);
  const malformed = records.findIndex((r) => asSegmentRecord(r) === undefined);
  if (malformed >= 0) {
    const record = records[malformed];
    throw refuse(
      `record ${malformed} (key ${JSON.stringify(keyOf(record))}) is not a segment record: ${JSON.stringify(record)}; ` +
        'it needs a non-empty key, a whole seq of 0 or more, and either a string value or tombstone: true, nothing else',
      malformed,
    );
  }
  for (const [i, record] of records.entries()) {
    const problem = recordProblem(record);
    if (problem !== undefined) throw refuse(`record ${i} (key ${quoted(record.key)}) ${problem}`, i);
  }
  const order = records
    .map((_, i) => i)
    .sort((a, b) => (records[a]!.key < records[b]!.key ? -1 : records[a]!.key > records[b]!.key ? 1 : a - b));
  for (let i = 1; i < order.length; i++) {
    const [first, second] = [order[i - 1]!, order[i]!];
    if (records[first]!.key === records[second]!.key) {
      throw refuse(
        `records ${first} and ${second} both have key ${JSON.stringify(records[first]!.key)}: keys must be unique`,
        second,
      );
    }
  }
  return encodeSegment(
    order.map((i) => records[i]!),
    version,
  );
}

/**
 * Writes one input segment of the reference format (`.mseg` of `options.segmentFormat`, records sorted by key here) and
 * adds it
 * to the group in the reference root (`root.json`); returns its key.
 * Ids and records are all checked before the first request: on refusal nothing is written.
 * Registration is fenced by the root (spec 6c), whatever the delays: a segment the collector
 * condemned as a lost write, or one holding a record at or below the group's sequence floor, is
 * refused (`SegmentLostError`, `SequenceFloorError`); write its records again. A
 * registration whose reply was lost is found in the root and not made twice. The writer budget only
 * bounds the work: past it nothing more is sent ({@link WriterBudgetExceededError}).
 */
export async function writeInputSegment(
  store: ObjectStore,
  { namespaceId: ns, group }: GroupRef,
  records: readonly SegmentRecord[],
  options: WriterOptions = {},
): Promise<string> {
  const namespace = namespaceId(ns);
  const validGroup = familyGroup(group);
  const bytes = encodeInputSegment(
    namespace,
    validGroup,
    records,
    options.segmentFormat ?? DEFAULT_SEGMENT_FORMAT_VERSION,
  );
  const minSeq = Math.min(...records.map((r) => r.seq));
  const budgetMs = options.writerBudgetMs ?? timingFromEnv().writerBudgetMs;
  // The budget runs from before the PUT: the store may date the segment as early as its start.
  const elapsedMs = options.elapsedMs ?? stopwatch();
  const startedAt = elapsedMs();
  const key = inputSegmentKey(namespace, newSegmentId(), SEGMENT_EXTENSION);
  await store.put(key, bytes);
  // Checked right before each CAS is sent, lost races included: past it the work is not worth finishing.
  const withinBudget = () => {
    const spent = elapsedMs() - startedAt;
    if (spent > budgetMs) throw new WriterBudgetExceededError(key, spent, budgetMs);
  };
  await updateRoot(store, namespace, (root) => addSegments(root, validGroup, [key]), {
    codec: jsonRootCodec,
    beforeWrite: withinBudget,
    minSeqOf: (registered) => (registered === key ? minSeq : undefined),
    ...(options.clockMs && { clockMs: options.clockMs }),
  });
  return key;
}
