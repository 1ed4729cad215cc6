/**
 * The key grammar: the one place that turns validated ids into object keys and listed keys
 * back into ids. Nothing else in the package concatenates key strings, so a key the collector
 * deletes has always been through {@link parseCompactionKey}.
 */
import { quoted, TypedError } from '../errors';

declare const brand: unique symbol;
export type Brand<T, B extends string> = T & { readonly [brand]: B };

/** Tenant of the metadata service; 1–63 of `[a-z0-9_-]`, starting with a letter or digit. */
export type NamespaceId = Brand<string, 'NamespaceId'>;
/** Job id and the name of its prefix: `cmp_` + 32 lowercase hex. */
export type MetadataCompactionId = Brand<string, 'MetadataCompactionId'>;
/** Segment id, input or staged: `seg_` + 32 lowercase hex. */
export type SegmentId = Brand<string, 'SegmentId'>;
/** Family group name (one slice of a namespace's metadata); same alphabet as a namespace. */
export type FamilyGroup = Brand<string, 'FamilyGroup'>;

/**
 * The most characters of a bad id an error quotes: a valid id has at most 63, so more says nothing the length does not.
 */
export const ID_QUOTE_LIMIT = 64;

/** An id or key that is not of the grammar; `subject` names what was being parsed. */
export class InvalidKeyError extends TypedError {
  readonly failureType = 'InvalidInput';
  constructor(
    readonly subject: string,
    readonly value: string,
    readonly reason: string,
    /** How much of `value` the message quotes: a key's reason may lie deep in it, an id's never does. */
    quoteLimit?: number,
  ) {
    super(`invalid ${subject} ${quoted(value, quoteLimit)}: ${reason}`);
  }
}

const NAME_PATTERN = /^[a-z0-9][a-z0-9_-]{0,62}$/;
const JOB_ID_PATTERN = /^cmp_[0-9a-f]{32}$/;
const SEGMENT_ID_PATTERN = /^seg_[0-9a-f]{32}$/;
const EXTENSION_PATTERN = /^[a-z0-9]{1,16}$/;

function validate<T>(subject: string, pattern: RegExp, shape: string, value: unknown): T {
  if (typeof value !== 'string') throw new InvalidKeyError(subject, String(value), 'not a string', ID_QUOTE_LIMIT);
  if (!pattern.test(value)) throw new InvalidKeyError(subject, value, `must be ${shape}`, ID_QUOTE_LIMIT);
  return value as T;
}

const NAME_SHAPE = '1-63 characters of [a-z0-9_-] starting with a letter or digit';

/**
 * A validated namespace id (the tenant whose metadata a root lists); throws {@link InvalidKeyError} naming the shape.
 */
export const namespaceId = (value: unknown): NamespaceId => validate('namespace id', NAME_PATTERN, NAME_SHAPE, value);
/** A validated family group (a name the root lists segments under); throws {@link InvalidKeyError} naming the shape. */
export const familyGroup = (value: unknown): FamilyGroup => validate('family group', NAME_PATTERN, NAME_SHAPE, value);
/** A validated job id (`cmp_` + 32 lowercase hex); throws {@link InvalidKeyError}. */
export const jobId = (value: unknown): MetadataCompactionId =>
  validate('job id', JOB_ID_PATTERN, '"cmp_" followed by 32 lowercase hex digits', value);
/** A validated segment id (`seg_` + 32 lowercase hex); throws {@link InvalidKeyError}. */
export const segmentId = (value: unknown): SegmentId =>
  validate('segment id', SEGMENT_ID_PATTERN, '"seg_" followed by 32 lowercase hex digits', value);
const segmentExtension = (value: string): string =>
  validate('segment extension', EXTENSION_PATTERN, '1-16 characters of [a-z0-9]', value);

/** Fills a buffer with random bytes; workflows pass their deterministic source. */
export type RandomFill = (bytes: Uint8Array) => void;
const webCryptoFill: RandomFill = (bytes) => void globalThis.crypto.getRandomValues(bytes);

function randomHex128(fill: RandomFill): string {
  const bytes = new Uint8Array(16);
  fill(bytes);
  return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
}

/** A fresh job id from 128 random bits. */
export const newJobId = (fill: RandomFill = webCryptoFill): MetadataCompactionId => jobId(`cmp_${randomHex128(fill)}`);
/** A fresh segment id from 128 random bits. */
export const newSegmentId = (fill: RandomFill = webCryptoFill): SegmentId => segmentId(`seg_${randomHex128(fill)}`);

export const NAMESPACES_PREFIX = 'namespaces/';
/**
 * Where the store probe (`verifyStore`) writes and deletes its few objects: outside `namespaces/`, so no collector ever
 * lists it.
 */
