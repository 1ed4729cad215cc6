/**
 * The store probe: the properties of an S3-compatible store that the protocol takes for granted,
 * checked against the configured bucket in a handful of requests under a probe prefix of its own,
 * which it deletes again. A store that accepts `If-None-Match` / `If-Match` and ignores them gives
 * two owners of one prefix and no error anywhere; this is where that shows, before a worker starts.
 */
import { TypedError } from '../errors';
import { storeProbeKeys } from '../keys';
import { clockSkew } from './clock-skew';
import {
  AmbiguousError,
  ConflictError,
  NotFoundError,
  PreconditionFailedError,
  StoreUnavailableError,
  type BucketVersioning,
  type ObjectStore,
} from './port';

/** The properties, in the order the probe checks them. */
export const STORE_PROPERTIES = {
  'create-race': 'a put-if-absent race of 16 writers has exactly one winner',
  'stale-if-match': 'If-Match with a stale ETag is refused',
  'if-match-missing': 'If-Match on a missing key is refused (404 or 412) and creates nothing',
  'new-etag': 'every distinct write gets a new ETag',
  'read-after-write': 'a write is visible at once to GET and LIST',
  'clock-skew': "the store's LastModified is within half the clock safety margin of the local clock",
  'delete-missing': 'DeleteObjects of a missing key succeeds',
} as const;
export type StorePropertyId = keyof typeof STORE_PROPERTIES;

export interface StorePropertyResult {
  readonly property: StorePropertyId;
  /** The property in words, as docs/stores.md lists it. */
  readonly statement: string;
  readonly outcome: 'held' | 'failed';
  /** What was seen: for a failure, what the store did instead. */
  readonly detail: string;
}

export interface StoreCheck {
  /** The store's description (backend and bucket or file). */
  readonly store: string;
  /** Every property of {@link STORE_PROPERTIES}, in that order. */
  readonly properties: readonly StorePropertyResult[];
  /**
   * Reported, not checked: with versioning, deletions leave noncurrent versions (docs/operations.md has the lifecycle
   * rule).
   */
  readonly versioning: BucketVersioning;
  /**
   * Reported, not required: whether a conditional delete (`If-Match` on DeleteObject) with a stale ETag
   * is refused and keeps the object. `ignored`: the object was deleted; the collector's deletion of a
   * lease is then checked by a read only, not fenced (docs/stores.md).
   */
  readonly conditionalDelete: ConditionalDelete;
  /** Whether every property held: the store is fit for the protocol. */
  readonly fit: boolean;
  readonly durationMs: number;
}

/** What a store does with a conditional delete whose ETag is stale: refuse it (412), or delete anyway. */
export type ConditionalDelete = 'honoured' | 'ignored';

export interface VerifyStoreOptions {
  /**
   * The allowed error between host clocks and the store's `LastModified` (`COMPACTION_CLOCK_SAFETY_MARGIN_MS`); the
   * probe allows half of it.
   */
  readonly clockSafetyMarginMs: number;
}

/** A worker refuses to start on a store that failed a property: the message names the property and the store. */
export class StoreUnfitError extends TypedError {
  readonly failureType = 'StoreUnfit';
  constructor(
    readonly check: StoreCheck,
    readonly failed: StorePropertyResult,
  ) {
    super(
      `store ${check.store} failed the store check: ${failed.property} (${failed.statement}): ${failed.detail}; ` +
        'the protocol is unsafe on it (docs/stores.md); set COMPACTION_STORE_CHECK=skip only for a store verified out of band',
    );
  }
}

/** Throws {@link StoreUnfitError} naming the first property that failed. */
export function requireFitStore(check: StoreCheck): void {
  const failed = check.properties.find((p) => p.outcome === 'failed');
  if (failed) throw new StoreUnfitError(check, failed);
}

/**
 * How many writers race to create one key: enough to catch a store that lets several through, few enough to stay a
 * handful of requests.
 */
const RACE_WRITERS = 16;

