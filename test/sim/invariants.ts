/**
 * The safety invariants, checked where the world changes: each a named function that reports its
 * own violation with the evidence a reader (and the classifier of known defects) needs. They judge
 * what the bucket applied, never what a party believed.
 */
import { gunzipSync } from 'node:zlib';
import { decodeLease, type LeaseState } from '../../src/lease';
import {
  isInputSegmentKeyOf,
  jobPrefix,
  judgedRootKey,
  parseCompactionKey,
  parseManifestPartKey,
  rootKey,
  type MetadataCompactionId,
  type NamespaceId,
} from '../../src/keys';
import type { LiveRecord } from '../../src/reader';
import { jsonRootCodec, type RootState } from '../../src/root';
import { NotFoundError } from '../../src/store';
import type { SegmentRecord } from '../../src/segments';
import type { Model, Write } from './model';
import type { Monitor, Outcome, Sim, StoreRequest } from './sim';
import { shortKey } from './trace';
import type { Change, SimObject } from './world';

/** The job prefix a lease key is the lease of (`leaseKey` is the prefix and `lease.json`). */
const prefixOfLease = (key: string): string => key.slice(0, -'lease.json'.length);

/** What a reader sends its root read with: where the bucket records the event at which it applied it. */
export interface SnapshotContext {
  readonly snapshot: { event?: number };
}

/** What a reader sends its segment reads with: the promise `readableUntilMs` made about its snapshot. */
export interface ReaderContext {
  readonly reader: true;
  readonly readableUntilMs: number;
  readonly rootGeneration: number;
}

/** What a collector pass sends its requests with. */
export interface PassContext {
  readonly pass: string;
  /** Set once the pass has read a corrupt lease or found its namespace's root unusable: it may delete nothing more. */
  readonly corruption?: string;
}

/** What a writer sends its requests with. */
export interface WriteContext {
  readonly write: Write;
  /** When the PUT of the segment being registered was sent. */
  putSentAt?: number;
}

/** The root write that brought a key into a group: who sent it, when it was sent and when it landed. */
export interface Namer {
  readonly party: string;
  readonly kind?: string;
  readonly event: number;
  readonly at: number;
  readonly sentAt?: number;
}

/** How late a root write that retired a segment landed, after the `retired_at_ms` it wrote. */
export interface Retirement {
  readonly root: RootState;
  readonly retiredAtMs: number;
  readonly landedLateMs: number;
  readonly party: string;
  readonly kind?: string;
}

/** One version of the root as the bucket held it. */
export interface RootVersion {
  readonly event: number;
  readonly at: number;
  readonly party: string;
  readonly root: RootState | undefined;
  /** The root write that made it: when its request was sent, and what the sender was doing. */
  readonly request?: StoreRequest;
}

/**
 * The records of a v1 segment, for the evidence of a violation (the classifier reads them); undefined for anything
 * else.
 */
function recordsOf(body: Uint8Array): SegmentRecord[] | undefined {
  try {
    const lines = gunzipSync(body).toString('utf8').split('\n');
    return lines.flatMap((line) => {
      if (!line.startsWith('{"key"')) return [];
      return [JSON.parse(line) as SegmentRecord];
    });
  } catch {
    return undefined;
  }
}

export class Invariants implements Monitor {
  readonly roots: RootVersion[] = [];
  /** The last deletion of each key. */
  readonly deletions = new Map<string, { readonly event: number; readonly at: number; readonly party: string }>();
  /** The records each segment was written with (v1 only). */
  readonly segmentRecords = new Map<string, SegmentRecord[]>();
  private current: RootState | undefined;
  /** The last root that decoded: after a loss, the root lost. */
  private lastDecoded: RootState | undefined;
  /** Per job prefix, per pass: when its last claim written expires, on the store's clock. */
  private readonly claimedUntil = new Map<string, Map<string, number>>();
  /** Per job prefix, the pass that wrote its lease last as a claim. */
  private readonly lastClaimer = new Map<string, string>();
  /** Per lease key, the party that wrote the version the store holds (`operator` for the operator's hand). */
  private readonly leaseWriters = new Map<string, string>();
  /** Each lease key's last `active` write by its job: until when (store time) its heartbeat keeps it live. */
  private readonly liveUntil = new Map<string, number>();
  /** When each input segment's PUT was sent. */
  private readonly putSentAt = new Map<string, number>();
  /** Each job party's lease key and when it last sent a write of it. */
  private readonly jobLeases = new Map<string, { readonly key: string; readonly sentAt: number }>();
  /** When a reader last read the root. */
  private lastReaderRootRead = 0;
  /** Collector passes running now. */
  private readonly passes = new Set<string>();

