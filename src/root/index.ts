/**
 * The namespace root (`namespaces/{ns}/metadata/root.json`): the current segment keys of each
 * family group and the segments that left them (spec 6a), in the same checksummed envelope as the
 * lease (kind `metadata_root`). It is only ever replaced by compare-and-swap; whatever its groups
 * name is referenced and never deleted.
 *
 * One format, `format_version` 3: the groups, the retired list, and what fences the other writers
 * and the readers by the root (spec 6c): the lost-write cutoff, the groups' sequence floors and the
 * collector's visibility stamps. It is the only one written and the only one read.
 */
import { bounded, MESSAGE_LIMIT, quoted, TypedError, type FailureType } from '../errors';
import { z } from 'zod';
import { decodeEnvelope, describeIssues, encodeEnvelope } from '../envelope';
import { isSegmentKeyOf, rootKey, type FamilyGroup, type NamespaceId } from '../keys';

export const ROOT_KIND = 'metadata_root';
/**
 * A root names segment keys only; a few MB is far beyond any real one. Readers refuse more, so no writer of this
 * package writes more.
 */
export const MAX_ROOT_BYTES = 16 * 1024 * 1024;
/**
 * The largest root the collector still reads, to shrink it: one written past {@link MAX_ROOT_BYTES}
 * by an older version or a foreign writer. Only the reclaim of retired segments reads this far,
 * and it holds at most two decoded roots at once, so a worker's memory stays bounded.
 */
export const MAX_COLLECTED_ROOT_BYTES = 2 * MAX_ROOT_BYTES;

/** A namespace root as the package reads and changes it, whatever codec stores it. */
export interface RootState {
  /** Namespace this root belongs to; must match its key. */
  readonly namespace_id: NamespaceId;
  /** Increases on every write, so every CAS changes the bytes (and the ETag). */
  readonly generation: number;
  /** Current segment keys of each family group; only segment keys of this namespace. */
  readonly groups: Readonly<Record<string, readonly string[]>>;
  /**
   * Segments a publication replaced, each once, with the time it left: kept for readers until the reader grace is over.
   * Absent: none.
   */
  readonly retired?: readonly RetiredSegment[];
  /**
   * Lost writes condemned (spec 6c.1): an input segment (under `metadata/segments/`) whose store
   * `LastModified` is at or before this is never named by a root again. The collector raises it by
   * CAS before it deletes such segments, and every root writer refuses to name one, so a
   * registration that arrives late fails its precondition or sees it. Absent: none.
   */
  readonly lost_write_cutoff_ms?: number;
  /**
   * Per group, the highest `seq` of a winning tombstone a publication dropped (spec 6c.3): a segment
   * holding a record at or below it may hold an older version of a deleted key, and no root writer
   * registers one into the group. Absent: none.
   */
  readonly seq_floors?: Readonly<Record<string, number>>;
  /**
   * A plug-in codec's own fields (see {@link RootCodec}): the package never reads them and carries them through every
   * change.
   */
  readonly extension?: unknown;
}

/** A segment a publication replaced: kept for readers of older roots until the reader grace is over. */
export interface RetiredSegment {
  /** A segment key of this namespace (input or staged output). */
  readonly key: string;
  /**
   * The clock of the writer whose CAS retired it (a publication: the job's lease clock at that attempt); for the
   * record.
   */
  readonly retired_at_ms: number;
  /**
   * When the retirement was visible by: the store's `LastModified` of the root in which a collector
   * pass first saw it, stamped by that pass's CAS (spec 6c.2). The reader grace counts from here, so a
   * retiring write that landed late shortens no reader's grace. Absent until a pass stamps it: not due.
   */
  readonly visible_at_ms?: number;
}

/**
 * The namespace root's bytes are not a root this package may trust (a wrong checksum, a foreign key, a codec's
 * refusal): nothing there is decided on.
 */
export class RootCorruptError extends TypedError {
  readonly failureType: FailureType = 'RootCorrupt';
  /** What is wrong, {@link bounded}: it may quote anything the root holds. */
  readonly reason: string;
  constructor(
    readonly key: string,
    reason: string,
  ) {
    super(`root ${key} is corrupt: ${bounded(reason, MESSAGE_LIMIT)}`);
    this.reason = bounded(reason, MESSAGE_LIMIT);
  }
}