const bytes = (text: string) => new TextEncoder().encode(text);
const unquoted = (etag: string | undefined) => etag?.replace(/^W\//, '').replace(/"/g, '');

/**
 * Runs of a start-up check before a transient store error (a timeout, an unknown outcome) is thrown: each run is cheap,
 * and a worker start should not fail on one slow request.
 */
const START_CHECK_RUNS = 3;

/**
 * Runs `check` again while it fails with a store error that is no evidence either way (unavailable,
 * timed out, an unknown outcome), at most {@link START_CHECK_RUNS} times; a denial or any other error is thrown at
 * once.
 */
export async function retryInconclusive<T>(check: () => Promise<T>): Promise<T> {
  for (let run = 1; ; run++) {
    try {
      return await check();
    } catch (err) {
      const inconclusive =
        err instanceof AmbiguousError || err instanceof StoreUnavailableError || err instanceof ConflictError;
      if (!inconclusive || run >= START_CHECK_RUNS) throw err;
    }
  }
}

/**
 * Checks every property of {@link STORE_PROPERTIES} and reports each, held or failed. A store error
 * that is no evidence either way runs the probe again under fresh keys ({@link retryInconclusive}),
 * and is then thrown, as a denial is at once: the properties are then unknown. Whatever happens,
 * each run deletes what it wrote before it ends.
 */
export async function verifyStore(store: ObjectStore, options: VerifyStoreOptions): Promise<StoreCheck> {
  const started = performance.now();
  const { properties, versioning, conditionalDelete } = await retryInconclusive(() => probeOnce(store, options));
  return {
    store: store.description,
    properties,
    versioning,
    conditionalDelete,
    fit: properties.every((p) => p.outcome === 'held'),
    durationMs: Math.round(performance.now() - started),
  };
}

/** One run of the probe: its store, its keys, and where each property's outcome is reported. */
interface ProbeRun {
  readonly store: ObjectStore;
  readonly keys: ReturnType<typeof storeProbeKeys>;
  readonly report: (property: StorePropertyId, held: boolean, detail: string) => void;
}

/**
 * One run of the probe. The steps run in the order of {@link STORE_PROPERTIES}, each on the object the
 * one before left (its ETags chain from step to step), and its keys are deleted whatever happens.
 */
async function probeOnce(
  store: ObjectStore,
  options: VerifyStoreOptions,
): Promise<Pick<StoreCheck, 'properties' | 'versioning' | 'conditionalDelete'>> {
  const keys = storeProbeKeys();
  const results: StorePropertyResult[] = [];
  const report = (property: StorePropertyId, held: boolean, detail: string) =>
    results.push({ property, statement: STORE_PROPERTIES[property], outcome: held ? 'held' : 'failed', detail });
  const run: ProbeRun = { store, keys, report };
  let cleanedUp = false;
  try {
    const first = (await probeCreateRace(run)).etag;
    const { second, stale } = await probeStaleIfMatch(run, first);
    await probeIfMatchMissing(run, first);
    const { third, sentAt, answeredAt } = await probeNewEtag(run, [first, second, stale]);
    const read = await probeReadAfterWrite(run, third);
    // 6. Clock skew, from the same write: its LastModified must lie between sending and answer, give or take the
    //    allowance.
    report('clock-skew', ...clockSkew(read.lastModified, sentAt, answeredAt, options.clockSafetyMarginMs / 2));
    const conditionalDelete = await probeConditionalDelete(run, first);
    await probeDeleteMissing(run);
    cleanedUp = true;
    return { properties: results, versioning: await store.versioning(), conditionalDelete };
  } catch (err) {
    // A compare-and-swap from an ETag the store answered itself was refused: its ETags name no version
    // (one ETag for every write, a proxy rewriting them), so no lease or root write could ever succeed.
    if (!(err instanceof PreconditionFailedError)) throw err;
    report(
      'new-etag',
      false,
      `a compare-and-swap of ${err.key} from the ETag the store answered for it was refused: its ETags do not name the versions written`,
    );
    return { properties: results, versioning: await store.versioning(), conditionalDelete: 'ignored' };
  } finally {
    if (!cleanedUp) await store.deleteMany([keys.object, keys.missing]).catch(() => undefined);
  }
}

/**
 * 1. The race: every loser must be refused (412) or told of a concurrent conditional write (409). Returns the object
 * created.
 */
async function probeCreateRace({ store, keys, report }: ProbeRun) {
  const attempts = await Promise.allSettled(
    Array.from({ length: RACE_WRITERS }, (_, i) => store.putIfAbsent(keys.object, bytes(`writer ${i}`))),
  );
  const unexpected = attempts.find(
    (a) =>
      a.status === 'rejected' && !(a.reason instanceof PreconditionFailedError || a.reason instanceof ConflictError),
  );
  if (unexpected?.status === 'rejected') throw unexpected.reason;
  const winners = attempts.flatMap((a, i) => (a.status === 'fulfilled' ? [{ writer: i, etag: a.value.etag }] : []));
  // No winner at all (every writer told of a conflict): the rest of the probe still needs the object.
  if (winners.length === 0) await store.put(keys.object, bytes('after the race'));
  const created = await store.get(keys.object);
  const winner = winners.find((w) => unquoted(w.etag) === unquoted(created.etag));
  report(
    'create-race',
    winners.length === 1 && winner !== undefined,
    winners.length === 1
      ? winner
        ? `1 of ${RACE_WRITERS} writers created the key; ${RACE_WRITERS - 1} were refused`
        : `the one winner's ETag ${winners[0]?.etag} is not the stored object's ${created.etag}`
      : `${winners.length} of ${RACE_WRITERS} writers were told they created the key`,
  );
  return created;
}

/** 2. Compare-and-swap from the created version, then once more from that stale ETag. */
async function probeStaleIfMatch({ store, keys, report }: ProbeRun, first: string) {
  const second = await store.putIfMatch(keys.object, bytes('second write'), first);
  const stale = await outcomeOf(store.putIfMatch(keys.object, bytes('stale write'), first));
  report(
    'stale-if-match',
    stale instanceof PreconditionFailedError,
    stale instanceof PreconditionFailedError
      ? 'refused with 412'
      : stale instanceof Error
        ? `answered ${stale.name}, not 412`
        : 'the write with a stale ETag was accepted',
  );
  return { second, stale };
}

/** 3. A CAS must never create: a missing lease is "fenced" to a job (404 or 412 both map there). */
async function probeIfMatchMissing({ store, keys, report }: ProbeRun, first: string) {
  const onMissing = await outcomeOf(store.putIfMatch(keys.missing, bytes('never created'), first));
  const refusedMissing = onMissing instanceof NotFoundError || onMissing instanceof PreconditionFailedError;
  const createdMissing = !((await outcomeOf(store.head(keys.missing).then(() => undefined))) instanceof NotFoundError);
  report(
    'if-match-missing',
    refusedMissing && !createdMissing,
    createdMissing
      ? 'the write created the key'
      : refusedMissing
        ? `refused with ${onMissing instanceof NotFoundError ? '404' : '412'}, nothing created`
        : onMissing instanceof Error
          ? `answered ${onMissing.name}`
          : 'the write was accepted',
  );
}

/** 4. The last write, from the current ETag, timed against the local clock: the three writes' ETags must differ. */
async function probeNewEtag(
  { store, keys, report }: ProbeRun,
  [first, second, stale]: [string, { etag: string }, Error | undefined],
) {
  const current = stale instanceof Error ? second.etag : ((await store.head(keys.object)).etag ?? second.etag);
  const sentAt = Date.now();
  const third = await store.putIfMatch(keys.object, bytes('third write'), current);
  const answeredAt = Date.now();
  const etags = [first, second.etag, third.etag].map(unquoted);
  report(
    'new-etag',
    new Set(etags).size === etags.length,
    `ETags of three writes of distinct bytes: ${etags.join(', ')}`,
  );
  return { third, sentAt, answeredAt };
}

/** 5. Read-after-write: the GET and the LIST right after the write both see it. Returns the GET's object. */
async function probeReadAfterWrite({ store, keys, report }: ProbeRun, third: { etag: string }) {
  const read = await store.get(keys.object);
  const listed = (await store.list({ prefix: keys.prefix })).objects.find((o) => o.key === keys.object);
  const readSeen =
    new TextDecoder().decode(read.body) === 'third write' && unquoted(read.etag) === unquoted(third.etag);
  const listSeen = unquoted(listed?.etag) === unquoted(third.etag);
  report(
    'read-after-write',
    readSeen && listSeen,
    `GET ${readSeen ? 'saw' : 'did not see'} the last write, LIST ${listSeen ? 'saw it' : `did not (${listed ? `ETag ${listed.etag}` : 'key absent'})`}`,
  );
  return read;
}

/**
 * Reported, not required: a conditional delete from the first, stale ETag must keep the object (a 404 would mean it
 * deleted it).
 */
async function probeConditionalDelete({ store, keys }: ProbeRun, first: string): Promise<ConditionalDelete> {
  const staleDelete = await outcomeOf(store.deleteIfMatch(keys.object, first));
  const kept = !((await outcomeOf(store.head(keys.object).then(() => undefined))) instanceof NotFoundError);
  return staleDelete instanceof PreconditionFailedError && kept ? 'honoured' : 'ignored';
}

/** 7. Cleanup with a key never written: a missing key must count as deleted, as the collector assumes. */
async function probeDeleteMissing({ store, keys, report }: ProbeRun) {
  const deleted = await store.deleteMany([keys.object, keys.missing, keys.neverWritten]);
  const missingFailure = deleted.failed.find((f) => f.key === keys.neverWritten);
  report(
    'delete-missing',
    !missingFailure && deleted.deleted.includes(keys.neverWritten),
    missingFailure ? `answered ${missingFailure.code}: ${missingFailure.message}` : 'counted as deleted',
  );
}

/**
 * The refusal a store call ended with, or undefined when it succeeded: a refusal is an outcome to
 * judge, not a failure of the probe. A 409 is thrown: with no concurrent writer it says nothing of
 * the condition, so the run is repeated.
 */
async function outcomeOf(call: Promise<unknown>): Promise<Error | undefined> {
  return call.then(
    () => undefined,
    (err: unknown) => {
      if (err instanceof PreconditionFailedError || err instanceof NotFoundError) return err;
      throw err;
    },
  );
}
