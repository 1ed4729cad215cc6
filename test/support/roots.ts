/**
 * Roots written the way a publication or a foreign writer writes them: fixtures that bypass the package writer's
 * registration checks.
 */
import { rootKey, type NamespaceId } from '../../src/keys';
import { readRootIfAny } from '../../src/protocol';
import { emptyRoot, encodeRoot, jsonRootCodec, type RootState } from '../../src/root';
import { PreconditionFailedError, type ObjectStore } from '../../src/store';

/**
 * Replaces the root by CAS with `change` of the current one (an empty root when there is none),
 * generation + 1 unless the change sets a higher one. Unlike `updateRoot` it names anything (staged
 * outputs, keys not in the store) and retires nothing: the test stands in for a publication, or for
 * a writer that breaks the protocol.
 */
export async function writeRoot(
  store: ObjectStore,
  ns: NamespaceId,
  change: (root: RootState) => RootState,
): Promise<RootState> {
  for (;;) {
    const current = await readRootIfAny(store, ns, jsonRootCodec);
    const before = current?.root ?? emptyRoot(ns);
    const changed = change(before);
    const next = { ...changed, generation: Math.max(changed.generation, before.generation + 1) };
    try {
      if (current) await store.putIfMatch(rootKey(ns), encodeRoot(next), current.etag);
      else await store.putIfAbsent(rootKey(ns), encodeRoot(next));
      return next;
    } catch (err) {
      if (!(err instanceof PreconditionFailedError)) throw err;
    }
  }
}
