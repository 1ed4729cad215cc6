/**
 * The namespace root (`namespaces/{ns}/metadata/root.json`): the current segment keys of each
 * family group, in the same checksummed envelope as the lease (kind `metadata_root`). It is only
 * ever replaced by compare-and-swap; whatever it names is referenced and never deleted.
 */
import { TypedError } from '../errors';
import { z } from 'zod';
import { decodeEnvelope, describeIssues, encodeEnvelope } from '../envelope';
import { isSegmentKeyOf, rootKey, type FamilyGroup, type NamespaceId } from '../keys';

export const ROOT_KIND = 'metadata_root';
/** A root names segment keys only; a few MB is far beyond any real one. */
export const MAX_ROOT_BYTES = 16 * 1024 * 1024;

export interface RootState {
  /** Namespace this root belongs to; must match its key. */
  readonly namespace_id: NamespaceId;
  /** Increases on every write, so every CAS changes the bytes (and the ETag). */
  readonly generation: number;
  /** Current segment keys of each family group; only segment keys of this namespace. */
  readonly groups: Readonly<Record<string, readonly string[]>>;
}

export class RootCorruptError extends TypedError {
  override readonly name = 'RootCorruptError';
  readonly failureType = 'RootCorrupt';
  readonly retryable = false;
  constructor(
    readonly key: string,
    readonly reason: string,
  ) {
    super(`root ${key} is corrupt: ${reason}`);
  }
}

const payloadSchema = z.strictObject({
  namespace_id: z.string(),
  generation: z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER),
  groups: z.record(z.string().regex(/^[a-z0-9][a-z0-9_-]{0,62}$/), z.array(z.string())),
});

export const emptyRoot = (ns: NamespaceId): RootState => Object.freeze({ namespace_id: ns, generation: 0, groups: {} });

/** Group names are written sorted, so equal roots have equal bytes. */
export function encodeRoot(root: RootState): Uint8Array {
  const groups: Record<string, readonly string[]> = {};
  for (const name of Object.keys(root.groups).sort()) groups[name] = root.groups[name] ?? [];
  return encodeEnvelope(ROOT_KIND, { namespace_id: root.namespace_id, generation: root.generation, groups });
}

export function decodeRoot(bytes: Uint8Array, ns: NamespaceId): RootState {
  const key = rootKey(ns);
  const corrupt = (reason: string) => new RootCorruptError(key, reason);
  if (bytes.length > MAX_ROOT_BYTES) throw corrupt(`${bytes.length} bytes, more than a root may be (${MAX_ROOT_BYTES})`);
  const parsed = payloadSchema.safeParse(decodeEnvelope(ROOT_KIND, bytes, corrupt));
  if (!parsed.success) throw corrupt(`payload: ${describeIssues(parsed.error)}`);
  const root = parsed.data;
  if (root.namespace_id !== ns) throw corrupt(`names namespace ${root.namespace_id}, not the namespace of its key`);
  for (const [group, keys] of Object.entries(root.groups)) {
    const foreign = keys.find((k) => !isSegmentKeyOf(ns, k));
    if (foreign !== undefined) throw corrupt(`group ${group} names ${JSON.stringify(foreign)}, which is not a segment key of ${ns}`);
  }
  return Object.freeze({ ...root, namespace_id: ns });
}

/** Every key the root references: the set the collector must never delete from. */
export const referencedKeys = (root: RootState): ReadonlySet<string> => new Set(Object.values(root.groups).flat());

export const groupSegments = (root: RootState, group: FamilyGroup): readonly string[] => root.groups[group] ?? [];

/** Appends segments to a group (the metadata service's own writer, stood in for by the demo and tests). */
export function addSegments(root: RootState, group: FamilyGroup, keys: readonly string[]): RootState {
  return Object.freeze({
    ...root,
    generation: root.generation + 1,
    groups: { ...root.groups, [group]: [...groupSegments(root, group), ...keys] },
  });
}

export type PublicationPlan =
  | { readonly kind: 'publish'; readonly root: RootState }
  /** An input is no longer current: another writer changed the group; the output is left for the collector. */
  | { readonly kind: 'abandoned'; readonly missingInputs: readonly string[] };

/** Replaces the job's inputs by its outputs in one group; segments added to the group meanwhile are kept. */
export function planPublication(root: RootState, group: FamilyGroup, inputs: readonly string[], outputs: readonly string[]): PublicationPlan {
  const current = groupSegments(root, group);
  const missingInputs = inputs.filter((k) => !current.includes(k));
  if (missingInputs.length) return { kind: 'abandoned', missingInputs };
  const replaced = new Set(inputs);
  const kept = current.filter((k) => !replaced.has(k));
  return {
    kind: 'publish',
    root: Object.freeze({ ...root, generation: root.generation + 1, groups: { ...root.groups, [group]: [...outputs, ...kept] } }),
  };
}