/**
 * The root was written in another format than the worker's root codec reads: a worker started
 * without the format module (or with another one) than the service's, not damage. Retention as for
 * a corrupt root: nothing that depends on it is decided.
 */
export class RootFormatMismatchError extends RootCorruptError {
  override readonly failureType = 'RootFormatMismatch';
  constructor(
    key: string,
    /** What the worker's codec is, and what the bytes are or start with. */
    readonly codec: string,
    readonly found: string,
  ) {
    super(
      key,
      `it is ${found}, not a root this worker's codec (${codec}) reads: check the worker's format module (COMPACTION_FORMAT_MODULE, worker --format) before anything else`,
    );
  }
}

/**
 * How the package's `root.json` begins, whatever its format version: bytes that begin otherwise were not written by it.
 */
const ROOT_JSON_START = Buffer.from(`{"kind":${JSON.stringify(ROOT_KIND)}`, 'latin1');

/** The first bytes, printable, for an error that says what a root holds instead. */
const startOf = (bytes: Uint8Array): string => JSON.stringify(Buffer.from(bytes.subarray(0, 24)).toString('latin1'));

/**
 * A codec's failure on `bytes`, told apart: bytes in the other format (the package's `root.json`
 * under a plug-in codec, or anything but `root.json` under the package's) are a mismatch; the rest is corruption.
 */
function rootFormatMismatch(codec: RootCodec, bytes: Uint8Array, ns: NamespaceId): RootFormatMismatchError | undefined {
  // An empty object is no format at all; a root.json cut short keeps its beginning, so a prefix of
  // the signature is ours too, damaged.
  if (bytes.length === 0) return undefined;
  const head = bytes.subarray(0, ROOT_JSON_START.length);
  const isRootJson = ROOT_JSON_START.subarray(0, head.length).equals(head);
  if (codec === jsonRootCodec)
    return isRootJson
      ? undefined
      : new RootFormatMismatchError(
          rootKey(ns),
          "the package's root.json",
          `not a root.json (it starts ${startOf(bytes)})`,
        );
  return isRootJson
    ? new RootFormatMismatchError(rootKey(ns), 'a plug-in root codec', "the package's root.json")
    : undefined;
}

const ROOT_SIZE_FIX =
  'the collector shrinks a root by dropping the records of retired segments whose reader grace is over: keep its schedule running ' +
  '(docs/operations.md, "A root near its size limit"), and compact groups of many segments into fewer';

/**
 * A root larger than readers accept: refused before it is written, or met (written by an older version or a foreign
 * writer).
 */
export class RootTooLargeError extends TypedError {
  readonly failureType = 'RootTooLarge';
  constructor(
    readonly namespaceId: NamespaceId,
    readonly bytes: number,
    written: boolean,
  ) {
    super(
      `the root of namespace ${namespaceId} ${written ? 'would be' : 'is'} ${bytes} bytes, more than readers accept (${MAX_ROOT_BYTES})` +
        `${written ? ', so it is not written' : ''}: ${ROOT_SIZE_FIX}`,
    );
  }
}

/**
 * The bytes of `root` for a write, refused when readers would refuse them. Only a write that shrinks
 * a root already over the limit (`replacingBytes`: the size of the root it replaces) may stay over it:
 * the collector dropping records is how such a root gets back under.
 */
export function encodeRootForWrite(codec: RootCodec, root: RootState, replacingBytes = 0): Uint8Array {
  const bytes = codec.encode(root);
  if (bytes.length > MAX_ROOT_BYTES && bytes.length >= replacingBytes)
    throw new RootTooLargeError(root.namespace_id, bytes.length, true);
  return bytes;
}

/**
 * The root's `format_version`: raised when its shape or meaning changes, so a reader of another refuses it instead of
 * misreading it.
 */
const ROOT_FORMAT_VERSION = 3;
const millis = z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER);
const groupName = z.string().regex(/^[a-z0-9][a-z0-9_-]{0,62}$/);
const rootSchema = z.strictObject({
  namespace_id: z.string(),
  generation: millis,
  groups: z.record(groupName, z.array(z.string())),
  retired: z.array(z.strictObject({ key: z.string(), retired_at_ms: millis, visible_at_ms: millis.optional() })),
  lost_write_cutoff_ms: millis.optional(),
  seq_floors: z.record(groupName, millis).optional(),
});

