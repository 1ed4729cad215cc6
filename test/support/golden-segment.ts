/**
 * The records of the golden segment files (test/golden/segment-v1.mseg; segment-v2.mseg holds these and {@link
 * GOLDEN_V2_EXTRA}).
 */
import type { SegmentRecord } from '../../src/segments';

export const GOLDEN_RECORDS: readonly SegmentRecord[] = [
  { key: 'a', seq: 1, value: 'one' },
  { key: 'b', seq: 7, tombstone: true },
  { key: 'c', seq: 3, value: '' },
  { key: 'd/é', seq: 9, value: 'line\nbreak "quoted" \u2028 ✓' },
  { key: 'e', seq: 4, value: 'x'.repeat(300) },
];

/** The last record of the v2 golden file: the largest seq a varint of it must carry. */
export const GOLDEN_V2_EXTRA: SegmentRecord = { key: 'f', seq: 2 ** 53 - 1, value: 'the largest seq' };
