/**
 * A stand-in for the metadata service's own writer: writes sorted input segments and registers
 * them in the namespace root. The demo and the tests use it to give compactions something to do.
 */
import { familyGroup, inputSegmentKey, namespaceId, newSegmentId } from '../keys';
import { updateRoot } from '../protocol/root-io';
import { addSegments } from '../root';
import { encodeSegment, SEGMENT_EXTENSION, type SegmentRecord } from '../segments';
import type { ObjectStore } from '../store';

/** Writes one input segment (records sorted by key here) and adds it to the group; returns its key. */
export async function writeInputSegment(store: ObjectStore, ns: string, group: string, records: readonly SegmentRecord[]): Promise<string> {
  const namespace = namespaceId(ns);
  const key = inputSegmentKey(namespace, newSegmentId(), SEGMENT_EXTENSION);
  const sorted = [...records].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  await store.put(key, encodeSegment(sorted));
  await updateRoot(store, namespace, (root) => addSegments(root, familyGroup(group), [key]));
  return key;
}
