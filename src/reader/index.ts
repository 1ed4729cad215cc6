/**
 * The metadata service's read path over the reference formats (`root.json` by the given codec,
 * `.mseg` segments): a group's live segments at one root generation, its merged records, and a point
 * lookup. Readers read a root's `groups` and nothing else: `retired` lists segments that already
 * left the group and only wait for the collector.
 */
import type { Timing } from '../config';
import { familyGroup, namespaceId, type FamilyGroup, type NamespaceId } from '../keys';
import { readRoot } from '../protocol/root-io';
import { groupSegments, type RootCodec } from '../root';
import { quoted } from '../errors';
import {
  InvalidSegmentInputError,
  loneSurrogate,
  lookupInSegment,
  mergeSegments,
  readSegmentBatches,
  type SegmentRecord,
} from '../segments';
import type { ObjectStore } from '../store';

/** A record a reader sees: the latest version of a key that is not deleted. */
export type LiveRecord = Extract<SegmentRecord, { readonly value: string }>;

/** A family group of a namespace, by its ids: both are checked (`InvalidKeyError`) before any request. */
export interface GroupRef {
  /** The namespace whose root lists the group. */
  readonly namespaceId: string;
  /** The family group. */
  readonly group: string;
}

/** A group as one root showed it: the segments to read, all from the same root read. */
export interface GroupSnapshot {
  /** The namespace whose root was read. */
  readonly namespaceId: NamespaceId;
  /** The family group. */
  readonly group: FamilyGroup;
  /** The root's generation and ETag at the read: a later read with another ETag may name other segments. */
  readonly rootGeneration: number;
  /** The ETag of the root object that was read. */
  readonly rootEtag: string;
  /** The group's live segments; the empty list for a group the root does not name. */
  readonly segments: readonly string[];
  /** The local clock just before the root was read: the reader grace counts from here. */
  readonly readAtMs: number;
}

/** Reads the root once and returns the group's live segments (`RootMissingError` when the namespace has no root). */
export async function readGroupSnapshot(
  store: ObjectStore,
  { namespaceId: ns, group }: GroupRef,
  codec: RootCodec,
  clock: () => number = Date.now,
): Promise<GroupSnapshot> {
  const namespace = namespaceId(ns);
  const validGroup = familyGroup(group);
  const readAtMs = clock();
  const { root, etag } = await readRoot(store, namespace, codec);
  return Object.freeze({
    namespaceId: namespace,
    group: validGroup,
    rootGeneration: root.generation,
    rootEtag: etag,
    segments: groupSegments(root, validGroup),
    readAtMs,
  });
}

/**
 * Until when every segment of `snapshot` stays readable: the reader grace less the clock safety
 * margin. A segment leaves the group only by retirement, and the collector counts the grace from when
 * the retirement was visible in the root (a stamp no earlier than the retiring write landed, spec
 * 6c.2), which is after this snapshot's read: only the clocks of the reader, the store and the pass may
 * disagree, by at most the margin. However late the retiring write lands, the promise holds; a reader
 * that needs longer reads the root again.
 */
export const readableUntilMs = (
  snapshot: GroupSnapshot,
  timing: Pick<Timing, 'readerGraceMs' | 'clockSafetyMarginMs'>,
): number => snapshot.readAtMs + timing.readerGraceMs - timing.clockSafetyMarginMs;

/**
 * The group's records as readers see them, in key order: one per key, the highest `seq` winning,
 * tombstones applied (a deleted key does not appear). Every segment is opened at once and each is
 * verified (its checksum) when its stream ends, after the records it yielded: treat what was read as
 * unverified until this iteration ends without error.
 */
export async function* readGroupRecords(store: ObjectStore, snapshot: GroupSnapshot): AsyncGenerator<LiveRecord> {
  const sources = await Promise.all(
    snapshot.segments.map(async (key) => readSegmentBatches(key, (await store.getStream(key)).body)),
  );
  for await (const batch of mergeSegments(sources, { dropTombstones: false }))
    for (const record of batch) if ('value' in record) yield record;
}

/**
 * The current record of `key` in the group, or undefined when no segment holds it or its latest
 * version is a tombstone. Every byte that decided the answer has passed its checksum before the
 * answer is returned: a v1 segment is read to its end (its checksum is in its footer); in a v2
 * segment the index leads to the one block that may hold the key, and that block and the index are
 * verified ({@link lookupInSegment}). A key that is not well-formed text (a lone surrogate), which
 * no segment may hold, is refused with `InvalidSegmentInputError` before anything is read.
 */
export async function lookupRecord(
  store: ObjectStore,
  snapshot: GroupSnapshot,
  key: string,
): Promise<LiveRecord | undefined> {
  const illFormed = loneSurrogate(key);
  if (illFormed !== undefined) {
    throw new InvalidSegmentInputError({
      namespaceId: snapshot.namespaceId,
      group: snapshot.group,
      reason: `the key ${quoted(key)} is not well-formed text: it has ${illFormed}`,
      refused: 'lookup',
    });
  }
  let found: SegmentRecord | undefined;
  // Segments are read one at a time: memory stays at one segment's read window (v1) or its bytes (v2) however wide the
  // group.
  for (const segment of snapshot.segments) {
    const record = await lookupInSegment(segment, (await store.getStream(segment)).body, key);
    // Highest seq wins; on a tie the later segment, as in the merge.
    if (record !== undefined && (found === undefined || record.seq >= found.seq)) found = record;
  }
  return found !== undefined && 'value' in found ? found : undefined;
}