export const emptyRoot = (ns: NamespaceId): RootState =>
  Object.freeze({ namespace_id: ns, generation: 0, groups: {}, retired: [] });

const sortedByKey = <T>(record: Readonly<Record<string, T>>): Record<string, T> =>
  Object.fromEntries(
    Object.keys(record)
      .sort()
      .map((name) => [name, record[name] as T]),
  );

/** Group names are written sorted, so equal roots have equal bytes. */
export function encodeRoot(root: RootState): Uint8Array {
  const retired = (root.retired ?? []).map(({ key, retired_at_ms, visible_at_ms }) => ({
    key,
    retired_at_ms,
    ...(visible_at_ms !== undefined && { visible_at_ms }),
  }));
  return encodeEnvelope(
    ROOT_KIND,
    {
      namespace_id: root.namespace_id,
      generation: root.generation,
      groups: sortedByKey(root.groups),
      retired,
      ...(root.lost_write_cutoff_ms !== undefined && { lost_write_cutoff_ms: root.lost_write_cutoff_ms }),
      ...(root.seq_floors !== undefined && { seq_floors: sortedByKey(root.seq_floors) }),
    },
    ROOT_FORMAT_VERSION,
  );
}

/**
 * How a namespace root is stored: the plug-in seam for a metadata service that keeps its own root.
 * The package reads and replaces the root only through a codec (publication, the collector, the
 * writer); {@link jsonRootCodec} is the default. Whatever a codec decodes is checked by
 * {@link checkRoot} before the package trusts it, so a codec cannot make the collector delete a key
 * outside the namespace's segments.
 */
export interface RootCodec {
  /**
   * The root in `bytes`, the object at `rootKey(ns)`. Throws on bytes that are not a root (a
   * {@link RootCorruptError} ideally; any other error is reported as one). A field the package does
   * not know rides in `extension`, which every change the package makes carries through untouched.
   */
  decode(bytes: Uint8Array, ns: NamespaceId): RootState;
  /**
   * The bytes of `root`: a pure function of it, and `decode(encode(root))` must equal `root`. Two
   * roots of different `generation` must encode differently: every CAS has to change the bytes.
   */
  encode(root: RootState): Uint8Array;
}

/**
 * The package's checks of a decoded root, whatever codec read it: it names its own namespace, its
 * groups and retired list name only segment keys of that namespace, and nothing is retired twice.
 */
export function checkRoot(root: RootState, ns: NamespaceId): RootState {
  const corrupt = (reason: string) => new RootCorruptError(rootKey(ns), reason);
  if (root.namespace_id !== ns) throw corrupt(`names namespace ${root.namespace_id}, not the namespace of its key`);
  if (!Number.isSafeInteger(root.generation) || root.generation < 0)
    throw corrupt(`generation ${root.generation} is not a non-negative integer`);
  for (const [group, keys] of Object.entries(root.groups)) {
    const foreign = keys.find((k) => !isSegmentKeyOf(ns, k));
    if (foreign !== undefined)
      throw corrupt(`group ${quoted(group)} names ${quoted(foreign)}, which is not a segment key of ${ns}`);
  }
  const seen = new Set<string>();
  const isMillis = (n: unknown): boolean => Number.isSafeInteger(n) && (n as number) >= 0;
  for (const { key, retired_at_ms, visible_at_ms } of root.retired ?? []) {
    if (!isSegmentKeyOf(ns, key)) throw corrupt(`retired names ${quoted(key)}, which is not a segment key of ${ns}`);
    if (seen.has(key)) throw corrupt(`retired names ${quoted(key)} twice`);
    if (!isMillis(retired_at_ms) || (visible_at_ms !== undefined && !isMillis(visible_at_ms)))
      throw corrupt(`retired ${quoted(key)} has a time that is not a whole number of milliseconds`);
    seen.add(key);
  }
  if (root.lost_write_cutoff_ms !== undefined && !isMillis(root.lost_write_cutoff_ms))
    throw corrupt(`lost_write_cutoff_ms ${root.lost_write_cutoff_ms} is not a whole number of milliseconds`);
  for (const [group, floor] of Object.entries(root.seq_floors ?? {})) {
    if (!isMillis(floor)) throw corrupt(`the seq floor of group ${quoted(group)} is ${floor}, not a whole number`);
  }
  return Object.freeze({ ...root, namespace_id: ns, retired: root.retired ?? [] });
}

