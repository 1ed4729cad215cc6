/**
 * A second segment format and root, written only against the package's public entry (as a
 * metadata service would, from `compaction-lease`): length-prefixed binary segments (`.lpb`) and a
 * line-oriented text root that lists each group's segments on one line. Tests run it through the
 * same compaction, publication and collector paths as the reference formats.
 */
import {
  addSegments,
  familyGroup,
  inputSegmentKey,
  namespaceId,
  newSegmentId,
  rootKey,
  stagedOutputKey,
  updateRoot,
  type Compactor,
  type NamespaceId,
  type ObjectStore,
  type RootCodec,
  type RetiredSegment,
  type RootState,
} from '../../src/index';
import { RootCorruptError } from '../../src/error-classes';

export const BINARY_EXTENSION = 'lpb';
const MAGIC = 'LPB1';

/** A record of the binary format: the newest `seq` of a key wins; a null value is a tombstone. */
export interface BinaryRecord {
  readonly key: string;
  readonly seq: number;
  readonly value: string | null;
}

/** `LPB1`, then per record: u32 key length, key, u32 seq, u8 (1 tombstone, 0 value), [u32 value length, value]. */
export function encodeBinarySegment(records: readonly BinaryRecord[]): Uint8Array {
  const parts: Buffer[] = [Buffer.from(MAGIC)];
  const u32 = (n: number) => {
    const b = Buffer.alloc(4);
    b.writeUInt32BE(n);
    return b;
  };
  for (const { key, seq, value } of records) {
    const k = Buffer.from(key);
    parts.push(u32(k.length), k, u32(seq), Buffer.from([value === null ? 1 : 0]));
    if (value !== null) {
      const v = Buffer.from(value);
      parts.push(u32(v.length), v);
    }
  }
  return Buffer.concat(parts);
}

export function decodeBinarySegment(bytes: Uint8Array): BinaryRecord[] {
  const b = Buffer.from(bytes);
  if (b.subarray(0, 4).toString() !== MAGIC) throw new Error('not an LPB1 segment');
  const records: BinaryRecord[] = [];
  for (let at = 4; at < b.length;) {
    const keyLength = b.readUInt32BE(at);
    const key = b.subarray(at + 4, at + 4 + keyLength).toString();
    at += 4 + keyLength;
    const seq = b.readUInt32BE(at);
    const tombstone = b[at + 4] === 1;
    at += 5;
    if (tombstone) {
      records.push({ key, seq, value: null });
      continue;
    }
    const valueLength = b.readUInt32BE(at);
    records.push({ key, seq, value: b.subarray(at + 4, at + 4 + valueLength).toString() });
    at += 4 + valueLength;
  }
  return records;
}

/**
 * Progress: how many output segments are stored. The outputs are cut from a merge that is the same on every attempt.
 */
interface BinaryProgress {
  readonly written: number;
}

/**
 * Merges every input in memory (a test format: small groups only) and cuts the sorted survivors into
 * segments of about `targetSegmentBytes`, each named by its index; the winning tombstones go to
 * tombstone segments cut the same way (the plug-in contract: a tombstone leaves the outputs only into
 * one of those). Progress counts the stored segments, outputs first.
 */
export const binaryCompactor: Compactor<BinaryProgress> = {
  async compact({ job, inputs, store, limits, resume, heartbeat }) {
    const newest = await newestOfGroup(store, inputs);
    const cut = (records: readonly BinaryRecord[]): BinaryRecord[][] => {
      const segments: BinaryRecord[][] = [];
      let size = 0;
      for (const record of records) {
        if (segments.length === 0 || size >= limits.targetSegmentBytes) {
          segments.push([]);
          size = 0;
        }
        segments.at(-1)!.push(record);
        size += record.key.length + (record.value?.length ?? 0) + 13;
      }
      return segments;
    };
    const live = cut(newest.filter((r) => r.value !== null));
    const dead = cut(newest.filter((r) => r.value === null));
    const outputs = live.map((_, i) => stagedOutputKey(job, String(i), BINARY_EXTENSION));
    const tombstones = dead.map((_, i) => stagedOutputKey(job, `tombstones/${i}`, BINARY_EXTENSION));
    const all = [...live, ...dead];
    const keys = [...outputs, ...tombstones];
    let bytesOut = 0;
    for (let i = 0; i < all.length; i++) {
      const body = encodeBinarySegment(all[i]!);
      if (i < live.length) bytesOut += body.length;
      if (i < (resume?.written ?? 0)) continue;
      await store.put(keys[i]!, body);
      heartbeat({ written: i + 1 });
    }
    // How high the tombstones go: a publication that leaves them out raises the group's sequence floor to it.
    const tombstoneSeqFloor = dead
      .flat()
      .reduce<number | undefined>((floor, r) => Math.max(r.seq, floor ?? 0), undefined);
    return {
      outputs,
      tombstones,
      ...(tombstoneSeqFloor !== undefined && { tombstoneSeqFloor }),
      recordsOut: live.flat().length,
      bytesOut,
    };
  },
};

/**
 * The root as text: `lproot 1`, `namespace`, `generation`, one `group` line per group (its segments
 * in order), one `retired` line per retired segment, and the fences of spec 6c (`lost-write-cutoff`,
 * `seq-floor` per group); groups sorted, so equal roots have equal bytes.
 */
