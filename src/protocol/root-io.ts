/** Reading and replacing the namespace root: bytes and ETag from one GET, replaced only by CAS. */
import { TypedError } from '../errors';
import { isInputSegmentKeyOf, judgedRootKey, rootKey, type NamespaceId } from '../keys';
import {
  decodeRootWith,
  emptyRoot,
  encodeRootForWrite,
  MAX_ROOT_BYTES,
  newlyNamed,
  retireRemoved,
  rootIndex,
  type RootCodec,
  type RootState,
} from '../root';
import { AmbiguousError, ConflictError, NotFoundError, PreconditionFailedError, type ObjectStore } from '../store';
import { inBatches } from '../store/batches';

/**
 * The namespace has no root: nothing to compact (a compaction of it is invalid input), and nothing
 * to tell referenced segments from unreferenced ones (the collector deletes nothing in it).
 */
export class RootMissingError extends TypedError {
  readonly failureType = 'RootMissing';
  constructor(readonly key: string) {
    super(
      `root ${key} does not exist: the namespace has no metadata to compact, and the collector deletes nothing in it`,
    );
  }
}

/**
 * The root is missing where the namespace has history (`gc/judged-root`: written before the first
 * change of its first root, then by every collector pass): it was deleted or lost, not never written.
 * A writer that created it afresh would forget every segment it named, so none does; the collector
 * deletes nothing in the namespace meanwhile (spec 6c.5).
 */
export class RootLostError extends TypedError {
  readonly failureType = 'RootLost';
  constructor(readonly namespaceId: NamespaceId) {
    super(
      `the root of namespace ${namespaceId} is missing, but a collector pass judged one (${judgedRootKey(namespaceId)}): it was lost, so it is not created afresh; ` +
        `restore the last root a pass judged with \`compaction-lease root restore ${namespaceId}\` (a dry run first), then write again`,
    );
  }
}

/**
 * A root change would name a segment that no root may name again (spec 6c.1): condemned as a lost
 * write, retired, or missing. Nothing was written; write its records again as a new segment.
 */
export class SegmentLostError extends TypedError {
  readonly failureType = 'SegmentLost';
  constructor(
    readonly key: string,
    readonly reason: string,
  ) {
    super(
      `segment ${key} cannot be registered: ${reason}; nothing was written: write its records again as a new segment`,
    );
  }
}

/**
 * A root change would register a segment holding a record at or below its group's sequence floor
 * (spec 6c.3): a publication dropped a tombstone of that group at the floor, and an older version of
 * a deleted key would come back. Nothing was written; write the records again with newer seqs.
 */
export class SequenceFloorError extends TypedError {
  readonly failureType = 'SequenceFloor';
  constructor(
    readonly key: string,
    readonly group: string,
    /** The segment's lowest seq, if the writer declared it. */
    readonly seq: number | undefined,
    readonly floor: number,
  ) {
    super(
      seq === undefined
        ? `segment ${key} cannot be registered in group ${group}, whose seq floor is ${floor}: its lowest seq was not declared (RootWriteOptions.minSeqOf), so it may hold an older version of a deleted key`
        : `segment ${key} cannot be registered in group ${group}: it holds a record at seq ${seq}, at or below the group's floor ${floor} (a compaction dropped a tombstone there); write the records again with seqs above ${floor}`,
    );
  }
}

/**
 * A root change the package's root writer does not make: it names a staged segment under a job prefix, which only that
 * job's publication names.
 */
export class InvalidRootChangeError extends TypedError {
  readonly failureType = 'InvalidInput';
}

export interface ReadRoot {
  readonly root: RootState;
  readonly etag: string;
  /** The size of the bytes read. */
  readonly bytes: number;
  /** The store's `LastModified` of the version read: by then everything in it was visible. */
  readonly lastModified: Date | undefined;
}

/**
 * Reads the root with `codec` and checks what it decoded. The codec has no default: a caller that
 * forgot the worker's would read a plug-in's root as `root.json` (pass `jsonRootCodec` for the reference root).
 * `maxBytes`: the readers' limit, unless the collector reads a root past it to shrink it (`MAX_COLLECTED_ROOT_BYTES`).
 */
export async function readRoot(
  store: ObjectStore,
  ns: NamespaceId,
  codec: RootCodec,
  maxBytes = MAX_ROOT_BYTES,
): Promise<ReadRoot> {
  const key = rootKey(ns);
  const read = await readRootAt(store, key, { ns, codec, maxBytes });
  if (read === undefined) throw new RootMissingError(key);
  const { root, etag, bytes, lastModified } = read;
  return { root, etag, bytes, lastModified };
}

