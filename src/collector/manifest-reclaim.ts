/** The collector's reclaim of its own manifests once they are older than the manifest retention */
import { parseManifestPartKey, passClockMs, passManifestPrefix, type NamespaceId } from '../keys';
import type { ObjectStore } from '../store';
import { DeleteFailedError } from './manifest';
import type { Deleter } from './manifest';
import { listManifestPasses } from './manifest-read';

/**
 * Deletes the manifests of namespace `ns` whose pass clock is more than `retentionMs` before
 * `nowMs`, each part recorded in this pass's manifest first like any deletion; returns how many
 * parts went. A prefix under `metadata/gc/` that is not a pass of the grammar is someone else's and stays.
 */
export async function reclaimExpiredManifests(
  store: ObjectStore,
  ns: NamespaceId,
  { nowMs, retentionMs }: { readonly nowMs: number; readonly retentionMs: number },
  deletes: Deleter,
): Promise<number> {
  let reclaimed = 0;
  for (const pass of await listManifestPasses(store, ns)) {
    const clock = passClockMs(pass);
    // Pass ids sort by clock: the first one inside the retention ends the expired ones.
    if (nowMs - clock <= retentionMs) break;
    let cursor: string | undefined;
    do {
      const page = await store.list({ prefix: passManifestPrefix(ns, pass), ...(cursor !== undefined && { cursor }) });
      const parts = page.objects.filter((o) => parseManifestPartKey(o.key) !== undefined);
      const { failed } = await deletes(
        parts.map((object) => ({ object, rule: 'expired_manifest', read: { passClockMs: clock } })),
      );
      if (failed.length) throw new DeleteFailedError(passManifestPrefix(ns, pass), failed);
      reclaimed += parts.length;
      cursor = page.nextCursor;
    } while (cursor !== undefined);
  }
  return reclaimed;
}
