/**
 * Reading the collector's manifests as an operator: the passes of a bucket with
 * their totals, what one pass deleted and why, and which pass deleted a key. Reads only: the
 * operator's read-only role (docs/security.md) lists `namespaces/` and reads `metadata/gc/`.
 */
import { promisify } from 'node:util';
import { gunzip } from 'node:zlib';
import {
  manifestsPrefix,
  namespaceId,
  parseManifestPartKey,
  parsePassPrefix,
  passClockMs,
  passId,
  passManifestPrefix,
  NAMESPACES_PREFIX,
  type NamespaceId,
  type PartTotals,
  type PassId,
} from '../keys';
import type { ObjectStore } from '../store';
import { inBatches } from '../store/batches';
import { listNamespaces } from './listing';
import type { DeletionRule, ManifestLine } from './manifest';

/** Parts read at once. */
const READ_CONCURRENCY = 8;

/** The lines of one manifest part, in the order written. */
export async function readManifestPart(store: ObjectStore, key: string): Promise<ManifestLine[]> {
  const text = new TextDecoder().decode(await promisify(gunzip)((await store.get(key)).body));
  return text
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as ManifestLine);
}

/** Pages of a listing of `prefix` to its end. */
async function* listAll(
  store: ObjectStore,
  prefix: string,
  delimiter?: string,
): AsyncGenerator<{ keys: string[]; prefixes: readonly string[] }> {
  let cursor: string | undefined;
  do {
    const page = await store.list({
      prefix,
      ...(delimiter !== undefined && { delimiter }),
      ...(cursor !== undefined && { cursor }),
    });
    yield { keys: page.objects.map((o) => o.key), prefixes: page.commonPrefixes };
    cursor = page.nextCursor;
  } while (cursor !== undefined);
}

/** A manifest part and its lines. */
export interface ManifestPart {
  readonly key: string;
  readonly lines: readonly ManifestLine[];
}

/** The part keys of one namespace's manifest of one pass. */
async function listPassParts(store: ObjectStore, ns: NamespaceId, pass: PassId): Promise<string[]> {
  const keys: string[] = [];
  for await (const page of listAll(store, passManifestPrefix(ns, pass)))
    keys.push(...page.keys.filter((k) => parseManifestPartKey(k) !== undefined));
  return keys;
}

/** Reads the parts `keys`, {@link READ_CONCURRENCY} at a time, in order. */
const readParts = async (store: ObjectStore, keys: readonly string[]): Promise<ManifestPart[]> =>
  (
    await inBatches(keys, 1, READ_CONCURRENCY, ([key]) =>
      readManifestPart(store, key as string).then((lines) => ({ key: key as string, lines })),
    )
  ).flat();

/**
 * One namespace's manifest of one pass: every part, each with its lines (a line may repeat in a retried batch's part).
 */
export async function readPassManifest(store: ObjectStore, ns: NamespaceId, pass: PassId): Promise<ManifestPart[]> {
  return readParts(store, await listPassParts(store, ns, pass));
}

/** The passes with a manifest in namespace `ns`, oldest first (pass ids sort by their clock). */
export async function listManifestPasses(store: ObjectStore, ns: NamespaceId): Promise<PassId[]> {
  const passes: PassId[] = [];
  // A prefix not of the grammar is someone else's: readers and retention alike leave it alone.
  for await (const page of listAll(store, manifestsPrefix(ns), '/'))
    passes.push(...page.prefixes.flatMap((p) => parsePassPrefix(ns, p) ?? []));
  return passes;
}

/** Every namespace of the bucket, or the given ones. */
async function namespacesOf(store: ObjectStore, given: readonly string[] | undefined): Promise<NamespaceId[]> {
  if (given) return given.map((ns) => namespaceId(ns));
  const found: NamespaceId[] = [];
  for (let after: string | undefined, first = true; first || after !== undefined; first = false) {
    const page = await listNamespaces(store, after, 1000);
    found.push(...page.found);
    after = page.next;
  }
  return found;
}

/** What one pass's manifests hold, over the namespaces read. */
export interface PassSummary {
  readonly passId: PassId;
  /** The pass's clock. */
  readonly nowMs: number;
  readonly dryRun: boolean;
  readonly namespaces: readonly NamespaceId[];
  readonly parts: number;
  /**
   * Objects deleted (or, in a dry run, that would be): the lines of the parts, as their names count
   * them. A batch retried after its part was written counts again; {@link showGcPass} lists each key once.
   */
  readonly objects: number;
  readonly bytes: number;
  readonly byRule: Partial<Record<DeletionRule, number>>;
}