/**
 * Reads `bytes` with `codec` and checks the result; a codec's own failure is a {@link RootCorruptError}
 * naming the key. Past `maxBytes` (the readers' limit unless the collector reads to shrink it) nothing is decoded.
 */
export function decodeRootWith(
  codec: RootCodec,
  bytes: Uint8Array,
  ns: NamespaceId,
  maxBytes = MAX_ROOT_BYTES,
): RootState {
  if (bytes.length > maxBytes)
    throw new RootCorruptError(rootKey(ns), `${bytes.length} bytes, more than a root may be (${maxBytes})`);
  let root: RootState;
  try {
    root = codec.decode(bytes, ns);
  } catch (err) {
    const mismatch = rootFormatMismatch(codec, bytes, ns);
    if (mismatch) throw mismatch;
    if (err instanceof TypedError) throw err;
    throw new RootCorruptError(
      rootKey(ns),
      `the root codec could not decode it: ${err instanceof Error ? err.message : String(err)}`,
    );
  }
  return checkRoot(root, ns);
}

/** The reference codec: `root.json` in the checksummed envelope (docs/formats.md). */
export const jsonRootCodec: RootCodec = {
  decode(bytes, ns) {
    const corrupt = (reason: string) => new RootCorruptError(rootKey(ns), reason);
    const { payload } = decodeEnvelope(ROOT_KIND, bytes, corrupt, [ROOT_FORMAT_VERSION]);
    const parsed = rootSchema.safeParse(payload);
    if (!parsed.success) throw corrupt(`payload: ${describeIssues(parsed.error)}`);
    return { ...parsed.data, namespace_id: parsed.data.namespace_id as NamespaceId };
  },
  encode: (root) => encodeRoot(root),
};

export const decodeRoot = (bytes: Uint8Array, ns: NamespaceId): RootState => decodeRootWith(jsonRootCodec, bytes, ns);

/** A root's look-ups, so that every per-key decision costs the same whatever the root's size. */
export interface RootIndex {
  /** Every key a group names: the set the collector must never delete from. */
  readonly referenced: ReadonlySet<string>;
  /** Each retired key's entry. */
  readonly retired: ReadonlyMap<string, RetiredSegment>;
}

// A root is an immutable value (every change builds a new one), so its index is built once per root
// read and shared by every decision made against it; it goes when the root does.
const indexes = new WeakMap<RootState, RootIndex>();

/** The index of `root`, built on its first use. */
export function rootIndex(root: RootState): RootIndex {
  let index = indexes.get(root);
  if (index === undefined) {
    const referenced = new Set<string>();
    for (const keys of Object.values(root.groups)) for (const key of keys) referenced.add(key);
    index = { referenced, retired: new Map((root.retired ?? []).map((r) => [r.key, r])) };
    indexes.set(root, index);
  }
  return index;
}

/** Every key the root references: the set the collector must never delete from. */
export const referencedKeys = (root: RootState): ReadonlySet<string> => rootIndex(root).referenced;

export const groupSegments = (root: RootState, group: FamilyGroup): readonly string[] => root.groups[group] ?? [];

/**
 * Appends segments to a group (the metadata service's own writer, stood in for by the demo and tests).
 * Idempotent: a key the root already names, or once named and has retired since, is not appended
 * again, and a root that needs nothing appended is returned as it is (nothing to write). So a
 * registration whose reply was lost, re-applied to the root it landed in, changes nothing.
 */
export function addSegments(root: RootState, group: FamilyGroup, keys: readonly string[]): RootState {
  const { referenced, retired } = rootIndex(root);
  const fresh = [...new Set(keys)].filter((k) => !referenced.has(k) && !retired.has(k));
  if (fresh.length === 0) return root;
  return Object.freeze({
    ...root,
    generation: root.generation + 1,
    groups: { ...root.groups, [group]: [...groupSegments(root, group), ...fresh] },
  });
}

/** The keys `next` names that `before` named in no group: what a root change registers. */
export function newlyNamed(before: RootState, next: RootState): string[] {
  const { referenced } = rootIndex(before);
  return [...referencedKeys(next)].filter((k) => !referenced.has(k));
}

export type PublicationPlan =
  | { readonly kind: 'publish'; readonly root: RootState }
  /** An input is no longer current: another writer changed the group; the output is left for the collector. */
  | { readonly kind: 'abandoned'; readonly missingInputs: readonly string[] };

