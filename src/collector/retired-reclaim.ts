/**
 * The collector's reclaim of retired segments and lost writes (spec 6a), over the store port:
 * the decisions are src/collector/retired's, made at the pass's fixed clock. It streams like the
 * job-prefix walk: one listing of `metadata/segments/`, then one listing per job prefix that holds
 * due retired outputs, each deleted in batches as it is listed, so its memory is a batch and the
 * root's own lists, never the keys under `metadata/segments/`. Data first, records last: a batch's
 * objects are deleted, then their records dropped from the retired list by root CAS, so a record
 * never outlives nothing and a segment never loses its record while it still exists.
 */
import { inputSegmentsPrefix, isInputSegmentKeyOf, jobPrefix, parseCompactionKey, type NamespaceId } from '../keys';
import {
  condemnLostWrites,
  MAX_COLLECTED_ROOT_BYTES,
  rootIndex,
  stampRetirements,
  type RootCodec,
  type RootState,
} from '../root';
import type { ObjectInfo, ObjectStore } from '../store';
import { LAST_MODIFIED_RESOLUTION_MS } from '../store/clock-skew';
import { atLeast, oversizeProblem, rootProblemOf, type RootProblem } from './root-problem';
import { DeleteFailedError } from './manifest';
import { decideSegment, droppableRecords, dueRetiredKeys, isCondemned, withoutReclaimed } from './retired';
import type { RetiredReclaimOptions, RetiredRules } from './rules';
import { EMPTY_RETIRED_TALLY, type RetiredTally } from './report';
import { changeRoot, readRoot } from '../protocol/root-io';
import { judgeRoot } from './judged-root';
import { deleterOf, type Deleter } from './manifest';

/**
 * `oversize`: the root was past the readers' limit when the reclaim read it (it reclaimed, and shrank it, all the
 * same).
 */
export type RetiredReclaimOutcome =
  { readonly tally: RetiredTally; readonly oversize?: RootProblem } | { readonly rootProblem: RootProblem };

/**
 * Where a reclaim stands: every key up to `after` (in listing order) of its phase is settled and
 * counted in `tally`, its records dropped. Travels in Temporal heartbeats: a few hundred bytes plus
 * the report's bounded key list.
 */
export interface RetiredPosition {
  /** `segments`: the listing of `metadata/segments/`; `outputs`: the due retired outputs, job prefix by job prefix. */
  readonly phase: 'segments' | 'outputs';
  readonly after: string | undefined;
  readonly tally: RetiredTally;
}

export const START_OF_RETIRED: RetiredPosition = Object.freeze({
  phase: 'segments',
  after: undefined,
  tally: EMPTY_RETIRED_TALLY,
});

/**
 * Root CAS rounds to drop a batch's records; records left behind are dropped by a later pass (their segments are gone).
 */
const MAX_RECORD_ROUNDS = 5;

function addTally(a: RetiredTally, b: RetiredTally, limit: number): RetiredTally {
  const sum = { ...a, unrecognisedKeys: [...a.unrecognisedKeys, ...b.unrecognisedKeys].slice(0, limit) };
  for (const name of Object.keys(EMPTY_RETIRED_TALLY) as (keyof RetiredTally)[])
    if (name !== 'unrecognisedKeys') sum[name] = a[name] + b[name];
  return sum;
}

type Mutable<T> = { -readonly [K in keyof T]: T[K] };

const emptyRetained = (): Mutable<RetiredTally> & { unrecognisedKeys: string[] } => ({
  ...EMPTY_RETIRED_TALLY,
  unrecognisedKeys: [],
});

/**
 * One page of a listing, with the due keys it settles: those it holds are among `objects`, those it passed over are
 * `gone`.
 */
interface JoinedPage {
  readonly objects: readonly ObjectInfo[];
  readonly gone: readonly string[];
  /** The last key the listing has passed (a gone key included): the position once this page is settled. */
  readonly upTo: string | undefined;
}

/**
 * Lists `prefix` after `after` as one listing (resumed with `StartAfter`, continued by cursor) and
 * joins it with `due`, sorted keys under `prefix`: a due key the listing passes without meeting is
 * gone. Listings are strongly consistent and a retired key existed when it was published, so not
 * listed means deleted. (Keys of the grammar are ASCII: string order is the listing's byte order.)
 */