export const STORE_PROBE_PREFIX = 'store-probe/';

/**
 * The one object a collector pass writes to read the store's clock: overwritten by every pass, never deleted, so a dry
 * run deletes nothing.
 */
export const STORE_CLOCK_KEY = `${STORE_PROBE_PREFIX}clock`;

/**
 * The keys of one probe run, under a prefix of its own (128 random bits): probes of many workers starting at once never
 * meet.
 */
export function storeProbeKeys(fill: RandomFill = webCryptoFill): {
  readonly prefix: string;
  readonly object: string;
  readonly missing: string;
  readonly neverWritten: string;
} {
  const prefix = `${STORE_PROBE_PREFIX}${randomHex128(fill)}/`;
  return { prefix, object: `${prefix}object`, missing: `${prefix}missing`, neverWritten: `${prefix}never-written` };
}
// Every builder re-validates its ids: a brand type is erased at run time, so a caller holding a raw
// string cast to an id (`'../demo' as NamespaceId`) would otherwise build a key outside its prefix.
// Nothing builds a key without passing here, so no request can name an unvalidated id.
export const namespacePrefix = (ns: NamespaceId): string => `${NAMESPACES_PREFIX}${namespaceId(ns)}/`;
/** The namespace root's key: the one object whose compare-and-swap publishes, registers and retires segments. */
export const rootKey = (ns: NamespaceId): string => `${namespacePrefix(ns)}metadata/root.json`;
/** Where the metadata service writes its segments (the compactions' inputs); always ends in `/`. */
export const inputSegmentsPrefix = (ns: NamespaceId): string => `${namespacePrefix(ns)}metadata/segments/`;
/** The key of a segment the metadata service writes (a compaction's input), under {@link inputSegmentsPrefix}. */
export const inputSegmentKey = (ns: NamespaceId, seg: SegmentId, ext: string): string =>
  `${inputSegmentsPrefix(ns)}${segmentId(seg)}.${segmentExtension(ext)}`;
export const compactionsPrefix = (ns: NamespaceId): string => `${namespacePrefix(ns)}metadata/compactions/`;
/** Always ends in `/`, so `cmp_1…` never matches `cmp_12…`. */
export const jobPrefix = (ns: NamespaceId, job: MetadataCompactionId): string =>
  `${compactionsPrefix(ns)}${jobId(job)}/`;
/** `lease.json` sorts before `segments/`: an ascending listing meets the lease first. */
export const leaseKey = (ns: NamespaceId, job: MetadataCompactionId): string => `${jobPrefix(ns, job)}lease.json`;
/** A segment a job stages under its prefix (`…/segments/`): reclaimed with the prefix unless a root names it. */
export const stagedSegmentKey = (ns: NamespaceId, job: MetadataCompactionId, seg: SegmentId, ext: string): string =>
  `${jobPrefix(ns, job)}segments/${segmentId(seg)}.${segmentExtension(ext)}`;

/**
 * A collector pass: `gc_` + its clock (13 digits of Unix ms, so passes sort by time) + `_` + 64 random bits (two passes
 * may share a clock).
 */
export type PassId = Brand<string, 'PassId'>;
const PASS_ID_PATTERN = /^gc_[0-9]{13}_[0-9a-f]{16}$/;
export const passId = (value: unknown): PassId =>
  validate('pass id', PASS_ID_PATTERN, '"gc_", 13 digits of Unix ms, "_" and 16 lowercase hex digits', value);

/** A fresh pass id for a pass whose clock is `nowMs`; workflows pass their deterministic random source. */
export function newPassId(nowMs: number, fill: RandomFill = webCryptoFill): PassId {
  return passId(`gc_${String(nowMs).padStart(13, '0')}_${randomHex128(fill).slice(0, 16)}`);
}

/** The clock of the pass `id` names. */
export const passClockMs = (id: PassId): number => Number(passId(id).slice(3, 16));

/**
 * Where the collector writes each pass's deletion manifests: under the namespace, beside and never
 * under `compactions/` or `segments/`, so no rule that reclaims those ever lists a manifest.
 */
export const manifestsPrefix = (ns: NamespaceId): string => `${namespacePrefix(ns)}metadata/gc/`;
/**
 * The copy of the highest-generation root a collector pass judged the namespace by (spec 6c.5),
 * beside the passes' manifests: a root missing or older than it deletes nothing, and it is what an
 * operator restores. No rule that deletes lists it.
 */
