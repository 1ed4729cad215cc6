/**
 * Discovering what a pass collects: the namespaces of the bucket and the job prefixes of a
 * namespace, one page at a time, resumable after any key.
 */
import {
  compactionsPrefix,
  NAMESPACES_PREFIX,
  parseJobPrefix,
  parseNamespacePrefix,
  type MetadataCompactionId,
  type NamespaceId,
} from '../keys';
import { AFTER_ALL_UNDER, type ObjectStore } from '../store';

/**
 * A position ending in `/` is a common prefix: resuming after it must skip everything under it too.
 * The one exception is an object whose key is the listed prefix itself (a folder marker): skipping
 * "under" it would skip every child of the prefix.
 */
const startAfter = (prefix: string, position: string | undefined): string | undefined =>
  position === undefined || position === prefix || !position.endsWith('/') ? position : position + AFTER_ALL_UNDER;

export interface ChildrenPage<T> {
  readonly found: T[];
  /** Keys and common prefixes under the listed prefix that are not of the grammar: retained and reported. */
  readonly unrecognised: string[];
  /** Where the next page starts (exclusive); undefined when this was the last page. */
  readonly next: string | undefined;
}

/** A page of children to list: under `prefix`, after `after`, at most `limit`, each common prefix read by `parse`. */
interface ChildrenRequest<T> {
  readonly prefix: string;
  readonly after: string | undefined;
  readonly limit: number;
  /** The child a common prefix names, or undefined for one not of the grammar. */
  readonly parse: (commonPrefix: string) => T | undefined;
}

/** One page of the immediate children of `prefix` (delimiter `/`), resumable after any key or common prefix. */
async function listChildren<T>(
  store: ObjectStore,
  { prefix, after, limit, parse }: ChildrenRequest<T>,
): Promise<ChildrenPage<T>> {
  const page = await store.list({ prefix, delimiter: '/', startAfter: startAfter(prefix, after), maxKeys: limit });
  const found: T[] = [];
  const unrecognised = page.objects.map((o) => o.key);
  for (const p of page.commonPrefixes) {
    const parsed = parse(p);
    if (parsed === undefined) unrecognised.push(p);
    else found.push(parsed);
  }
  const last = [...page.commonPrefixes, ...page.objects.map((o) => o.key)].sort().at(-1);
  return { found, unrecognised, next: page.nextCursor === undefined ? undefined : last };
}

export const listNamespaces = (
  store: ObjectStore,
  after: string | undefined,
  limit: number,
): Promise<ChildrenPage<NamespaceId>> =>
  listChildren(store, { prefix: NAMESPACES_PREFIX, after, limit, parse: parseNamespacePrefix });

/** Async, so a raw namespace id rejects like any other failure instead of throwing before a promise exists. */
export const listJobPrefixes = async (
  store: ObjectStore,
  ns: NamespaceId,
  after: string | undefined,
  limit: number,
): Promise<ChildrenPage<MetadataCompactionId>> =>
  listChildren(store, { prefix: compactionsPrefix(ns), after, limit, parse: (p) => parseJobPrefix(ns, p) });