export const textRootCodec: RootCodec = {
  encode(root) {
    const lines = ['lproot 1', `namespace ${root.namespace_id}`, `generation ${root.generation}`];
    for (const group of Object.keys(root.groups).sort())
      lines.push(['group', group, ...(root.groups[group] ?? [])].join(' '));
    for (const { key, retired_at_ms, visible_at_ms } of root.retired ?? [])
      lines.push(['retired', key, retired_at_ms, ...(visible_at_ms === undefined ? [] : [visible_at_ms])].join(' '));
    if (root.lost_write_cutoff_ms !== undefined) lines.push(`lost-write-cutoff ${root.lost_write_cutoff_ms}`);
    for (const group of Object.keys(root.seq_floors ?? {}).sort())
      lines.push(`seq-floor ${group} ${root.seq_floors?.[group]}`);
    return Buffer.from(`${lines.join('\n')}\n`);
  },
  decode(bytes, ns) {
    const lines = Buffer.from(bytes).toString().split('\n');
    if (lines[0] !== 'lproot 1' || lines.at(-1) !== '')
      throw new RootCorruptError(rootKey(ns), 'not an lproot 1 text root (or truncated)');
    let namespace: NamespaceId | undefined;
    let generation = NaN;
    const groups: Record<string, string[]> = {};
    const retired: RetiredSegment[] = [];
    const floors: Record<string, number> = {};
    let cutoff: number | undefined;
    for (const line of lines.slice(1, -1)) {
      const [field, first, ...rest] = line.split(' ');
      if (field === 'namespace') namespace = namespaceId(first);
      else if (field === 'generation') generation = Number(first);
      else if (field === 'group') groups[familyGroup(first)] = rest;
      else if (field === 'retired')
        retired.push({
          key: first!,
          retired_at_ms: Number(rest[0]),
          ...(rest[1] !== undefined && { visible_at_ms: Number(rest[1]) }),
        });
      else if (field === 'lost-write-cutoff') cutoff = Number(first);
      else if (field === 'seq-floor') floors[familyGroup(first)] = Number(rest[0]);
      else throw new RootCorruptError(rootKey(ns), `unknown line ${JSON.stringify(line)}`);
    }
    if (namespace === undefined) throw new RootCorruptError(rootKey(ns), 'no namespace line');
    // The fences of spec 6c ride along: a codec that dropped them would let a late write name a condemned segment.
    const fences = {
      ...(cutoff !== undefined && { lost_write_cutoff_ms: cutoff }),
      ...(Object.keys(floors).length && { seq_floors: floors }),
    };
    return { namespace_id: namespace, generation, groups, retired, ...fences };
  },
};

/**
 * Writes each record set as an input segment of `group` and lists it in the text root, as the metadata service's writer
 * would.
 */
export async function writeBinaryInputs(
  store: ObjectStore,
  ns: string,
  group: string,
  sets: readonly (readonly BinaryRecord[])[],
): Promise<string[]> {
  const keys: string[] = [];
  for (const records of sets) {
    const key = inputSegmentKey(namespaceId(ns), newSegmentId(), BINARY_EXTENSION);
    await store.put(key, encodeBinarySegment([...records].sort((a, b) => (a.key < b.key ? -1 : 1))));
    await updateRoot(store, namespaceId(ns), (root: RootState) => addSegments(root, familyGroup(group), [key]), {
      codec: textRootCodec,
    });
    keys.push(key);
  }
  return keys;
}

/** Per key of `keys` the record of the highest `seq` (a later segment on a tie), tombstones included, sorted by key. */
async function newestOfGroup(store: Pick<ObjectStore, 'get'>, keys: readonly string[]): Promise<BinaryRecord[]> {
  const newest = new Map<string, BinaryRecord>();
  for (const key of keys) {
    for (const record of decodeBinarySegment((await store.get(key)).body)) {
      const seen = newest.get(record.key);
      if (!seen || record.seq >= seen.seq) newest.set(record.key, record);
    }
  }
  return [...newest.values()].sort((a, b) => (a.key < b.key ? -1 : 1));
}

/**
 * Every live record of `keys` (the highest `seq` of a key wins, a later segment on a tie), sorted by key: what a reader
 * of the group sees.
 */
export async function readBinaryGroup(
  store: Pick<ObjectStore, 'get'>,
  keys: readonly string[],
): Promise<BinaryRecord[]> {
  return (await newestOfGroup(store, keys)).filter((r) => r.value !== null);
}

/**
 * `count` segments of `perSegment` records over `keySpace` overlapping keys; later segments overwrite and delete
 * earlier keys.
 */
export function sampleBinaryInputs(count: number, perSegment: number, keySpace = perSegment * 2): BinaryRecord[][] {
  let seq = 0;
  return Array.from({ length: count }, (_, s) => {
    const byKey = new Map<string, BinaryRecord>();
    for (let i = 0; i < perSegment; i++) {
      const key = `inode/${String((i * (s + 1)) % keySpace).padStart(5, '0')}`;
      if (!byKey.has(key)) byKey.set(key, { key, seq: ++seq, value: i % 7 === s ? null : `v${s}.${i}` });
    }
    return [...byKey.values()];
  });
}
