/**
 * The collector's reclaim of superseded segments and lost writes (spec 6a), over the store port:
 * the decisions are src/protocol/retired's, made at the pass's fixed clock. Data first, records
 * last: the objects are deleted, then their records dropped from the retired list by root CAS, so
 * a record never outlives nothing and a segment never loses its record while it still exists.
 */
import { inputSegmentsPrefix, isInputSegmentKeyOf, rootKey, type NamespaceId } from '../keys';
import { encodeRootForWrite, MAX_COLLECTED_ROOT_BYTES, type RootCodec, type RootState } from '../root';
import { AmbiguousError, ConflictError, PreconditionFailedError, type ObjectInfo, type ObjectStore } from '../store';
import { inBatches } from '../store/batches';
import { DeleteFailedError, oversizeProblem, rootProblemOf, type RootProblem } from './collector';
import { decideSegment, droppableRecords, dueRetiredKeys, withoutReclaimed, type RetiredRules, type SegmentFate } from './retired';
import { EMPTY_RETIRED_TALLY, type RetiredTally } from './collector-report';
import { readRoot } from './root-io';

export interface RetiredReclaimOptions extends RetiredRules {
  readonly dryRun: boolean;
  /** Candidates deleted per batch, each after a fresh read of the root. */
  readonly keysPerFlush: number;
  readonly reportLimit: number;
}

/** `oversize`: the root was past the readers' limit when the reclaim read it (it reclaimed, and shrank it, all the same). */
export type RetiredReclaimOutcome = { readonly tally: RetiredTally; readonly oversize?: RootProblem } | { readonly rootProblem: RootProblem };

/** Look-ups of due retired outputs in flight at once: the collector's DeleteObjects parallelism. */
const LOOKUP_CONCURRENCY = 8;
/** Root CAS rounds to drop records; records left behind are dropped by a later pass (their segments are gone). */
const MAX_RECORD_ROUNDS = 5;

/** A key the pass may delete under the root it was judged by. */
const isDoomed = (root: RootState, o: ObjectInfo, rules: RetiredRules): boolean => {
  const fate = decideSegment(root, o.key, o.lastModified, rules);
  return fate === 'retired_due' || fate === 'lost_write';
};

/**
 * Reclaims a namespace's due retired segments and lost writes. A root that is missing, corrupt or
 * unreadable deletes nothing and is reported (a missing root only when `metadata/segments/` holds
 * anything: otherwise there is nothing to retain). A root past the readers' limit is read (up to
 * `MAX_COLLECTED_ROOT_BYTES`, at most two decoded at once) and shrunk: dropping records is how it
 * gets back under. `onProgress` is called after every page and batch.
 */