  constructor(
    private readonly sim: Sim,
    private readonly model: Model,
    private readonly ns: NamespaceId,
  ) {}

  get root(): RootState | undefined {
    return this.current;
  }

  changed(change: Change, request: StoreRequest | undefined): void {
    const event = this.sim.scheduler.events;
    if (change.key === rootKey(this.ns)) this.rootChanged(change, request, event);
    else if (change.kind === 'delete') {
      this.deletions.set(change.key, { event, at: this.sim.now, party: request?.party.name ?? 'operator' });
      this.rootNamesOnlyExistingObjects(change.key, request);
      // A pass owns a prefix until its lease is gone from the store, not until the pass hears so: another may claim it
      // meanwhile.
      const staged = parseCompactionKey(change.key);
      // A retired output is reclaimed by the root's record, whoever owns its prefix; everything else there by its owner
      // only.
      const retired = this.current?.retired?.some((r) => r.key === change.key) === true;
      if (request?.party.kind === 'collector' && 'jobId' in staged && staged.namespaceId === this.ns && !retired) {
        this.atMostOneOwner(
          jobPrefix(this.ns, staged.jobId),
          request,
          staged.kind === 'lease' ? 'deleted the lease of' : 'deleted in',
        );
      }
      // With its lease gone the prefix is no pass's until one claims it again, and no job's: a job holds it by its
      // lease in the store.
      if (staged.kind === 'lease') {
        this.lastClaimer.delete(prefixOfLease(change.key));
        this.leaseWriters.delete(change.key);
        this.liveUntil.delete(change.key);
      }
    } else {
      if (change.key.endsWith('.mseg')) {
        const records = recordsOf(change.after.body);
        if (records) this.segmentRecords.set(change.key, records);
      }
      const context = request?.context as Partial<WriteContext> | undefined;
      if (request?.party.kind === 'writer' && context?.write && isInputSegmentKeyOf(this.ns, change.key)) {
        this.model.written(context.write, change.key);
        this.putSentAt.set(change.key, request.issuedAt);
      }
      if (parseCompactionKey(change.key).kind === 'lease') {
        this.leaseWriters.set(change.key, request?.party.name ?? 'operator');
        this.leaseChanged(change.key, change.after, request);
      }
    }
  }

  applied(request: StoreRequest, outcome: Outcome, retry: boolean): void {
    const { party, op, key } = request;
    if (!retry) this.countInterleavings(request, outcome);
    if (party.kind === 'reader') {
      const snapshot = (request.context as Partial<SnapshotContext> | undefined)?.snapshot;
      // The answer the reader gets is the last application's (a lost answer's retry applies it again).
      if (key === rootKey(this.ns) && 'ok' in outcome) {
        if (snapshot) snapshot.event = this.sim.scheduler.events;
        this.lastReaderRootRead = this.sim.now;
      } else if ((op === 'getStream' || op === 'get') && 'err' in outcome)
        this.readersReadWithinPromise(request, outcome.err);
    }
    if ((op === 'deleteMany' || op === 'deleteIfMatch') && party.kind === 'collector') {
      this.corruptionDeletesNothing(request);
      for (const k of request.keys ?? []) this.deletionsConfined(k, request);
    }
  }

  // ---- the invariants ----

  /** No root names an object that does not exist: checked when a root is written and when an object is deleted. */
  rootNamesOnlyExistingObjects(deleted: string | undefined, request: StoreRequest | undefined): void {
    const root = this.current;
    if (!root) return;
    const named = Object.entries(root.groups).flatMap(([group, keys]) => keys.map((key) => ({ group, key })));
    const missing =
      deleted !== undefined ? named.filter((n) => n.key === deleted) : named.filter((n) => !this.sim.world.has(n.key));
    for (const { group, key } of missing.slice(0, 1)) {
      const gone = this.deletions.get(key);
      const namer = this.namerOf(key);
      this.sim.violate({
        invariant: 'rootNamesOnlyExistingObjects',
        message:
          deleted !== undefined
            ? `${request?.party.name ?? 'operator'} deleted ${shortKey(key)}, which root generation ${root.generation} names in group ${group}`
            : `root generation ${root.generation}, written by ${namer?.party ?? '?'}, names ${shortKey(key)} in group ${group}, which ${gone ? `${gone.party} deleted ${this.sim.now - gone.at} ms before` : 'was never written'}`,
        evidence: { key, group, deletion: gone, namer, deletedNow: deleted !== undefined },
      });
    }
  }

