/**
 * A reader: one root read (`readGroupSnapshot`, on its own clock), then every segment the snapshot
 * names read at times the choices spread over its promise (`readableUntilMs`), many near its end;
 * the group's records merged by the package's reader (`readGroupRecords`) and held to the model.
 */
import {
  readableUntilMs,
  readGroupRecords,
  readGroupSnapshot,
  type GroupSnapshot,
  type LiveRecord,
} from '../../../src/reader';
import { TypedError } from '../../../src/errors';
import { jsonRootCodec } from '../../../src/root';
import { NotFoundError, type ObjectStore, type StreamedObject } from '../../../src/store';
import { between, pick } from '../choices';
import type { Env } from '../env';
import type { ReaderContext, SnapshotContext } from '../invariants';
import type { Party } from '../sim';
import { shortKey } from '../trace';

export interface ReaderPlan {
  readonly afterMs: number;
  readonly group: string;
  /** Snapshots read one after another, each read to its end. */
  readonly rounds: number;
}

/** The bytes a reader fetched, as a store its merge reads from (only `getStream` is called). */
function fetchedStore(bytes: ReadonlyMap<string, Uint8Array>): ObjectStore {
  const getStream = async (key: string): Promise<StreamedObject> => {
    const body = bytes.get(key)!;
    return {
      key,
      body: (async function* () {
        yield body;
      })(),
      etag: '',
      lastModified: undefined,
    };
  };
  return { getStream } as unknown as ObjectStore;
}

async function bodyOf(object: StreamedObject): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  for await (const part of object.body) parts.push(part);
  return Buffer.concat(parts);
}

export async function runReader(env: Env, party: Party, plan: ReaderPlan): Promise<void> {
  await party.sleep(plan.afterMs);
  for (let round = 0; round < plan.rounds && !env.sim.healed; round++) {
    if (round > 0) await party.sleep(between(env.sim.choices, 0, env.timing.leaseRefreshIntervalMs));
    await readOnce(env, party, plan);
  }
}

/**
 * A prober: a snapshot every few hundred milliseconds, each of its segments read close to the end of
 * its promise while the next snapshots are taken: readers that read the root at every moment, so a
 * promise cut short is met wherever it falls.
 */
export async function runProber(env: Env, party: Party, plan: Pick<ReaderPlan, 'afterMs' | 'group'>): Promise<void> {
  await party.sleep(plan.afterMs);
  const { sim, timing } = env;
  const probes: Promise<void>[] = [];
  while (!sim.healed) {
    party.context = undefined;
    let snapshot: GroupSnapshot | undefined;
    try {
      snapshot = await readGroupSnapshot(
        party.store,
        { namespaceId: env.ns, group: plan.group },
        jsonRootCodec,
        party.clock,
      );
    } catch (err) {
      if (!(err instanceof TypedError)) throw err;
    }
    if (snapshot && snapshot.segments.length > 0) {
      const { segments } = snapshot;
      const until = readableUntilMs(snapshot, timing);
      const context: ReaderContext = { reader: true, readableUntilMs: until, rootGeneration: snapshot.rootGeneration };
      probes.push(
        (async () => {
          await party.sleep(
            Math.max(
              0,
              until -
                party.clock() -
                between(sim.choices, timing.operationDeadlineMs / 4, 2 * timing.operationDeadlineMs),
            ),
          );
          party.context = context;
          const reads = segments.map((key) => party.store.getStream(key));
          party.context = undefined;
          await Promise.all(reads.map((read) => read.then(bodyOf, () => undefined)));
        })(),
      );
    }
    await party.sleep(between(sim.choices, timing.operationDeadlineMs / 2, timing.leaseRefreshIntervalMs));
  }
  await Promise.all(probes);
}

/** One snapshot, its segments read within its promise, its view checked. */
async function readOnce(env: Env, party: Party, plan: ReaderPlan): Promise<void> {
  const { sim, timing } = env;
  let snapshot: GroupSnapshot;
  const read: SnapshotContext = { snapshot: {} };
  party.context = read;
  try {
    snapshot = await readGroupSnapshot(
      party.store,
      { namespaceId: env.ns, group: plan.group },
      jsonRootCodec,
      party.clock,
    );
  } catch (err) {
    if (!(err instanceof TypedError)) throw err;
    party.log(`no snapshot: ${err.message.split('\n')[0]}`);
    return;
  } finally {
    party.context = undefined;
  }
  const rootEvent = read.snapshot.event!;
  const until = readableUntilMs(snapshot, timing);
  party.context = {
    reader: true,
    readableUntilMs: until,
    rootGeneration: snapshot.rootGeneration,
  } satisfies ReaderContext;
  party.log(
    `snapshot of ${plan.group} at generation ${snapshot.rootGeneration}: ${snapshot.segments.map(shortKey).join(' ') || 'no segments'}, readable for ${until - party.clock()} ms`,
  );
  const bytes = new Map<string, Uint8Array>();
  for (const key of snapshot.segments) {
    // Most reads soon, many close to the end of the promise, where a grace cut short shows.
    const left = until - party.clock();
    const wait = pick(sim.choices, [
      [2, () => between(sim.choices, 0, timing.operationDeadlineMs)],
      [
        3,
        () =>
          between(
            sim.choices,
            Math.max(0, left - 2 * timing.operationDeadlineMs),
            left - timing.operationDeadlineMs / 2,
          ),
      ],
      [1, () => between(sim.choices, 0, left)],
    ])();
    await party.sleep(Math.max(0, wait));
    for (;;) {
      if (party.clock() >= until) {
        party.log(`promise over before ${shortKey(key)} was read: the view is not checked`);
        party.context = undefined;
        return;
      }
      try {
        bytes.set(key, await bodyOf(await party.store.getStream(key)));
        break;
      } catch (err) {
        if (err instanceof NotFoundError) {
          party.context = undefined;
          return;
        }
        if (!(err instanceof TypedError)) throw err;
        await party.sleep(env.retryDelayMs(1));
      }
    }
  }
  party.context = undefined;
  const view: LiveRecord[] = [];
  for await (const record of readGroupRecords(fetchedStore(bytes), snapshot)) view.push(record);
  sim.count('reader view checked');
  env.invariants.readerViewMatchesModel(party.name, plan.group, view, rootEvent, snapshot.rootGeneration);
}
