/**
 * The scale benchmark's moving parts: worker processes configured by the environment (as an
 * operator runs them), jobs seeded as many namespaces of many groups, and what the servers and the
 * kernel report about them.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';
import { TIMING_ENV, type CompactionSettings, type Timing } from '../../src/config';
import { freePort, type S3Endpoint } from '../../src/devservers';
import { familyGroup, inputSegmentKey, namespaceId, newSegmentId } from '../../src/keys';
import { updateRoot } from '../../src/protocol';
import { addSegments, jsonRootCodec } from '../../src/root';
import { SEGMENT_EXTENSION } from '../../src/segments';
import { createS3ObjectStore, type ObjectStore } from '../../src/store';
import { inBatches } from '../../src/store/batches';
import { cpuSeconds, rssBytes } from './proc';
import { scrape, type Sample } from './prometheus';
import { MEMORY_LINE, READY_LINE, type WorkerMemory } from './scale-worker';

const WORKER_MAIN = join(__dirname, 'scale-worker.ts');
/**
 * Groups per namespace: small roots (readGroup reads the whole root) and few namespaces for a collector pass to walk.
 */
export const GROUPS_PER_NAMESPACE = 100;

export interface Bucket {
  readonly endpoint: S3Endpoint;
  readonly name: string;
  readonly store: ObjectStore;
}

export function s3Client(endpoint: S3Endpoint): S3Client {
  return new S3Client({
    endpoint: endpoint.endpoint,
    region: endpoint.region,
    forcePathStyle: true,
    credentials: { accessKeyId: endpoint.accessKey, secretAccessKey: endpoint.secretKey },
  });
}

export async function createBucket(endpoint: S3Endpoint, name: string): Promise<Bucket> {
  const client = s3Client(endpoint);
  await client.send(new CreateBucketCommand({ Bucket: name }));
  return { endpoint, name, store: createS3ObjectStore({ bucket: name, client }) };
}

export interface JobSpec {
  readonly namespaceId: string;
  readonly group: string;
}

/**
 * `count` jobs as namespaces `{prefix}-{i}` of `groupsPerNamespace` groups, each group
 * `inputsPerGroup` (empty) input segments in its root: one makes a job end `unchanged`, more make
 * it publish (with a worker that writes an output: `SCALE_PUBLISH`).
 */
export async function seedJobs(
  store: ObjectStore,
  prefix: string,
  count: number,
  { inputsPerGroup = 1, groupsPerNamespace = GROUPS_PER_NAMESPACE } = {},
): Promise<JobSpec[]> {
  const jobs = Array.from({ length: count }, (_, i) => ({
    namespaceId: `${prefix}-${Math.floor(i / groupsPerNamespace)}`,
    group: `g${String(i % groupsPerNamespace).padStart(3, '0')}`,
  }));
  const inputs = jobs.map((j) =>
    Array.from({ length: inputsPerGroup }, () =>
      inputSegmentKey(namespaceId(j.namespaceId), newSegmentId(), SEGMENT_EXTENSION),
    ),
  );
  // The test compactor reads no input, but a job checks its inputs exist before its lease does: one empty object each.
  await inBatches(inputs.flat(), 1, 32, ([key]) => store.put(key!, new Uint8Array()));
  const namespaces = [...new Set(jobs.map((j) => j.namespaceId))];
  await inBatches(namespaces, 1, 16, ([ns]) =>
    updateRoot(
      store,
      namespaceId(ns),
      (root) =>
        jobs.reduce((r, j, i) => (j.namespaceId === ns ? addSegments(r, familyGroup(j.group), inputs[i]!) : r), root),
      { codec: jsonRootCodec },
    ),
  );
  return jobs;
}

export interface WorkerProcessOptions {
  readonly temporalAddress: string;
  readonly bucket: Bucket;
  readonly taskQueue: string;
  readonly settings: CompactionSettings;
  readonly name: string;
  /** Undefined: SDK defaults are not overridden beyond createWorker's own. */
  readonly workerOptions?: Record<string, unknown>;
  readonly holdMs?: number;
  /** The job writes one output once its work is done, so a group of several inputs publishes. */
  readonly publish?: boolean;
  /** The file {@link WorkerProcess.reportMemory} has the worker write its heap snapshot to; unset: none written. */
  readonly heapSnapshot?: string;
  /** The bare floor's worker: its workflows and activities only heartbeat and wait (see ./scale-worker). */
  readonly bare?: boolean;
  /** Node and V8 flags of the worker process. */
  readonly nodeOptions?: readonly string[];
  /** The folder of the package's build (`lib/`, as installed) the worker runs, rather than its sources under tsx. */
  readonly built?: string;
}