export const judgedRootKey = (ns: NamespaceId): string => `${manifestsPrefix(ns)}judged-root`;
/** One pass's manifest of one namespace: its parts, each holding the lines of one or more delete batches. */
export const passManifestPrefix = (ns: NamespaceId, pass: PassId): string => `${manifestsPrefix(ns)}${passId(pass)}/`;
/**
 * What a manifest part's name says of its lines, so the passes' totals are one listing away: how
 * many lines per rule, their objects' bytes, and whether they are a dry run's.
 */
export interface PartTotals {
  readonly byRule: Readonly<Record<string, number>>;
  readonly bytes: number;
  readonly dryRun: boolean;
}

const RULE_TOKEN = /^[a-z][a-z_]*$/;

/**
 * A part of a pass's manifest: gzip-compressed NDJSON, under a fresh 128-bit id (parts of concurrent
 * batches never meet), its totals in its name: `part_{id}.bytes-{n}.{rule}-{n}…[.dry_run].ndjson.gz`.
 */
export function manifestPartKey(
  ns: NamespaceId,
  pass: PassId,
  totals: PartTotals,
  fill: RandomFill = webCryptoFill,
): string {
  const rules = Object.entries(totals.byRule).sort(([a], [b]) => (a < b ? -1 : 1));
  const count = (n: number) => Number.isSafeInteger(n) && n >= 0;
  const bad = [
    ...(count(totals.bytes) ? [] : [`bytes-${totals.bytes}`]),
    ...rules.flatMap(([rule, n]) => (RULE_TOKEN.test(rule) && rule !== 'bytes' && count(n) ? [] : [`${rule}-${n}`])),
  ];
  if (bad.length)
    throw new InvalidKeyError(
      'manifest part totals',
      bad.join('.'),
      'each a rule of lowercase letters and "_" (not "bytes") with a whole count',
    );
  const tokens = [
    `bytes-${totals.bytes}`,
    ...rules.map(([rule, n]) => `${rule}-${n}`),
    ...(totals.dryRun ? ['dry_run'] : []),
  ];
  return `${passManifestPrefix(ns, pass)}part_${randomHex128(fill)}.${tokens.join('.')}.ndjson.gz`;
}

/** The pass named by a `…/metadata/gc/{pass}/` common prefix of namespace `ns`, or undefined. */
export function parsePassPrefix(ns: NamespaceId, prefix: string): PassId | undefined {
  const base = manifestsPrefix(ns);
  const rest = prefix.startsWith(base) ? prefix.slice(base.length) : '';
  return rest.endsWith('/') && PASS_ID_PATTERN.test(rest.slice(0, -1)) ? (rest.slice(0, -1) as PassId) : undefined;
}

/** The namespace and pass of a pass's manifest prefix (as a report names it), or undefined. */
export function parseManifestPrefix(
  prefix: string,
): { readonly namespaceId: NamespaceId; readonly passId: PassId } | undefined {
  const m = /^namespaces\/([a-z0-9][a-z0-9_-]{0,62})\/metadata\/gc\/(gc_[0-9]{13}_[0-9a-f]{16})\/$/.exec(prefix);
  return m ? { namespaceId: m[1] as NamespaceId, passId: m[2] as PassId } : undefined;
}

/** A part's key; its totals (group 3) are absent from a part written before they were named. */
const MANIFEST_PART_KEY =
  /^namespaces\/([a-z0-9][a-z0-9_-]{0,62})\/metadata\/gc\/(gc_[0-9]{13}_[0-9a-f]{16})\/part_[0-9a-f]{32}((?:\.[a-z][a-z_]*-[0-9]{1,16})*(?:\.dry_run)?)\.ndjson\.gz$/;

/** The totals a part's name carries (the `.…` tokens of {@link manifestPartKey}), or undefined when it names none. */
function partTotalsOf(tokens: string): PartTotals | undefined {
  if (tokens === '') return undefined;
  const byRule: Record<string, number> = {};
  let bytes: number | undefined;
  let dryRun = false;
  for (const token of tokens.slice(1).split('.')) {
    if (token === 'dry_run') dryRun = true;
    else {
      const [name, n] = token.split('-') as [string, string];
      if (name === 'bytes') bytes = Number(n);
      else byRule[name] = Number(n);
    }
  }
  return bytes === undefined ? undefined : { byRule, bytes, dryRun };
}

/**
 * The namespace and pass of a manifest part key, and the totals its name carries (none for a part
 * written before parts named them), or undefined for any other key.
 */
export function parseManifestPartKey(
  key: string,
): { readonly namespaceId: NamespaceId; readonly passId: PassId; readonly totals?: PartTotals } | undefined {
  const m = MANIFEST_PART_KEY.exec(key);
  if (!m) return undefined;
  const totals = partTotalsOf(m[3] ?? '');
  return { namespaceId: m[1] as NamespaceId, passId: m[2] as PassId, ...(totals && { totals }) };
}