async function* joinedListing(
  store: ObjectStore,
  prefix: string,
  due: readonly string[],
  after: string | undefined,
): AsyncGenerator<JoinedPage> {
  let next = after === undefined ? 0 : due.findIndex((k) => k > after);
  if (next < 0) next = due.length;
  let cursor: string | undefined;
  let listedUpTo = after;
  do {
    const page = await store.list(cursor === undefined ? { prefix, startAfter: listedUpTo } : { prefix, cursor });
    const gone: string[] = [];
    for (const o of page.objects) {
      while (next < due.length && (due[next] as string) < o.key) gone.push(due[next++] as string);
      if (due[next] === o.key) next++;
    }
    cursor = page.nextCursor;
    listedUpTo = page.objects.at(-1)?.key ?? listedUpTo;
    if (cursor === undefined) while (next < due.length) gone.push(due[next++] as string);
    const upTo = [listedUpTo, gone.at(-1)]
      .filter((k): k is string => k !== undefined)
      .sort()
      .at(-1);
    yield { objects: page.objects, gone, upTo };
  } while (cursor !== undefined);
}

/** The due retired outputs (keys under job prefixes), sorted, by job prefix in key order. */
function dueOutputsByPrefix(ns: NamespaceId, due: readonly string[]): Map<string, string[]> {
  const byPrefix = new Map<string, string[]>();
  for (const key of due) {
    const parsed = parseCompactionKey(key);
    if (parsed.kind !== 'staged_segment') continue;
    const prefix = jobPrefix(ns, parsed.jobId);
    const keys = byPrefix.get(prefix);
    if (keys) keys.push(key);
    else byPrefix.set(prefix, [key]);
  }
  return byPrefix;
}

/**
 * The root the reclaim decides by, read once (up to `MAX_COLLECTED_ROOT_BYTES`), and whether it is
 * past the readers' limit; or, for a root that cannot be trusted, the outcome: nothing to reclaim
 * (missing, and `metadata/segments/` empty), else the problem.
 */
async function rootToReclaimBy(
  store: ObjectStore,
  ns: NamespaceId,
  codec: RootCodec,
): Promise<{ root: RootState; judgedGeneration: number; oversize?: RootProblem } | RetiredReclaimOutcome> {
  try {
    const read = await judgeRoot(store, ns, codec, MAX_COLLECTED_ROOT_BYTES);
    const oversize = oversizeProblem(ns, read.bytes);
    // Retirements no pass has seen yet are stamped visible at the LastModified of the root that shows
    // them (spec 6c.2), rounded up to its resolution (a GET's is the second): their reader grace counts
    // from here. A dry run decides by the root it would have written, as the real pass would.
    const visibleBy = (lastModified: Date) => lastModified.getTime() + LAST_MODIFIED_RESOLUTION_MS;
    const stamped = await changeRoot(
      store,
      ns,
      (current) => current.lastModified && stampRetirements(current.root, visibleBy(current.lastModified)),
      {
        codec,
        maxRounds: MAX_RECORD_ROUNDS,
        maxBytes: MAX_COLLECTED_ROOT_BYTES,
      },
    );
    const root = stamped ? atLeast({ ...read, root: stamped.root }, read.root.generation) : read.root;
    return { root, judgedGeneration: read.root.generation, ...(oversize && { oversize }) };
  } catch (err) {
    const problem = rootProblemOf(err, ns);
    if (!problem) throw err;
    const empty =
      problem.problem === 'missing' &&
      (await store.list({ prefix: inputSegmentsPrefix(ns), maxKeys: 1 })).objects.length === 0;
    return empty ? { tally: EMPTY_RETIRED_TALLY } : { rootProblem: problem };
  }
}

type RetainedCount = 'retainedUnrecognised' | 'retainedReferenced' | 'retainedInGrace' | 'retainedYoung';

/**
 * What the listing of `metadata/segments/` does with an object: a delete candidate, the count it is retained under, or
 * nothing (a key of a job prefix).
 */
function listedFate(
  ns: NamespaceId,
  root: RootState,
  o: ObjectInfo,
  rules: RetiredRules,
): 'candidate' | RetainedCount | undefined {
  if (!isInputSegmentKeyOf(ns, o.key)) return 'retainedUnrecognised';
  const fate = decideSegment(root, o.key, o.lastModified, rules);
  return (
    {
      retired_due: 'candidate',
      lost_write: 'candidate',
      referenced: 'retainedReferenced',
      retired_in_grace: 'retainedInGrace',
      young: 'retainedYoung',
      job_prefix: undefined,
    } as const
  )[fate];
}

/**
 * How one reclaim of a namespace's retired segments runs: the root codec, where it resumes, whom it tells, how it
 * deletes.
 */