/** Distinct lines by key: a retried batch writes its lines again. */
const distinct = (lines: readonly ManifestLine[]): ManifestLine[] => [
  ...new Map(lines.map((l) => [l.key, l])).values(),
];

/** A part's totals as its lines give them: for a part written before part names carried them. */
function totalsOfLines(lines: readonly ManifestLine[]): PartTotals {
  const byRule: Partial<Record<DeletionRule, number>> = {};
  for (const l of lines) byRule[l.rule] = (byRule[l.rule] ?? 0) + 1;
  return {
    byRule,
    bytes: lines.reduce((n, l) => n + l.size, 0),
    dryRun: lines.length > 0 && lines.every((l) => l.dryRun === true),
  };
}

/** The totals of the parts `keys`: from their names, one listing; a part whose name carries none is read. */
async function partTotals(store: ObjectStore, keys: readonly string[]): Promise<PartTotals[]> {
  const named = keys.map((key) => parseManifestPartKey(key)?.totals);
  const unnamed = await readParts(
    store,
    keys.filter((_, i) => named[i] === undefined),
  );
  return [...named.flatMap((t) => t ?? []), ...unnamed.map((p) => totalsOfLines(p.lines))];
}

/**
 * The `limit` most recent passes with a manifest (in `namespaces`, or the whole bucket), newest first,
 * with their totals: a listing of each pass's parts, whose names carry them.
 */
export async function listGcPasses(
  store: ObjectStore,
  options: { namespaces?: readonly string[]; limit?: number } = {},
): Promise<PassSummary[]> {
  const byPass = new Map<PassId, NamespaceId[]>();
  for (const ns of await namespacesOf(store, options.namespaces))
    for (const pass of await listManifestPasses(store, ns)) byPass.set(pass, [...(byPass.get(pass) ?? []), ns]);
  const recent = [...byPass.keys()]
    .sort()
    .reverse()
    .slice(0, options.limit ?? 10);
  return Promise.all(
    recent.map(async (pass) => {
      const namespaces = byPass.get(pass) ?? [];
      const parts = (
        await Promise.all(namespaces.map(async (ns) => partTotals(store, await listPassParts(store, ns, pass))))
      ).flat();
      const byRule: Partial<Record<DeletionRule, number>> = {};
      for (const part of parts)
        for (const [rule, n] of Object.entries(part.byRule))
          byRule[rule as DeletionRule] = (byRule[rule as DeletionRule] ?? 0) + n;
      const objects = Object.values(byRule).reduce((a, n) => a + n, 0);
      const dryRun = parts.length > 0 && parts.every((p) => p.dryRun);
      return {
        passId: pass,
        nowMs: passClockMs(pass),
        dryRun,
        namespaces,
        parts: parts.length,
        objects,
        bytes: parts.reduce((n, p) => n + p.bytes, 0),
        byRule,
      };
    }),
  );
}

/** What a pass deleted (or would delete) in each namespace, and why: distinct lines by key, in key order. */
export async function showGcPass(
  store: ObjectStore,
  pass: string,
  options: { namespaces?: readonly string[] } = {},
): Promise<{ namespaceId: NamespaceId; lines: ManifestLine[] }[]> {
  const id = passId(pass);
  const shown: { namespaceId: NamespaceId; lines: ManifestLine[] }[] = [];
  for (const ns of await namespacesOf(store, options.namespaces)) {
    const lines = distinct((await readPassManifest(store, ns, id)).flatMap((p) => p.lines)).sort((a, b) =>
      a.key < b.key ? -1 : 1,
    );
    if (lines.length) shown.push({ namespaceId: ns, lines });
  }
  return shown;
}

/** A manifest line that names a key, and where it was found. */
export interface DeletionFound {
  readonly passId: PassId;
  readonly part: string;
  readonly line: ManifestLine;
}

/**
 * Every manifest line (within the manifest retention) that names `key`, oldest pass first: the pass
 * that deleted it, and any dry run that would have. A key outside `namespaces/` was never the collector's.
 */
export async function whyDeleted(store: ObjectStore, key: string): Promise<DeletionFound[]> {
  const ns = key.startsWith(NAMESPACES_PREFIX)
    ? namespaceId(key.slice(NAMESPACES_PREFIX.length).split('/')[0])
    : undefined;
  if (!ns) return [];
  const found: DeletionFound[] = [];
  for (const pass of await listManifestPasses(store, ns)) {
    for (const part of await readPassManifest(store, ns, pass)) {
      const line = part.lines.find((l) => l.key === key);
      if (line) {
        found.push({ passId: pass, part: part.key, line });
        break;
      }
    }
  }
  return found;
}