/** How a root object is read: as the root of namespace `ns`, by `codec`, up to `maxBytes`. */
export interface RootReading {
  readonly ns: NamespaceId;
  readonly codec: RootCodec;
  readonly maxBytes: number;
}

/**
 * The object at `key` (the root, or a copy of it such as the collector's judged root) read as a root of `ns`, with its
 * bytes; undefined when there is none.
 */
export async function readRootAt(
  store: ObjectStore,
  key: string,
  { ns, codec, maxBytes }: RootReading,
): Promise<(ReadRoot & { readonly body: Uint8Array }) | undefined> {
  try {
    const object = await store.get(key, { maxBytes });
    return {
      root: decodeRootWith(codec, object.body, ns, maxBytes),
      etag: object.etag,
      bytes: object.body.length,
      lastModified: object.lastModified,
      body: object.body,
    };
  } catch (err) {
    if (err instanceof NotFoundError) return undefined;
    throw err;
  }
}

/** The root, or undefined when the namespace has none yet. */
export async function readRootIfAny(
  store: ObjectStore,
  ns: NamespaceId,
  codec: RootCodec,
  maxBytes = MAX_ROOT_BYTES,
): Promise<ReadRoot | undefined> {
  try {
    return await readRoot(store, ns, codec, maxBytes);
  } catch (err) {
    if (err instanceof RootMissingError) return undefined;
    throw err;
  }
}

/** The root a namespace starts with: empty, at generation 1. The only root a writer creates (spec 6c.5). */
const firstRoot = (ns: NamespaceId): RootState => Object.freeze({ ...emptyRoot(ns), generation: 1 });

/**
 * Marks that the namespace has history before the first change of its generation-1 root (spec
 * 6c.5), and does nothing for any other root: the judged copy of that root, put if absent. From
 * then on the root's loss is {@link RootLostError}, never a new namespace; before it the root is the
 * empty one it was created as, and its loss forgets nothing. A copy already there (412) is the
 * marker or a pass's copy: the history is marked. Whether the root went back is not judged here: the
 * root read may be stale (its CAS then fails and the next round reads a newer one), and the
 * collector judges every root it decides by. Any other failure is the store's, for the caller's
 * round to settle as it settles its CAS.
 */
async function markHistory(store: ObjectStore, ns: NamespaceId, codec: RootCodec, current: RootState): Promise<void> {
  if (current.generation !== 1) return;
  try {
    await store.putIfAbsent(judgedRootKey(ns), encodeRootForWrite(codec, current));
  } catch (err) {
    if (!(err instanceof PreconditionFailedError)) throw err;
  }
}

/** How a CAS of the root runs. */
interface CasOptions {
  /** How the root is read and written. */
  readonly codec: RootCodec;
  /**
   * Checks the root to be written against the one it replaces, once its bytes are known to fit; what it throws stops
   * the write with nothing sent.
   */
  readonly check?: (before: RootState, next: RootState) => Promise<void>;
  /** Called right before each root write is sent; what it throws stops the write with nothing sent. */
  readonly beforeWrite?: () => void;
  /** Rounds before giving up on lost races (undefined is returned); unbounded by default. */
  readonly maxRounds?: number;
  /** The largest root read: past the readers' limit only for the collector, whose writes may then only shrink it. */
  readonly maxBytes?: number;
  /**
   * Whether the write keeps the namespace's history (spec 6c.5), as the package's root writer does: a
   * missing root is created, empty at generation 1, where the namespace has none (otherwise undefined
   * is returned), and a generation-1 root is changed only after the history marker. The collector
   * needs neither: it changes only a root it judged, which wrote the copy; nor a job: it changes
   * only a root naming its inputs, which the root writer changed before (and has no grant on the copy).
   */
  readonly keepHistory?: boolean;
}

/** A root a CAS wrote, or found already as wanted. */
export interface WrittenRoot {
  readonly root: RootState;
  /** False when the current root needed no change. */
  readonly written: boolean;
  /** The root it replaced (undefined when it wrote nothing). */
  readonly replaced: ReadRoot | undefined;
}

const isUnclear = (err: unknown): boolean =>
  err instanceof PreconditionFailedError ||
  err instanceof ConflictError ||
  err instanceof NotFoundError ||
  err instanceof AmbiguousError;

/**
 * Whether the namespace has history (spec 6c.5): the marker its root writer put before the root's first change, or a
 * pass's copy.
 */
async function hasHistory(store: ObjectStore, ns: NamespaceId): Promise<boolean> {
  try {
    await store.head(judgedRootKey(ns));
    return true;
  } catch (err) {
    if (err instanceof NotFoundError) return false;
    throw err;
  }
}