  /** A group names each segment once: a root change is applied once, whatever answers were lost. */
  groupsNameEachSegmentOnce(root: RootState, request: StoreRequest | undefined): void {
    for (const [group, keys] of Object.entries(root.groups)) {
      const twice = keys.find((k, i) => keys.indexOf(k) !== i);
      if (twice !== undefined) {
        this.sim.violate({
          invariant: 'groupsNameEachSegmentOnce',
          message: `root generation ${root.generation}, written by ${request?.party.name ?? 'operator'}, names ${shortKey(twice)} twice in group ${group}`,
          evidence: { key: twice, group, party: request?.party.kind, fault: request?.fault.kind },
        });
        return;
      }
    }
  }

  /**
   * A reader inside its promised window (`readableUntilMs`, on its own clock when the bucket answered) reads every
   * segment its snapshot names.
   */
  readersReadWithinPromise(request: StoreRequest, err: Error): void {
    const context = request.context as ReaderContext | undefined;
    if (!(err instanceof NotFoundError) || !context?.reader) return;
    const readerNow = this.sim.now + request.party.skewMs;
    if (readerNow >= context.readableUntilMs) return;
    const gone = this.deletions.get(request.key);
    const retiredBy = this.retiringVersion(request.key);
    this.sim.violate({
      invariant: 'readersReadWithinPromise',
      message:
        `${request.party.name} read ${shortKey(request.key)} of root generation ${context.rootGeneration} ${context.readableUntilMs - readerNow} ms before its promise ran out, ` +
        `but ${gone?.party ?? 'someone'} deleted it ${gone ? this.sim.now - gone.at : '?'} ms before` +
        (retiredBy
          ? `; root generation ${retiredBy.root.generation} retired it at retired_at_ms ${retiredBy.retiredAtMs}, landing ${retiredBy.landedLateMs} ms after that clock (writer ${retiredBy.party})`
          : ''),
      evidence: { key: request.key, deletion: gone, retiredBy },
    });
  }

  /** The reader's view of a group equals the model's (see `model.ts`). */
  readerViewMatchesModel(
    who: string,
    group: string,
    view: readonly LiveRecord[],
    rootEvent: number,
    generation: number,
  ): void {
    const wrong = this.model.checkView(group, view, rootEvent);
    if (!wrong) return;
    this.sim.violate({
      invariant: 'readerViewMatchesModel',
      message: `${who} at root generation ${generation}: ${wrong.message}`,
      evidence: { ...wrong, group, rootEvent },
    });
  }

  /** Nothing outside a validated job prefix or the documented families (input segments, manifest parts) is deleted. */
  deletionsConfined(key: string, request: StoreRequest): void {
    const staged = parseCompactionKey(key);
    const allowed =
      ((staged.kind === 'lease' || staged.kind === 'staged_segment') && staged.namespaceId === this.ns) ||
      isInputSegmentKeyOf(this.ns, key) ||
      parseManifestPartKey(key)?.namespaceId === this.ns;
    if (!allowed)
      this.sim.violate({
        invariant: 'deletionsConfined',
        message: `${request.party.name} deleted ${key}, outside every family the collector may delete`,
      });
  }

  /**
   * A pass that read a corrupt lease, or found its namespace's root unusable, deletes nothing more in that namespace.
   */
  corruptionDeletesNothing(request: StoreRequest): void {
    const context = request.context as Partial<PassContext> | undefined;
    if (context?.corruption === undefined) return;
    this.sim.violate({
      invariant: 'corruptionDeletesNothing',
      message: `${request.party.name} deleted ${(request.keys ?? []).map(shortKey).join(', ')} after it found ${context.corruption}`,
    });
  }