/** The extension of a job's input lists; no compactor may stage a segment of it. */
export const INPUT_LIST_EXTENSION = 'inputs';

/**
 * The input list written by attempt `attempt` of the job's `readGroup`: the group's inputs and
 * their pinned ETags, which no Temporal payload carries. A staged object of the grammar (segment id
 * the attempt number in hex), so the collector reclaims it with the job's prefix like any staged
 * object no root references; each attempt writes its own, so none is ever overwritten.
 */
export const inputListKey = (ns: NamespaceId, job: MetadataCompactionId, attempt: number): string =>
  stagedSegmentKey(ns, job, segmentId(`seg_${attempt.toString(16).padStart(32, '0')}`), INPUT_LIST_EXTENSION);

/** Whether `key` is an input list of job `job` of namespace `ns`. */
export function isInputListKeyOf(ns: NamespaceId, job: MetadataCompactionId, key: string): boolean {
  const parsed = parseCompactionKey(key);
  return (
    parsed.kind === 'staged_segment' &&
    parsed.namespaceId === ns &&
    parsed.jobId === job &&
    parsed.extension === INPUT_LIST_EXTENSION
  );
}

/** What a key under a compactions prefix is; anything else is retained and reported. */
export type CompactionKey =
  | { readonly kind: 'lease'; readonly namespaceId: NamespaceId; readonly jobId: MetadataCompactionId }
  | {
      readonly kind: 'staged_segment';
      readonly namespaceId: NamespaceId;
      readonly jobId: MetadataCompactionId;
      readonly segmentId: SegmentId;
      readonly extension: string;
    }
  | { readonly kind: 'unrecognised'; readonly key: string };

const COMPACTION_KEY =
  /^namespaces\/([a-z0-9][a-z0-9_-]{0,62})\/metadata\/compactions\/(cmp_[0-9a-f]{32})\/(?:(lease\.json)|segments\/(seg_[0-9a-f]{32})\.([a-z0-9]{1,16}))$/;

/** Classifies a key read back from a listing. The pattern is anchored and has no `.`-segments to escape through. */
export function parseCompactionKey(key: string): CompactionKey {
  const m = COMPACTION_KEY.exec(key);
  if (!m) return { kind: 'unrecognised', key };
  const [, ns, job, lease, seg, ext] = m as unknown as [string, string, string, string?, string?, string?];
  const ids = { namespaceId: ns as NamespaceId, jobId: job as MetadataCompactionId };
  if (lease) return { kind: 'lease', ...ids };
  return { kind: 'staged_segment', ...ids, segmentId: seg as SegmentId, extension: ext as string };
}

const INPUT_SEGMENT_KEY =
  /^namespaces\/([a-z0-9][a-z0-9_-]{0,62})\/metadata\/segments\/(seg_[0-9a-f]{32})\.([a-z0-9]{1,16})$/;

/**
 * Whether `key` is an input segment key of namespace `ns`: the only keys the collector deletes under
 * `metadata/segments/`.
 */
export function isInputSegmentKeyOf(ns: NamespaceId, key: string): boolean {
  return INPUT_SEGMENT_KEY.exec(key)?.[1] === ns;
}

/** Whether `key` is a segment key (input or staged) of namespace `ns`: the only keys a root may reference. */
export function isSegmentKeyOf(ns: NamespaceId, key: string): boolean {
  if (INPUT_SEGMENT_KEY.test(key)) return isInputSegmentKeyOf(ns, key);
  const staged = parseCompactionKey(key);
  return staged.kind === 'staged_segment' && staged.namespaceId === ns;
}

/** The namespace named by a `namespaces/{ns}/` common prefix, or undefined if it is not one. */
export function parseNamespacePrefix(prefix: string): NamespaceId | undefined {
  const m = /^namespaces\/([a-z0-9][a-z0-9_-]{0,62})\/$/.exec(prefix);
  return m ? (m[1] as NamespaceId) : undefined;
}

/** The job named by a `…/compactions/{job_id}/` common prefix of namespace `ns`, or undefined. */
export function parseJobPrefix(ns: NamespaceId, prefix: string): MetadataCompactionId | undefined {
  const base = compactionsPrefix(ns);
  if (!prefix.startsWith(base)) return undefined;
  const rest = prefix.slice(base.length);
  return /^cmp_[0-9a-f]{32}\/$/.test(rest) ? (rest.slice(0, -1) as MetadataCompactionId) : undefined;
}