/**
 * Replaces the root by CAS with what `next` makes of the current one (undefined: nothing to write),
 * re-reading and deciding again after every refused or unclear answer (412, 409, 404, an unknown
 * outcome): a change that landed is found in the next read and, `next` being idempotent, not made
 * twice. A missing root is created only with `keepHistory`, and only as the empty first root, which
 * the next round changes like any other (never where the namespace has history: {@link RootLostError}).
 * Undefined when the root is missing and not created, or when `maxRounds` races were lost.
 */
async function casRoot(
  store: ObjectStore,
  ns: NamespaceId,
  next: (current: ReadRoot) => Promise<RootState | undefined> | RootState | undefined,
  options: CasOptions,
): Promise<WrittenRoot | undefined> {
  const {
    codec,
    check,
    beforeWrite = () => {},
    maxRounds = Number.POSITIVE_INFINITY,
    maxBytes = MAX_ROOT_BYTES,
    keepHistory = false,
  } = options;
  for (let round = 0; round < maxRounds; round++) {
    const current = await readRootIfAny(store, ns, codec, maxBytes);
    if (!current) {
      if (!keepHistory) return undefined;
      if (await hasHistory(store, ns)) throw new RootLostError(ns);
      beforeWrite();
      // Empty, so a loss before the history marker forgets nothing: content comes only by a CAS after it.
      await store.putIfAbsent(rootKey(ns), encodeRootForWrite(codec, firstRoot(ns))).catch((err: unknown) => {
        if (!isUnclear(err)) throw err;
      });
      continue;
    }
    const root = await next(current);
    if (root === undefined) return { root: current.root, written: false, replaced: undefined };
    // Only the collector reads past the readers' limit, and may then write a root that is still past it if it is
    // smaller.
    const bytes = encodeRootForWrite(codec, root, maxBytes > MAX_ROOT_BYTES ? current.bytes : 0);
    await check?.(current.root, root);
    beforeWrite();
    try {
      // WARN: the marker lands before the first change of a generation-1 root, so no root this writer filled is lost
      // unnoticed.
      if (keepHistory) await markHistory(store, ns, codec, current.root);
      await store.putIfMatch(rootKey(ns), bytes, current.etag);
      return { root, written: true, replaced: current };
    } catch (err) {
      if (!isUnclear(err)) throw err;
    }
  }
  return undefined;
}

/**
 * How the package's root writer writes: its clock, a check before each CAS is sent, and what it knows of the segments
 * it registers.
 */
export interface RootWriteOptions {
  /**
   * How the root is read and written. No default: a writer that forgot a plug-in's codec would write `root.json` (pass
   * `jsonRootCodec` for the reference root).
   */
  readonly codec: RootCodec;
  /** The writer's wall clock: every segment the write removes retires at its reading then (spec 6a.1). */
  readonly clockMs?: () => number;
  /** Called right before each CAS is sent; what it throws stops the write with nothing sent (a writer budget spent). */
  readonly beforeWrite?: () => void;
  /**
   * The lowest `seq` a segment the change registers holds, where the writer knows it: a group with a
   * sequence floor (spec 6c.3) registers only a segment declared to hold nothing at or below it.
   */
  readonly minSeqOf?: (key: string) => number | undefined;
}

/** A root change about to be sent: the store, the root it replaces, the root it writes, the writer's seqs. */
interface RootChange {
  readonly store: ObjectStore;
  readonly before: RootState;
  readonly next: RootState;
  /** The lowest seq a registered segment holds, where the writer knows it ({@link RootWriteOptions.minSeqOf}). */
  readonly minSeqOf: (key: string) => number | undefined;
}

/**
 * Refuses a change of `before` into `next` that registers a segment no root may name (spec 6c):
 * a staged segment under a job prefix (only its job's publication names those), one `before`
 * retires (it goes after the reader grace), one missing from the store, one condemned as a lost write
 * (`LastModified` at or before the cutoff), or one that may hold a record at or below its group's
 * floor. Each is read (HEAD, a few at a time) after `before` was: a collector deletes a segment only
 * after a root write that condemns it, which fails this writer's CAS on `before` or is in `before`.
 */
async function checkRegistrations(change: RootChange): Promise<void> {
  const { before, next } = change;
  const ns = before.namespace_id;
  const { retired } = rootIndex(before);
  const registered = newlyNamed(before, next);
  for (const key of registered) {
    if (!isInputSegmentKeyOf(ns, key))
      throw new InvalidRootChangeError(
        `a root change may not name ${key}: a staged segment under a job prefix is named only by its job's publication`,
      );
    if (retired.has(key))
      throw new SegmentLostError(key, 'it was retired from the root and is deleted once its reader grace is over');
  }
  await inBatches(registered, 1, HEAD_CONCURRENCY, async ([key]) => checkRegistration(change, key!));
}

