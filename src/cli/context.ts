/**
 * What commands need from the environment, each opened on first use and all closed once at exit:
 * settings (`COMPACTION_*`), the store (`COMPACTION_S3_*` and the AWS SDK's chain, or the embedded
 * store), and Temporal (`TEMPORAL_*` / envconfig profile). A command that never touches Temporal
 * never needs a server.
 */
import { Client, Connection } from '@temporalio/client';
import { environment, settingsFromEnv, type CompactionSettings } from '../config';
import { jsonRootCodec, type RootCodec } from '../root';
import { objectStoreFromEnv, storeIdentityFromEnv, type ObjectStore } from '../store';
import { configuredFormat } from '../worker/format-module';
import { temporalTarget, type TemporalTarget } from '../worker/connect';
import { workerSetupFromEnv, type WorkerSetup, type WorkerSetupOverrides } from '../worker/setup';
import { collectorTaskQueueFromEnv, taskQueueFromEnv } from '../worker/task-queue';
import { TemporalUnreachableError } from './exit-codes';
import { processOutput, type Output } from './output';

export interface CliContext {
  readonly out: Output;
  settings(): CompactionSettings;
  /**
   * The configured store, its access verified (a wrong bucket or credential is a configuration error).
   * Commands read or repair a store that exists; only the worker, which opens its own, creates one.
   */
  store(): Promise<ObjectStore>;
  /**
   * The store the environment names, recorded in the runs a command starts (undefined: named by neither setting, left
   * to the workers).
   */
  storeIdentity(): string | undefined;
  /** How roots are read: `COMPACTION_FORMAT_MODULE`'s `rootCodec`, else the package's `root.json`. */
  rootCodec(): Promise<RootCodec>;
  temporal(): TemporalTarget;
  client(): Promise<Client>;
  taskQueue(): string;
  /** Where collector passes send their work: `COMPACTION_COLLECTOR_TASK_QUEUE`, else {@link taskQueue}. */
  collectorTaskQueue(): string;
  /**
   * A worker's setup from this context's environment, settings and Temporal, with the `worker` command's flags over
   * them.
   */
  workerSetup(overrides: Pick<WorkerSetupOverrides, 'role' | 'formatModule'>): Promise<WorkerSetup>;
  nowMs(): number;
  close(): Promise<void>;
}

/** Runs `connect`, turning any failure into one that names the address and the setting to change. */
export async function connectTemporal<T>(target: TemporalTarget, connect: () => Promise<T>): Promise<T> {
  try {
    return await connect();
  } catch (err) {
    throw new TemporalUnreachableError(target.address, target.configured, err);
  }
}

const once = <T>(make: () => T): (() => T) => {
  let made: { value: T } | undefined;
  return () => (made ??= { value: make() }).value;
};

export function contextFromEnv(given?: NodeJS.ProcessEnv, out: Output = processOutput): CliContext {
  const env = environment(given);
  const closers: (() => Promise<void>)[] = [];
  const settings = once(() => settingsFromEnv(env));
  const temporal = once(() => temporalTarget(env));
  const store = once(async () => {
    const made = objectStoreFromEnv(env, settings().timing.operationDeadlineMs, { existing: true });
    closers.push(() => made.close());
    await made.verifyAccess();
    return made;
  });
  const client = once(async () => {
    const target = temporal();
    const connection = await connectTemporal(target, () => Connection.connect(target.connectionOptions));
    closers.push(() => connection.close());
    return new Client({ connection, namespace: target.namespace });
  });
  return {
    out,
    settings,
    store,
    storeIdentity: () => storeIdentityFromEnv(env),
    rootCodec: once(async () => (await configuredFormat(env))?.rootCodec ?? jsonRootCodec),
    temporal,
    client,
    taskQueue: () => taskQueueFromEnv(env),
    collectorTaskQueue: () => collectorTaskQueueFromEnv(env),
    workerSetup: (overrides) => workerSetupFromEnv(env, { ...overrides, settings: settings(), temporal: temporal() }),
    nowMs: () => Date.now(),
    async close() {
      await Promise.allSettled(closers.splice(0).map((close) => close()));
    },
  };
}
