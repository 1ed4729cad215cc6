/**
 * The formats the integration tests run over, as `describe.each(TEST_FORMATS)`: the reference
 * (`.mseg` segments, `root.json`: the worker's defaults) writing segment format v1, and writing v2 and the plug-in
 * format of binary-format.ts
 * (`.lpb` segments, a text root). A test written against a {@link TestFormat} makes the same
 * assertions on both, with one worker per format.
 */
import { join } from 'node:path';
import {
  jsonRootCodec,
  referenceCompactor,
  writeInputSegment,
  type Compactor,
  type ObjectStore,
  type RootCodec,
  type SegmentRecord,
} from '../../src/index';
import type { CompactionProgress } from '../../src/compactor';
import { SEGMENT_EXTENSION, type SegmentFormatVersion } from '../../src/segments';
import {
  BINARY_EXTENSION,
  binaryCompactor,
  decodeBinarySegment,
  sampleBinaryInputs,
  textRootCodec,
  writeBinaryInputs,
  type BinaryRecord,
} from './binary-format';
import { makeInputs, readRecords, referenceMerge, writeInputs } from './records';

/**
 * A record as a reader sees it in either format; `value` null is a tombstone. `seq` is kept: it tells which version a
 * merge kept.
 */
export interface FormatRecord {
  readonly key: string;
  readonly seq: number;
  readonly value: string | null;
}

export interface TestFormat {
  readonly name: string;
  /** The worker's plug-ins for this format (`startTestWorker(…, { ...format.plugins })`). */
  readonly plugins: { readonly compactor: Compactor; readonly rootCodec: RootCodec };
  /**
   * The environment a worker process (src/worker/main.ts) needs to run this format: its format module, or nothing for
   * the defaults.
   */
  readonly workerEnv: Readonly<Record<string, string>>;
  /** The extension of its segment keys. */
  readonly extension: string;
  /** For the reference format: the segment format version its compactor writes (checked on the outputs). */
  readonly segmentFormat?: SegmentFormatVersion;
  /**
   * How many of a job's outputs are stored, by the progress its compactor heartbeated; finished outputs are never
   * rewritten.
   */
  outputsFinished(progress: unknown): number;
  /**
   * Writes `segments` input segments of `group`, about `perSegment` records each over `keySpace`
   * (default twice `perSegment`) overlapping keys with some tombstones, and lists them in the root
   * as the service's writer would (through the format's codec). Returns their keys and the merge a
   * compaction of them must publish.
   */
  writeInputs(
    store: ObjectStore,
    ns: string,
    group: string,
    segments: number,
    perSegment: number,
    keySpace?: number,
  ): Promise<{ keys: string[]; merge: FormatRecord[] }>;
  /** Every record the segments `keys` hold, in order: for a compaction's outputs, the merge it published. */
  readRecords(store: ObjectStore, keys: readonly string[]): Promise<FormatRecord[]>;
  /**
   * Writes `records` (unique keys) as one input segment of `group` and lists it in the root, as the service's writer
   * would; returns its key.
   */
  writeRecords(store: ObjectStore, ns: string, group: string, records: readonly FormatRecord[]): Promise<string>;
}

const fromSegmentRecord = (r: SegmentRecord): FormatRecord => ({
  key: r.key,
  seq: r.seq,
  value: 'tombstone' in r ? null : r.value,
});
const toSegmentRecord = (r: BinaryRecord): SegmentRecord =>
  r.value === null ? { key: r.key, seq: r.seq, tombstone: true } : { key: r.key, seq: r.seq, value: r.value };

/**
 * The reference compactor as a worker with `COMPACTION_SEGMENT_FORMAT` set runs it: the setting reaches it in its
 * limits.
 */
const writing = (segmentFormat: SegmentFormatVersion): Compactor => ({
  compact: (attempt) => referenceCompactor.compact({ ...attempt, limits: { ...attempt.limits, segmentFormat } }),
});

export const referenceFormat: TestFormat = {
  name: 'reference (.mseg v1, root.json)',
  plugins: { compactor: writing(1), rootCodec: jsonRootCodec },
  workerEnv: { COMPACTION_SEGMENT_FORMAT: '1' },
  extension: SEGMENT_EXTENSION,
  segmentFormat: 1,
  outputsFinished: (progress) => (progress as CompactionProgress).segmentsFinished,
  async writeInputs(store, ns, group, segments, perSegment, keySpace) {
    const inputs = makeInputs(segments, perSegment, keySpace);
    return {
      keys: await writeInputs(store, ns, group, inputs, [1]),
      merge: referenceMerge(inputs).map(fromSegmentRecord),
    };
  },
  readRecords: async (store, keys) => (await readRecords(store, keys)).map(fromSegmentRecord),
  writeRecords: (store, ns, group, records) =>
    writeInputSegment(store, { namespaceId: ns, group }, records.map(toSegmentRecord), { segmentFormat: 1 }),
};

/**
 * The reference compactor writing segment format v2 over a namespace whose inputs alternate v1 and
 * v2, as a v1 namespace has after its writer and compactor move to v2: every test over this format
 * compacts v1 segments into v2 outputs and reads both.
 */
export const referenceV2Format: TestFormat = {
  ...referenceFormat,
  name: 'reference (.mseg v2, from v1 and v2 inputs, root.json)',
  plugins: { compactor: writing(2), rootCodec: jsonRootCodec },
  workerEnv: { COMPACTION_SEGMENT_FORMAT: '2' },
  segmentFormat: 2,
  async writeInputs(store, ns, group, segments, perSegment, keySpace) {
    const inputs = makeInputs(segments, perSegment, keySpace);
    return {
      keys: await writeInputs(store, ns, group, inputs, [1, 2]),
      merge: referenceMerge(inputs).map(fromSegmentRecord),
    };
  },
  writeRecords: (store, ns, group, records) =>
    writeInputSegment(store, { namespaceId: ns, group }, records.map(toSegmentRecord), { segmentFormat: 2 }),
};

export const binaryFormat: TestFormat = {
  name: 'plug-in (.lpb, text root)',
  plugins: { compactor: binaryCompactor, rootCodec: textRootCodec },
  workerEnv: { COMPACTION_FORMAT_MODULE: join(__dirname, 'binary-format-module.mts') },
  extension: BINARY_EXTENSION,
  // binaryCompactor's progress: how many of its outputs are stored.
  outputsFinished: (progress) => (progress as { written: number }).written,
  async writeInputs(store, ns, group, segments, perSegment, keySpace) {
    const inputs = sampleBinaryInputs(segments, perSegment, keySpace);
    // The same rule as the reference merge (newest seq wins, tombstones dropped, sorted by key).
    return {
      keys: await writeBinaryInputs(store, ns, group, inputs),
      merge: referenceMerge(inputs.map((set) => set.map(toSegmentRecord))).map(fromSegmentRecord),
    };
  },
  async readRecords(store, keys) {
    const records: FormatRecord[] = [];
    for (const key of keys) records.push(...decodeBinarySegment((await store.get(key)).body));
    return records;
  },
  writeRecords: async (store, ns, group, records) => (await writeBinaryInputs(store, ns, group, [records]))[0]!,
};

export const TEST_FORMATS: readonly TestFormat[] = [referenceFormat, referenceV2Format, binaryFormat];
