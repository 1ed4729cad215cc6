/** Temporal fixtures: a client and a worker on a fresh task queue of the shared dev server. */
import { S3Client } from '@aws-sdk/client-s3';
import { ApplicationFailure, Client, Connection, WorkflowFailedError } from '@temporalio/client';
import { msToTs } from '@temporalio/common/lib/time';
import {
  bundleWorkflowCode,
  DefaultLogger,
  NativeConnection,
  Runtime,
  Worker,
  type WorkflowBundle,
} from '@temporalio/worker';
import { afterAll, beforeAll, expect, inject } from 'vitest';
import { resolveSettings, shrunkTiming, type CompactionSettings } from '../../src/config';
import { createS3ObjectStore, type ObjectStore } from '../../src/store';
import { createWorker, WORKFLOWS_PATH, type CreateWorkerOptions } from '../../src/worker';
import { startS3FaultProxy, type S3Exchange, type S3FaultProxy } from './s3-fault-proxy';
import { openTestStore, s3ClientConfig, type StoreKind, type TestStore } from './stores';

// Worker state changes at INFO drown test output; warnings and errors still show.
Runtime.install({ logger: new DefaultLogger('WARN') });

let counter = 0;
export const uniqueId = (prefix: string) => `${prefix}-${process.pid}-${Date.now().toString(36)}-${counter++}`;

/**
 * A new Temporal namespace on the server `client` talks to, with no custom search attribute, once
 * its frontend knows it (a registered namespace reaches the frontend's cache within seconds).
 */
export async function freshTemporalNamespace(client: Client, prefix = 'ns'): Promise<string> {
  const namespace = uniqueId(prefix);
  await client.connection.workflowService.registerNamespace({
    namespace,
    workflowExecutionRetentionPeriod: msToTs('1 day'),
  });
  for (const deadline = Date.now() + 30_000; ;) {
    try {
      await client.connection.workflowService.describeNamespace({ namespace });
      await client.connection.operatorService.listSearchAttributes({ namespace });
      return namespace;
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
  }
}

/** `address`: another Temporal server than the shared one (a test that starts its own). */
export async function connectClient(
  address = inject('temporalAddress'),
): Promise<{ client: Client; close: () => Promise<void> }> {
  const connection = await Connection.connect({ address });
  return { client: new Client({ connection }), close: () => connection.close() };
}

/** A test store of `kind` and a Temporal client for one describe block: opened before its tests, closed after them. */
export function storeAndClient(kind: StoreKind): { readonly fixture: TestStore; readonly client: Client } {
  const opened: { fixture?: TestStore; client?: Client; close?: () => Promise<void> } = {};
  beforeAll(async () => {
    opened.fixture = await openTestStore(kind);
    ({ client: opened.client, close: opened.close } = await connectClient());
  });
  afterAll(async () => {
    await opened.close?.();
    await opened.fixture?.store.close();
  });
  return {
    get fixture() {
      return opened.fixture as TestStore;
    },
    get client() {
      return opened.client as Client;
    },
  };
}

/** Settings at shrunk timings: a lease refresh every `unitMs`, everything else scaled to keep the invariants. */
export function testSettings(
  unitMs = 1000,
  overrides: Partial<Omit<CompactionSettings, 'timing'>> = {},
): CompactionSettings {
  const heartbeatTimeoutMs = overrides.heartbeatTimeoutMs ?? 5000;
  return resolveSettings({
    timing: shrunkTiming(unitMs, heartbeatTimeoutMs),
    targetSegmentBytes: 4096,
    ...overrides,
    heartbeatTimeoutMs,
  });
}

export { quickExpirySettings } from './quick-expiry';

export interface RunningWorker {
  readonly worker: Worker;
  readonly taskQueue: string;
  stop(): Promise<void>;
}

let bundle: Promise<WorkflowBundle> | undefined;
/** One workflow bundle per test file: bundling takes seconds, workers take it ready-made. */
export const workflowBundle = (): Promise<WorkflowBundle> =>
  (bundle ??= bundleWorkflowCode({ workflowsPath: WORKFLOWS_PATH, logger: quietLogger }));
const quietLogger = { trace() {}, debug() {}, info() {}, warn: console.warn, error: console.error, log() {} };

export async function startTestWorker(
  store: ObjectStore,
  settings: CompactionSettings,
  taskQueue = uniqueId('tq'),
  address = inject('temporalAddress'),
  /**
   * A single role, worker options such as an `identity` that tells it from other workers of the process, a format's
   * plug-ins;
   * `storeCheck: 'run'` to probe the store first. Test workers skip the probe by default: their stores carry fault
   * plans and
   * recorders of every request, which the probe's writes would disturb; test/integration/store-probe.test.ts runs it.
   */
  extra: Pick<CreateWorkerOptions, 'role' | 'workerOptions' | 'compactor' | 'rootCodec' | 'storeCheck'> = {},
): Promise<RunningWorker> {
  const connection = await NativeConnection.connect({ address });
  const worker = await createWorker({
    store,
    settings,
    connection,
    taskQueue,
    role: extra.role ?? 'all',
    compactor: extra.compactor,
    rootCodec: extra.rootCodec,
    storeCheck: extra.storeCheck ?? 'skip',
    workerOptions: { shutdownGraceTime: '2 seconds', workflowBundle: await workflowBundle(), ...extra.workerOptions },
    log: () => {},
  });
  const running = worker.run();
  return {
    worker,
    taskQueue,
    async stop() {
      if (worker.getState() === 'RUNNING') worker.shutdown();
      await running;
      await connection.close();
    },
  };
}

/** Replays the recorded history of a run with the current workflow code: fails on any non-determinism. */
export async function expectReplays(client: Client, workflowId: string, runId?: string): Promise<void> {
  const history = await client.workflow.getHandle(workflowId, runId).fetchHistory();
  await Worker.runReplayHistory({ workflowBundle: await workflowBundle() }, history, workflowId);
}

/** The typed failure a workflow run ends with (its type and message), asserting that it failed with one. */
export async function failureOf(run: Promise<unknown>): Promise<ApplicationFailure> {
  const err: unknown = await run.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(WorkflowFailedError);
  const cause = (err as WorkflowFailedError).cause;
  expect(cause).toBeInstanceOf(ApplicationFailure);
  return cause as ApplicationFailure;
}

/** A worker whose store reaches MinIO through the S3 fault proxy, beside a direct store on the same bucket. */
export interface WorkerBehindProxy {
  readonly direct: TestStore;
  readonly proxy: S3FaultProxy;
  readonly worker: RunningWorker;
  /** Every request the server answered, as the proxy saw it: the ground truth of what the worker did. */
  readonly exchanges: S3Exchange[];
  stop(): Promise<void>;
}

export async function startWorkerBehindProxy(settings: CompactionSettings): Promise<WorkerBehindProxy> {
  const direct = await openTestStore('minio');
  const proxy = await startS3FaultProxy(direct.endpoint!.endpoint);
  const exchanges: S3Exchange[] = [];
  proxy.observe((exchange) => exchanges.push(exchange));
  const client = new S3Client({ ...s3ClientConfig(direct.endpoint!), endpoint: proxy.endpoint });
  const worker = await startTestWorker(
    createS3ObjectStore({ bucket: direct.bucket!, client, operationDeadlineMs: 10_000 }),
    settings,
  );
  return {
    direct,
    proxy,
    worker,
    exchanges,
    async stop() {
      await worker.stop();
      await proxy.stop();
      await direct.store.close();
    },
  };
}
