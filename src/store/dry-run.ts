/**
 * A dry run as a store: reads go to the real store, writes and deletes are recorded instead of
 * performed and answered as if they succeeded. The collector runs a dry run against it with the
 * very code of a real pass, so no write site has to remember the flag, and a new one cannot forget it.
 */
import { storeIdentity, type DeleteResult, type ObjectStore } from './port';

/** A write the dry run would have made. */
export type RecordedWrite =
  | { readonly kind: 'put' | 'putIfAbsent' | 'putIfMatch'; readonly key: string; readonly bytes: number }
  | { readonly kind: 'delete'; readonly key: string };

/** ETag the dry-run store answers for a write it did not make; no real object ever has it (not hex). */
const DRY_RUN_ETAG = '"dry-run"';

/** Whether `etag` is the dry-run store's answer to a write it only recorded. */
export const isDryRunEtag = (etag: string): boolean => etag === DRY_RUN_ETAG;

/**
 * `store` with every write recorded through `record` instead of performed: a conditional write is
 * answered as if its condition held (the real pass's write is what the report and manifest predict),
 * a delete as if every key was deleted. Reads see the store as it is, without the recorded writes.
 */
export function dryRunStore(store: ObjectStore, record: (write: RecordedWrite) => void = () => {}): ObjectStore {
  const written = (kind: 'put' | 'putIfAbsent' | 'putIfMatch') => async (key: string, body: Uint8Array) => {
    record({ kind, key, bytes: body.byteLength });
    return { etag: DRY_RUN_ETAG };
  };
  return {
    description: `dry run of ${store.description}`,
    identity: () => storeIdentity(store),
    get: (key, options) => store.get(key, options),
    getStream: (key, options) => store.getStream(key, options),
    head: (key) => store.head(key),
    list: (request) => store.list(request),
    verifyAccess: () => store.verifyAccess(),
    versioning: () => store.versioning(),
    put: written('put'),
    putIfAbsent: written('putIfAbsent'),
    putIfMatch: written('putIfMatch'),
    async deleteMany(keys): Promise<DeleteResult> {
      for (const key of keys) record({ kind: 'delete', key });
      return { deleted: [...keys], failed: [] };
    },
    async deleteIfMatch(key): Promise<void> {
      record({ kind: 'delete', key });
    },
    // The real store belongs to whoever wrapped it.
    close: async () => {},
  };
}