  /**
   * At most one owner of a job prefix at any time, judged by the store: its job while its lease is
   * active and unexpired, else the pass whose claim was written last, while that claim is unexpired
   * (a claim's heartbeat expires as a job's does); a pass paused past its own claim's expiry owns the
   * prefix no longer. The clocks of the two may differ by the safety margin: that much earlier is
   * within the rules. It breaks where an owner's exclusion is what keeps something safe:
   * - a collector's claim while another holds the prefix (two passes would walk it as theirs);
   * - a collector's deletion of a lease in a version it did not write itself: a pass releases its own
   *   claim only, never another pass's claim (whose prefix a third pass would then take as orphaned)
   *   nor a job's lease, however late its delete lands. On a bucket that ignores `If-Match` on
   *   DeleteObject (MinIO) nothing fences a late delete, and the package accepts that window
   *   (docs/stores.md): there it is counted, and what it leads to is judged by the invariants of the
   *   data (`rootNamesOnlyExistingObjects`, `readerViewMatchesModel`);
   * - a collector's deletion of a staged object while the prefix's job holds it live.
   * A staged object that one pass deletes after another pass claimed the prefix is no second owner's
   * loss: the job was fenced by the first claim, so its staged objects are garbage to every pass
   * alike, and whether a root still names one is `rootNamesOnlyExistingObjects`'s to judge. It is
   * counted as an interleaving, not a violation.
   */
  atMostOneOwner(prefix: string, request: StoreRequest, act: 'claimed' | 'deleted in' | 'deleted the lease of'): void {
    const pass = request.party.name;
    const margin = this.sim.timing.clockSafetyMarginMs;
    if (act === 'deleted the lease of') {
      const writer = this.leaseWriters.get(`${prefix}lease.json`) ?? 'operator';
      if (writer === pass) return;
      const claim = writer === this.lastClaimer.get(prefix);
      if (request.op === 'deleteIfMatch' && this.sim.world.conditionalDelete === 'ignored') {
        this.sim.trace.add(
          this.sim.now,
          pass,
          `deleted the lease of ${shortKey(prefix)} in a version ${writer} wrote: the store ignored If-Match`,
        );
        this.sim.count(
          `interleaving: a lease deleted in a version ${claim ? "of another pass's claim" : writer === 'operator' ? 'the operator wrote' : 'its job wrote'} (the store ignored If-Match)`,
        );
        return;
      }
      this.sim.violate({
        invariant: 'atMostOneOwner',
        message: `${pass} deleted the lease of ${shortKey(prefix)} in a version ${writer} wrote${claim ? ' (its claim)' : ''}`,
        evidence: { prefix, owners: [writer, pass], deletedBy: pass },
      });
      return;
    }
    const jobUntil = this.liveUntil.get(`${prefix}lease.json`);
    if (jobUntil !== undefined && this.sim.now < jobUntil - margin) {
      this.sim.violate({
        invariant: 'atMostOneOwner',
        message: `${pass} ${act} ${shortKey(prefix)} ${jobUntil - this.sim.now} ms before its job's heartbeat expired`,
        evidence: { prefix, owners: ['job', pass], ...(act === 'deleted in' && { deletedBy: pass }) },
      });
      return;
    }
    const claimer = this.lastClaimer.get(prefix);
    if (claimer === undefined || claimer === pass) return;
    const until = this.claimedUntil.get(prefix)?.get(claimer);
    if (until === undefined) return;
    if (this.sim.now >= until - margin) {
      if (act === 'claimed') this.sim.count('interleaving: an expired claim of another pass taken over');
      return;
    }
    if (act === 'deleted in') {
      this.sim.count('interleaving: a staged object deleted in a prefix another pass claimed since');
      return;
    }
    this.sim.violate({
      invariant: 'atMostOneOwner',
      message: `${pass} claimed ${shortKey(prefix)} while ${claimer}'s claim was live (${until - this.sim.now} ms before it expires)`,
      evidence: { prefix, owners: [claimer, pass] },
    });
  }

  passStarted(pass: string): void {
    if (this.passes.size > 0) this.sim.count('interleaving: two collector passes at once');
    this.passes.add(pass);
  }

  passEnded(pass: string): void {
    this.passes.delete(pass);
  }

  // ---- bookkeeping ----