/** What a publication changes in one group of the root: its inputs replaced by its outputs. */
export interface GroupReplacement {
  readonly group: FamilyGroup;
  /** The job's inputs: each must still be in the group, else the plan is `abandoned`. */
  readonly inputs: readonly string[];
  readonly outputs: readonly string[];
  /** When the inputs are retired: the collector's reader grace counts from the retirement. */
  readonly retiredAtMs: number;
  /**
   * The highest seq of a winning tombstone the publication leaves out of the group, which raises the
   * group's floor in the same write (spec 6c.3), so no older version of a deleted key can be registered after it.
   */
  readonly seqFloor?: number;
}

/**
 * Replaces the job's inputs by its outputs in one group, and retires the inputs at `retiredAtMs`
 * in the same root (spec 6a.1); segments added to the group meanwhile are kept. An input retired
 * before (referenced again since) is listed once, with its latest retirement.
 */
export function planPublication(
  root: RootState,
  { group, inputs, outputs, retiredAtMs, seqFloor }: GroupReplacement,
): PublicationPlan {
  const current = groupSegments(root, group);
  const inGroup = new Set(current);
  const missingInputs = inputs.filter((k) => !inGroup.has(k));
  if (missingInputs.length) return { kind: 'abandoned', missingInputs };
  const replaced = new Set(inputs);
  const kept = current.filter((k) => !replaced.has(k));
  const retired = retire(root.retired, [...replaced], retiredAtMs);
  const floors =
    seqFloor === undefined
      ? {}
      : { seq_floors: { ...root.seq_floors, [group]: Math.max(seqFloor, root.seq_floors?.[group] ?? 0) } };
  return {
    kind: 'publish',
    root: Object.freeze({
      ...root,
      generation: root.generation + 1,
      groups: { ...root.groups, [group]: [...outputs, ...kept] },
      retired,
      ...floors,
    }),
  };
}

/**
 * `retired` with each of `keys` listed once, at `retiredAtMs`: a key retired before (referenced again since) takes its
 * latest retirement, unstamped.
 */
function retire(
  retired: readonly RetiredSegment[] | undefined,
  keys: readonly string[],
  retiredAtMs: number,
): RetiredSegment[] {
  const now = new Set(keys);
  return [
    ...(retired ?? []).filter((r) => !now.has(r.key)),
    ...keys.map((key) => ({ key, retired_at_ms: retiredAtMs })),
  ];
}

/**
 * `next` (a change the package's root writer made to `before`) with every segment that `before`
 * names and `next` names in no group retired at `retiredAtMs`, the writer's clock at that write
 * (spec 6a.1): a segment leaves the root only by retirement, so readers of `before` keep it for the
 * reader grace, never only for the lost-write grace.
 */
export function retireRemoved(before: RootState, next: RootState, retiredAtMs: number): RootState {
  const still = referencedKeys(next);
  const removed = [...referencedKeys(before)].filter((k) => !still.has(k));
  return removed.length ? Object.freeze({ ...next, retired: retire(next.retired, removed, retiredAtMs) }) : next;
}

/**
 * The root with every retirement no pass has stamped yet stamped `visibleAtMs` (spec 6c.2): the
 * store's `LastModified` of the root the pass read, by which each was visible. Undefined when all are
 * stamped (nothing to write).
 */
export function stampRetirements(root: RootState, visibleAtMs: number): RootState | undefined {
  if (!(root.retired ?? []).some((r) => r.visible_at_ms === undefined)) return undefined;
  const retired = (root.retired ?? []).map((r) =>
    r.visible_at_ms === undefined ? { ...r, visible_at_ms: visibleAtMs } : r,
  );
  return Object.freeze({ ...root, generation: root.generation + 1, retired });
}

/**
 * The root with its lost-write cutoff raised to `cutoffMs` (spec 6c.1), or undefined when it is
 * there already: every input segment whose `LastModified` is at or before it is condemned.
 */
export function condemnLostWrites(root: RootState, cutoffMs: number): RootState | undefined {
  if ((root.lost_write_cutoff_ms ?? -1) >= cutoffMs) return undefined;
  return Object.freeze({ ...root, generation: root.generation + 1, lost_write_cutoff_ms: cutoffMs });
}