/** HEAD requests of one registration in flight at once. */
const HEAD_CONCURRENCY = 16;

/** One segment a change registers: in the store, not condemned, above its group's floor. */
async function checkRegistration({ store, before, next, minSeqOf }: RootChange, key: string): Promise<void> {
  let lastModified: Date | undefined;
  try {
    ({ lastModified } = await store.head(key));
  } catch (err) {
    if (err instanceof NotFoundError)
      throw new SegmentLostError(key, 'it is not in the store (never written, or deleted as a lost write)');
    throw err;
  }
  const cutoff = before.lost_write_cutoff_ms;
  if (cutoff !== undefined && (lastModified === undefined || lastModified.getTime() <= cutoff)) {
    throw new SegmentLostError(
      key,
      `it was written ${lastModified?.toISOString() ?? 'at an unknown time'}, at or before the lost-write cutoff ${new Date(cutoff).toISOString()}: a collector condemned it as a lost write`,
    );
  }
  for (const [group, keys] of Object.entries(next.groups)) {
    const floor = before.seq_floors?.[group];
    if (floor === undefined || !keys.includes(key)) continue;
    const seq = minSeqOf(key);
    if (seq === undefined || seq <= floor) throw new SequenceFloorError(key, group, seq, floor);
  }
}

/**
 * Applies `change` to the current root by CAS, retrying lost races. A missing root is first created
 * empty at generation 1 (never where the namespace has history: {@link RootLostError}), and the first
 * change of a generation-1 root marks the history before it is sent (spec 6c.5). Every segment the change
 * removes from the root is retired at the writer's clock in the same write (spec 6a.1), so readers of
 * the old root get the reader grace; every segment it registers is checked first (spec 6c:
 * {@link SegmentLostError}, {@link SequenceFloorError}); the generation always goes up.
 *
 * `change` must be idempotent: applied to a root that already holds it, it returns that very root
 * (as `addSegments` does), and nothing is written. A refused or unclear CAS is settled by re-reading
 * and applying it again, so a change whose reply was lost is found made and never made twice.
 * For the metadata service's own writer (stood in for by the demo and tests), not for publication.
 * A root the change makes larger than readers accept is refused (`RootTooLargeError`) and not written.
 */
export async function updateRoot(
  store: ObjectStore,
  ns: NamespaceId,
  change: (root: RootState) => RootState,
  options: RootWriteOptions,
): Promise<RootState> {
  const { codec, clockMs = Date.now, minSeqOf = () => undefined } = options;
  const written = await casRoot(
    store,
    ns,
    ({ root: before }) => {
      const changed = change(before);
      if (changed === before) return undefined;
      return retireRemoved(
        before,
        { ...changed, generation: Math.max(changed.generation, before.generation + 1) },
        clockMs(),
      );
    },
    {
      codec,
      keepHistory: true,
      check: (before, next) => checkRegistrations({ store, before, next, minSeqOf }),
      ...(options.beforeWrite && { beforeWrite: options.beforeWrite }),
    },
  );
  return (written as WrittenRoot).root;
}

/**
 * Fences the namespace's publications in flight (spec 6b): one CAS of the root with the generation
 * + 1 and nothing else changed, so a root CAS sent with an older ETag fails however late it arrives.
 * Undefined when the namespace has no root (no publication can land there either).
 */
export async function fenceRoot(store: ObjectStore, ns: NamespaceId, codec: RootCodec): Promise<RootState | undefined> {
  const fenced = await casRoot(
    store,
    ns,
    (current) => Object.freeze({ ...current.root, generation: current.root.generation + 1 }),
    { codec },
  );
  return fenced?.root;
}

/**
 * A change of the current root by CAS (`change` of it; undefined when it needs none), re-read and
 * decided again after every lost race, for the collector's own writes (stamps, the lost-write cutoff,
 * dropped records: read up to `maxBytes`, past the readers' limit only to shrink the root) and a job
 * settling its publication. Bounded rounds: undefined when every one was lost to other writers.
 */
export const changeRoot = (
  store: ObjectStore,
  ns: NamespaceId,
  change: (current: ReadRoot) => RootState | undefined,
  options: { readonly codec: RootCodec; readonly maxRounds: number; readonly maxBytes?: number },
): Promise<WrittenRoot | undefined> => casRoot(store, ns, change, options);