  /** Counts the interleavings the simulator is meant to reach, so a run shows it reached them. */
  private countInterleavings(request: StoreRequest, outcome: Outcome): void {
    const { party, op, key } = request;
    const { timing } = this.sim;
    const result = 'ok' in outcome ? 'landed' : outcome.err.name.replace(/Error$/, '');
    if (
      parseCompactionKey(key).kind === 'lease' &&
      party.kind === 'job' &&
      (op === 'putIfAbsent' || op === 'putIfMatch')
    )
      this.jobLeases.set(party.name, { key, sentAt: request.issuedAt });
    if (key !== rootKey(this.ns) || (op !== 'putIfMatch' && op !== 'putIfAbsent')) return;
    const late = this.sim.now - request.issuedAt > timing.operationDeadlineMs;
    if (party.kind === 'writer') {
      const write = (request.context as Partial<WriteContext> | undefined)?.write;
      const putSent = write && this.putSentAt.get(write.segments.at(-1) ?? '');
      if (putSent === undefined) return;
      if (request.issuedAt - putSent > timing.writerBudgetMs / 2)
        this.sim.count(`interleaving: writer CAS sent in the second half of its budget, ${result}`);
      if (this.sim.now - putSent > timing.lostWriteGraceMs)
        this.sim.count(`interleaving: writer CAS arrived past the lost-write grace, ${result}`);
    }
    if (party.kind === 'job') {
      const lease = this.jobLeases.get(party.name);
      if (!lease) return;
      if (request.issuedAt - lease.sentAt > timing.publicationBudgetMs / 2)
        this.sim.count(`interleaving: publication CAS sent in the second half of its budget, ${result}`);
      const now = this.sim.world.peek(lease.key);
      const claimed = now === undefined || !Buffer.from(now.body).includes('"status":"active"');
      if (claimed) this.sim.count(`interleaving: publication CAS arrived after its lease was claimed, ${result}`);
      if (late) this.sim.count(`interleaving: publication CAS arrived late, ${result}`);
    }
  }

  private rootChanged(change: Change, request: StoreRequest | undefined, event: number): void {
    const party = request?.party.name ?? 'operator';
    if (change.kind === 'delete') {
      this.current = undefined;
      this.roots.push({ event, at: this.sim.now, party, root: undefined });
      this.sim.trace.add(this.sim.now, party, 'root deleted');
      return;
    }
    let root: RootState | undefined;
    try {
      root = jsonRootCodec.decode(change.after.body, this.ns);
    } catch {
      root = undefined;
    }
    this.current = root;
    this.roots.push({ event, at: this.sim.now, party, root, ...(request && { request }) });
    if (!root) {
      this.sim.trace.add(this.sim.now, party, 'root is now corrupt');
      return;
    }
    if (change.before === undefined && request !== undefined && !this.lostRootNotRecreated(party, root)) return;
    this.lastDecoded = root;
    if (this.sim.trace.on)
      this.sim.trace.add(
        this.sim.now,
        party,
        `root gen ${root.generation}: ${Object.entries(root.groups)
          .map(([g, keys]) => `${g}=[${keys.map(shortKey).join(' ')}]`)
          .join(' ')}${root.retired?.length ? ` retired ${root.retired.length}` : ''}`,
      );
    for (const keys of Object.values(root.groups)) for (const key of keys) this.model.named(key, event);
    const before = this.roots.at(-2)?.root;
    const newlyRetired = (root.retired ?? []).filter(
      (r) => !before?.retired?.some((b) => b.key === r.key && b.retired_at_ms === r.retired_at_ms),
    );
    const latest = Math.max(...newlyRetired.map((r) => r.retired_at_ms));
    const retiredAtTrue = latest - (request?.party.skewMs ?? 0);
    if (request && newlyRetired.length && this.sim.now - retiredAtTrue > this.sim.timing.gcMinGraceMs) {
      this.sim.count(
        `interleaving: a ${request.party.kind} root write retired segments more than T after its retired_at_ms`,
      );
      if (this.lastReaderRootRead > retiredAtTrue + this.sim.timing.gcMinGraceMs)
        this.sim.count(
          `interleaving: a reader read the root between T after a ${request.party.kind}'s retirement and its landing`,
        );
    }
    this.groupsNameEachSegmentOnce(root, request);
    this.rootNamesOnlyExistingObjects(undefined, request);
  }