export interface WorkerProcess {
  readonly name: string;
  readonly pid: number;
  readonly metricsUrl: string;
  readonly child: ChildProcess;
  scrape(): Promise<Sample[]>;
  cpuSeconds(): number;
  rssBytes(): number;
  /**
   * Resolves with the worker's memory, after it has written a V8 heap snapshot to `heapSnapshot` if
   * given (its event loop stops meanwhile: seconds per hundred MiB of heap).
   */
  reportMemory(): Promise<WorkerMemory>;
  /** SIGTERM (graceful) or SIGKILL (a dead worker); resolves once it has exited. */
  stop(signal?: NodeJS.Signals): Promise<void>;
}

/**
 * The environment an operator would give the worker: Temporal, the bucket on MinIO, every timing, the Prometheus
 * endpoint.
 */
function workerEnvironment(options: WorkerProcessOptions, metricsAddress: string): NodeJS.ProcessEnv {
  const { endpoint } = options.bucket;
  const timing = Object.fromEntries(
    Object.entries(TIMING_ENV).map(([field, name]) => [name, String(options.settings.timing[field as keyof Timing])]),
  );
  return {
    ...process.env,
    TEMPORAL_ADDRESS: options.temporalAddress,
    COMPACTION_TASK_QUEUE: options.taskQueue,
    COMPACTION_S3_BUCKET: options.bucket.name,
    COMPACTION_S3_FORCE_PATH_STYLE: 'true',
    AWS_ENDPOINT_URL_S3: endpoint.endpoint,
    AWS_REGION: endpoint.region,
    AWS_ACCESS_KEY_ID: endpoint.accessKey,
    AWS_SECRET_ACCESS_KEY: endpoint.secretKey,
    ...timing,
    COMPACTION_HEARTBEAT_TIMEOUT_MS: String(options.settings.heartbeatTimeoutMs),
    COMPACTION_OWNER_ID: options.name,
    COMPACTION_METRICS_PROMETHEUS: metricsAddress,
    ...(options.workerOptions && { SCALE_WORKER_OPTIONS: JSON.stringify(options.workerOptions) }),
    ...(options.holdMs !== undefined && { SCALE_HOLD_MS: String(options.holdMs) }),
    ...(options.publish && { SCALE_PUBLISH: '1' }),
    ...(options.heapSnapshot && { SCALE_HEAP_SNAPSHOT: options.heapSnapshot }),
    ...(options.bare && { SCALE_BARE: '1' }),
    ...(options.built && { SCALE_BUILT: options.built }),
  };
}

/** Spawns a worker process and resolves once it polls its task queue. */
export async function spawnScaleWorker(options: WorkerProcessOptions): Promise<WorkerProcess> {
  const metricsAddress = `127.0.0.1:${await freePort()}`;
  const child = spawn(process.execPath, [...(options.nodeOptions ?? []), '--import', 'tsx', WORKER_MAIN], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: workerEnvironment(options, metricsAddress),
  });
  const exited = once(child, 'exit');
  const lines = createInterface({ input: child.stdout! });
  await new Promise<void>((resolve, reject) => {
    lines.on('line', (line) => {
      if (line.startsWith(READY_LINE)) resolve();
    });
    void exited.then(([code]) =>
      reject(new Error(`worker ${options.name} exited with ${String(code)} before it was ready`)),
    );
  });
  const pid = child.pid!;
  const metricsUrl = `http://${metricsAddress}/metrics`;
  return {
    name: options.name,
    pid,
    metricsUrl,
    child,
    scrape: () => scrape(metricsUrl),
    cpuSeconds: () => cpuSeconds(pid),
    rssBytes: () => rssBytes(pid),
    reportMemory: () =>
      new Promise((resolve) => {
        const written = (line: string) => {
          if (!line.startsWith(MEMORY_LINE)) return;
          lines.off('line', written);
          resolve(JSON.parse(line.slice(MEMORY_LINE.length + 2)) as WorkerMemory);
        };
        lines.on('line', written);
        child.kill('SIGUSR2');
      }),
    async stop(signal = 'SIGTERM') {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill(signal);
      const escalate = setTimeout(() => child.kill('SIGKILL'), 20_000);
      await exited;
      clearTimeout(escalate);
    },
  };
}