export interface RetiredReclaim {
  readonly codec: RootCodec;
  /** Where a reclaim an earlier attempt started goes on (its tally counted on); the beginning by default. */
  readonly from?: RetiredPosition;
  /** Receives the position after every listing page and batch, so a retried attempt resumes there. */
  readonly onProgress?: (position: RetiredPosition) => void;
  /** How batches are deleted and recorded; a deleter of its own (no manifest) by default. */
  readonly deletes?: Deleter;
}

/**
 * Reclaims a namespace's due retired segments and lost writes from `run.from`. A root that is missing,
 * corrupt or unreadable deletes nothing and is reported (a missing root only when
 * `metadata/segments/` holds anything: otherwise there is nothing to retain). A root past the readers'
 * limit is read (up to `MAX_COLLECTED_ROOT_BYTES`, at most two decoded at once) and shrunk: dropping
 * records is how it gets back under. `onProgress` gets the position after every listing page and
 * every batch, so a retried attempt resumes there.
 */
export async function reclaimRetiredSegments(
  store: ObjectStore,
  ns: NamespaceId,
  options: RetiredReclaimOptions,
  run: RetiredReclaim,
): Promise<RetiredReclaimOutcome> {
  const { codec, from: resume = START_OF_RETIRED, onProgress = () => {}, deletes = deleterOf(store, undefined) } = run;
  const read = await rootToReclaimBy(store, ns, codec);
  if (!('root' in read)) return read;
  const { root, oversize } = read;
  // Every root this reclaim decides by later must be at least as new as the one it judged (a dry run's stamps are never
  // written, so not the stamped one): an older one went back (spec 6c.5).
  const judged: RetiredBatches = {
    store,
    ns,
    codec,
    deletes,
    options: { ...options, minRootGeneration: read.judgedGeneration },
  };
  const segments = inputSegmentsPrefix(ns);
  const due = dueRetiredKeys(root, options).sort();
  let position = resume;
  let candidates: ObjectInfo[] = [];
  let gone: string[] = [];
  let retained = emptyRetained();

  /** Deletes the batch in hand, drops its records, and moves the position past it (in `phase`, up to `upTo`). */
  const flush = async (phase: RetiredPosition['phase'], upTo: string | undefined): Promise<void> => {
    const settled = await reclaimBatch(judged, candidates, gone);
    const tally = addTally(retained, settled.tally, options.reportLimit);
    candidates = [];
    gone = [];
    retained = emptyRetained();
    // A failed delete leaves the position where it was: the batch is listed again on retry (the deleted keys then as
    // gone).
    const at = settled.failure ? position : { phase, after: upTo };
    position = { phase: at.phase, after: at.after, tally: addTally(position.tally, tally, options.reportLimit) };
    onProgress(position);
    if (settled.failure) throw settled.failure;
  };

  if (position.phase === 'segments') {
    const dueSegments = due.filter((k) => k.startsWith(segments));
    for await (const page of joinedListing(store, segments, dueSegments, position.after)) {
      for (const o of page.objects) {
        const fate = listedFate(ns, root, o, options);
        if (fate === 'candidate') candidates.push(o);
        else if (fate) retained[fate]++;
        if (fate === 'retainedUnrecognised' && retained.unrecognisedKeys.length < options.reportLimit)
          retained.unrecognisedKeys.push(o.key);
      }
      gone.push(...page.gone);
      if (candidates.length + gone.length >= options.keysPerFlush) await flush('segments', page.upTo);
      else onProgress(position);
    }
    await flush('outputs', undefined);
  }

  // Due retired outputs live under job prefixes: one listing of each such prefix finds them (or finds
  // them gone). A listing, not a HEAD: the collector's policy grants no GetObject on segments.
  for (const [prefix, keys] of dueOutputsByPrefix(ns, due)) {
    const after = position.after;
    if (after !== undefined && (keys.at(-1) as string) <= after) continue;
    const wanted = new Set(keys);
    for await (const page of joinedListing(store, prefix, keys, after?.startsWith(prefix) ? after : undefined)) {
      candidates.push(...page.objects.filter((o) => wanted.has(o.key)));
      gone.push(...page.gone);
      if (candidates.length + gone.length >= options.keysPerFlush) await flush('outputs', page.upTo);
      else onProgress(position);
    }
  }
  await flush('outputs', due.at(-1));
  return { ...(oversize && { oversize }), tally: position.tally };
}