  /**
   * A party creates a root only as the empty first one (generation 1), and only where the root lost
   * (the last that decoded) was that empty first root too: one that had changed was marked
   * (`gc/judged-root`) before its first change, and its loss is refused until an operator restores it.
   * `root` was just written by `party` where there was none.
   */
  private lostRootNotRecreated(party: string, root: RootState): boolean {
    const isFirst = (r: RootState) =>
      r.generation === 1 && Object.values(r.groups).every((keys) => keys.length === 0) && !r.retired?.length;
    if (!isFirst(root)) {
      this.sim.violate({
        invariant: 'lostRootNotRecreated',
        message: `${party} created the root at generation ${root.generation} with content: a root is created empty at generation 1`,
      });
      return false;
    }
    const lost = this.lastDecoded;
    if (lost === undefined) return true;
    if (!isFirst(lost)) {
      this.sim.violate({
        invariant: 'lostRootNotRecreated',
        message: `${party} created the root afresh where a root of generation ${lost.generation} was lost (${shortKey(judgedRootKey(this.ns))} ${this.sim.world.has(judgedRootKey(this.ns)) ? 'present' : 'missing'}): every segment the lost root named is forgotten`,
      });
      return false;
    }
    this.sim.count('root re-created empty: the lost root was the empty first one');
    return true;
  }

  private leaseChanged(key: string, after: SimObject, request: StoreRequest | undefined): void {
    const parsed = parseCompactionKey(key);
    if (parsed.kind !== 'lease') return;
    if (!request) {
      // The operator's hand (a corrupt lease): the job holds it no longer.
      this.liveUntil.delete(key);
      return;
    }
    const decode = (object: SimObject): LeaseState | undefined => {
      try {
        return decodeLease(object.body, { namespaceId: this.ns, jobId: parsed.jobId as MetadataCompactionId });
      } catch {
        return undefined;
      }
    };
    const lease = decode(after);
    if (!lease) return;
    if (lease.status === 'active' && request.party.kind === 'job') {
      // The heartbeat is the job's clock: on the store's clock it was written `skew` earlier.
      this.liveUntil.set(key, lease.heartbeat_at_ms - request.party.skewMs + this.sim.timing.leaseExpiryMs);
    } else if (lease.status === 'reaping' && request.party.kind === 'collector') {
      const prefix = prefixOfLease(key);
      this.atMostOneOwner(prefix, request, 'claimed');
      // A claim's heartbeat is the pass's clock, as a job's is the job's.
      const claims = this.claimedUntil.get(prefix) ?? new Map<string, number>();
      claims.set(request.party.name, lease.heartbeat_at_ms - request.party.skewMs + this.sim.timing.leaseExpiryMs);
      this.claimedUntil.set(prefix, claims);
      this.lastClaimer.set(prefix, request.party.name);
    }
  }

  /**
   * The root write that last brought `key` into a group: who sent it, when, doing what. A version
   * that is missing or corrupt says nothing either way (a restored root brings back what it named).
   */
  private namerOf(key: string): Namer | undefined {
    const names = (root: RootState) => Object.values(root.groups).some((keys) => keys.includes(key));
    const decoded = this.roots.filter(
      (v): v is RootVersion & { root: RootState } => v.root !== undefined && v.request !== undefined,
    );
    for (let i = decoded.length - 1; i >= 0; i--) {
      const version = decoded[i]!;
      const before = decoded[i - 1];
      if (!names(version.root) || (before && names(before.root))) continue;
      return {
        party: version.party,
        kind: version.request?.party.kind,
        event: version.event,
        at: version.at,
        sentAt: version.request?.issuedAt,
      };
    }
    return undefined;
  }

  /**
   * The last root version that retired `key` (took it out of every group), when it landed relative to its
   * `retired_at_ms`.
   */
  private retiringVersion(key: string): Retirement | undefined {
    for (let i = this.roots.length - 1; i > 0; i--) {
      const version = this.roots[i]!;
      const retired = version.root?.retired?.find((r) => r.key === key);
      const before = this.roots[i - 1]!.root;
      if (!version.root || !retired || !before || !Object.values(before.groups).some((keys) => keys.includes(key)))
        continue;
      const skew = version.request?.party.skewMs ?? 0;
      return {
        root: version.root,
        retiredAtMs: retired.retired_at_ms,
        landedLateMs: version.at - (retired.retired_at_ms - skew),
        party: version.party,
        kind: version.request?.party.kind,
      };
    }
    return undefined;
  }
}
