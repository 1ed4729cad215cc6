/**
 * The package's `ObjectStore` port as one party sees the simulated bucket: every call is a request
 * through the simulation (`Sim.request`), with its own fault and delays.
 */
import {
  NotFoundError,
  type BucketVersioning,
  DeleteResult,
  ListPage,
  ListRequest,
  ObjectInfo,
  ObjectStore,
  StoredObject,
  StreamedObject,
  StreamOptions,
} from '../../src/store';
import type { Party, Sim } from './sim';

/** A body streamed back in two chunks, so readers meet a chunk boundary as they would S3's windows. */
async function* chunksOf(body: Uint8Array): AsyncGenerator<Uint8Array> {
  const half = Math.ceil(body.length / 2);
  yield body.subarray(0, half);
  if (half < body.length) yield body.subarray(half);
}

export class PartyStore implements ObjectStore {
  readonly description = 'simulated bucket';

  constructor(
    private readonly sim: Sim,
    private readonly party: Party,
  ) {}

  get(key: string, options: { maxBytes?: number } = {}): Promise<StoredObject> {
    return this.sim.request(this.party, 'get', key, () => this.sim.world.get(key, options.maxBytes));
  }

  async getStream(key: string, options: StreamOptions = {}): Promise<StreamedObject> {
    const object = await this.sim.request(this.party, 'getStream', key, () => this.sim.world.get(key));
    const { start, end } = options.range ?? { start: 0, end: Infinity };
    return {
      key,
      body: chunksOf(object.body.subarray(start, end)),
      etag: object.etag,
      lastModified: object.lastModified,
    };
  }

  head(key: string): Promise<ObjectInfo> {
    return this.sim.request(this.party, 'head', key, () => this.sim.world.head(key));
  }

  putIfAbsent(key: string, body: Uint8Array): Promise<{ etag: string }> {
    return this.sim.request(this.party, 'putIfAbsent', key, () => this.sim.world.putIfAbsent(key, body), { body });
  }

  putIfMatch(key: string, body: Uint8Array, etag: string): Promise<{ etag: string }> {
    return this.sim.request(this.party, 'putIfMatch', key, () => this.sim.world.putIfMatch(key, body, etag), {
      body,
      etag,
    });
  }

  put(key: string, body: Uint8Array): Promise<{ etag: string }> {
    return this.sim.request(this.party, 'put', key, () => this.sim.world.put(key, body), { body });
  }

  list(request: ListRequest): Promise<ListPage> {
    return this.sim.request(this.party, 'list', request.prefix, () => this.sim.world.list(request));
  }

  async deleteMany(keys: readonly string[]): Promise<DeleteResult> {
    if (keys.length === 0) return { deleted: [], failed: [] };
    return this.sim.request(this.party, 'deleteMany', keys[0]!, (failing) => this.sim.world.deleteMany(keys, failing), {
      keys,
    });
  }

  /** S3 answers 404 to a conditional delete of a missing key; the adapter counts it as gone, and so does this. */
  async deleteIfMatch(key: string, etag: string): Promise<void> {
    await this.sim
      .request(this.party, 'deleteIfMatch', key, () => this.sim.world.deleteIfMatch(key, etag), { keys: [key], etag })
      .catch((err: unknown) => {
        if (!(err instanceof NotFoundError)) throw err;
      });
  }

  async verifyAccess(): Promise<void> {}

  async versioning(): Promise<BucketVersioning> {
    return 'unversioned';
  }

  async close(): Promise<void> {}
}