export async function reclaimRetiredSegments(
  store: ObjectStore,
  ns: NamespaceId,
  options: RetiredReclaimOptions,
  onProgress: () => void,
  codec: RootCodec,
): Promise<RetiredReclaimOutcome> {
  let root: RootState;
  let oversize: RootProblem | undefined;
  try {
    const read = await readRoot(store, ns, codec, MAX_COLLECTED_ROOT_BYTES);
    root = read.root;
    oversize = oversizeProblem(ns, read.bytes);
  } catch (err) {
    const problem = rootProblemOf(err, ns);
    if (!problem) throw err;
    if (problem.problem === 'missing' && (await store.list({ prefix: inputSegmentsPrefix(ns), maxKeys: 1 })).objects.length === 0) {
      return { tally: EMPTY_RETIRED_TALLY };
    }
    return { rootProblem: problem };
  }

  const counts: Record<SegmentFate, number> = { referenced: 0, retired_due: 0, retired_in_grace: 0, lost_write: 0, young: 0, job_prefix: 0 };
  const unrecognisedKeys: string[] = [];
  let unrecognised = 0;
  const candidates: ObjectInfo[] = [];
  const listed = new Set<string>();
  let cursor: string | undefined;
  do {
    const page = await store.list({ prefix: inputSegmentsPrefix(ns), cursor });
    for (const o of page.objects) {
      listed.add(o.key);
      if (!isInputSegmentKeyOf(ns, o.key)) {
        unrecognised++;
        if (unrecognisedKeys.length < options.reportLimit) unrecognisedKeys.push(o.key);
        continue;
      }
      if (isDoomed(root, o, options)) candidates.push(o);
      else counts[decideSegment(root, o.key, o.lastModified, options)]++;
    }
    cursor = page.nextCursor;
    onProgress();
  } while (cursor !== undefined);

  // Due retired outputs live under job prefixes, which the listing above does not cover: a listing of each
  // key finds it (or finds it gone). A listing, not a HEAD: the collector's policy grants no GetObject on segments.
  const gone = new Set<string>();
  const dueElsewhere = dueRetiredKeys(root, options).filter((k) => !listed.has(k));
  const found = await inBatches(dueElsewhere, 1, LOOKUP_CONCURRENCY, async ([key]) => {
    const object = (await store.list({ prefix: key as string, maxKeys: 1 })).objects.find((o) => o.key === key);
    if (!object) gone.add(key as string);
    return object ? [object] : [];
  });
  candidates.push(...found.flat());
  onProgress();

  let retiredDeleted = 0;
  let lostWritesDeleted = 0;
  let bytesDeleted = 0;
  let retainedLate = 0;
  for (let i = 0; i < candidates.length; i += options.keysPerFlush) {
    const batch = candidates.slice(i, i + options.keysPerFlush);
    // Candidate selection may be stale, deletion may not: the batch is judged again by the root as it is now.
    const fresh = (await readRoot(store, ns, codec, MAX_COLLECTED_ROOT_BYTES)).root;
    const doomed = batch.filter((o) => isDoomed(fresh, o, options));
    retainedLate += batch.length - doomed.length;
    const failed = options.dryRun ? [] : (await store.deleteMany(doomed.map((o) => o.key))).failed;
    const failedKeys = new Set(failed.map((f) => f.key));
    for (const o of doomed.filter((d) => !failedKeys.has(d.key))) {
      if (decideSegment(fresh, o.key, o.lastModified, options) === 'retired_due') {
        retiredDeleted++;
        gone.add(o.key);
      } else lostWritesDeleted++;
      bytesDeleted += o.size;
    }
    onProgress();
    if (failed.length) throw new DeleteFailedError(inputSegmentsPrefix(ns), failed);
  }

  const retiredRecordsDropped = options.dryRun ? droppableRecords(root, gone, options).length : await dropRecords(store, ns, gone, options, codec);
  return {
    ...(oversize && { oversize }),
    tally: {
      retiredDeleted,
      lostWritesDeleted,
      bytesDeleted,
      retiredRecordsDropped,
      // A key the fresh root kept was referenced again or retired again since the first read.
      retainedReferenced: counts.referenced + retainedLate,
      retainedInGrace: counts.retired_in_grace,
      retainedYoung: counts.young,
      retainedUnrecognised: unrecognised,
      unrecognisedKeys,
    },
  };
}

/**
 * Drops the records of segments that are gone by root CAS, re-reading on every lost race; returns
 * how many it dropped (none counted for a CAS whose answer was lost, though it may have landed).
 */
async function dropRecords(store: ObjectStore, ns: NamespaceId, gone: ReadonlySet<string>, rules: RetiredRules, codec: RootCodec): Promise<number> {
  for (let round = 0; round < MAX_RECORD_ROUNDS; round++) {
    const current = await readRoot(store, ns, codec, MAX_COLLECTED_ROOT_BYTES);
    const next = withoutReclaimed(current.root, gone, rules);
    if (!next) return 0;
    try {
      await store.putIfMatch(rootKey(ns), encodeRootForWrite(codec, next, current.bytes), current.etag);
      return droppableRecords(current.root, gone, rules).length;
    } catch (err) {
      // A publication or a writer won the race, or our own CAS answered late: the next round reads the root again.
      if (!(err instanceof PreconditionFailedError || err instanceof ConflictError || err instanceof AmbiguousError)) throw err;
    }
  }
  return 0;
}