/** Where a reclaim's batches go: its store and namespace, its root codec and deleter, its rules and judged root. */
interface RetiredBatches {
  readonly store: ObjectStore;
  readonly ns: NamespaceId;
  readonly codec: RootCodec;
  readonly deletes: Deleter;
  /** `minRootGeneration`: the root the reclaim judged; an older one went back, and nothing is decided by it. */
  readonly options: RetiredReclaimOptions & { readonly minRootGeneration: number };
}

/**
 * Deletes the candidates the root as it is now still dooms (candidate selection may be stale,
 * deletion may not), then drops the records of the retired ones and of the due keys found gone.
 * WARN: a lost write is deleted only once the root condemns it (its `LastModified` at or before the
 * lost-write cutoff, spec 6c.1), so the cutoff is raised by CAS first where it does not yet reach: a
 * registration sent on an older root then fails its precondition however late it arrives.
 * A DeleteObjects that failed for some keys is returned as `failure`, after the records of the rest are dropped.
 */
async function reclaimBatch(
  at: RetiredBatches,
  candidates: readonly ObjectInfo[],
  gone: readonly string[],
): Promise<{ readonly tally: RetiredTally; readonly failure?: DeleteFailedError }> {
  const { store, ns, codec, deletes, options } = at;
  if (candidates.length === 0 && gone.length === 0) return { tally: EMPTY_RETIRED_TALLY };
  let fresh = atLeast(await readRoot(store, ns, codec, MAX_COLLECTED_ROOT_BYTES), options.minRootGeneration);
  const fates = (root: RootState) =>
    candidates.map((o) => ({ o, fate: decideSegment(root, o.key, o.lastModified, options) }));
  if (fates(fresh).some(({ o, fate }) => fate === 'lost_write' && !isCondemned(fresh, o.lastModified))) {
    const cutoffMs = options.nowMs - options.lostWriteGraceMs;
    const condemned = await changeRoot(
      store,
      ns,
      (current) => condemnLostWrites(atLeast(current, options.minRootGeneration), cutoffMs),
      {
        codec,
        maxRounds: MAX_RECORD_ROUNDS,
        maxBytes: MAX_COLLECTED_ROOT_BYTES,
      },
    );
    // Races lost to other writers leave the lost writes for a later pass; a dry run decides by the root it would have
    // written.
    if (condemned) fresh = condemned.root;
  }
  const doomed = fates(fresh).filter(
    ({ o, fate }) => fate === 'retired_due' || (fate === 'lost_write' && isCondemned(fresh, o.lastModified)),
  );
  const retired = rootIndex(fresh).retired;
  const { failed } = await deletes(
    doomed.map(({ o, fate }) => {
      const entry = retired.get(o.key);
      const read = {
        rootGeneration: fresh.generation,
        ...(entry && { retiredAtMs: entry.retired_at_ms }),
        ...(entry?.visible_at_ms !== undefined && { visibleAtMs: entry.visible_at_ms }),
      };
      return { object: o, rule: fate === 'retired_due' ? 'retired_segment' : 'lost_write', read };
    }),
  );
  const failedKeys = new Set(failed.map((f) => f.key));
  const reclaimed = new Set(gone);
  const tally: Mutable<RetiredTally> = {
    ...EMPTY_RETIRED_TALLY,
    retainedReferenced: candidates.length - doomed.length,
  };
  for (const { o, fate } of doomed.filter(({ o }) => !failedKeys.has(o.key))) {
    if (fate === 'retired_due') {
      tally.retiredDeleted++;
      reclaimed.add(o.key);
    } else tally.lostWritesDeleted++;
    tally.bytesDeleted += o.size;
  }
  tally.retiredRecordsDropped = await dropRecords(at, reclaimed);
  return { tally, ...(failed.length && { failure: new DeleteFailedError(inputSegmentsPrefix(ns), failed) }) };
}

/**
 * Drops the records of segments that are gone by root CAS, re-reading on every lost race; returns
 * how many it dropped (none counted for a CAS whose answer was lost, though it may have landed).
 */
async function dropRecords(
  { store, ns, codec, options: rules }: RetiredBatches,
  gone: ReadonlySet<string>,
): Promise<number> {
  if (gone.size === 0) return 0;
  let dropped = 0;
  // A publication or a writer may win a race, or our own CAS answer late: each round reads the root again.
  const written = await changeRoot(
    store,
    ns,
    (current) => {
      const root = atLeast(current, rules.minRootGeneration);
      dropped = droppableRecords(root, gone, rules).length;
      return withoutReclaimed(root, gone, rules);
    },
    { codec, maxRounds: MAX_RECORD_ROUNDS, maxBytes: MAX_COLLECTED_ROOT_BYTES },
  );
  return written?.written ? dropped : 0;
}
