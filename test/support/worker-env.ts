/**
 * The worker process (src/worker/main.ts) as an operator runs it, configured only by its
 * environment. Free of vitest, so the soak script (scripts/soak.ts) starts workers the same way
 * the integration tests do.
 */
import { spawn, type ChildProcess, type StdioOptions } from 'node:child_process';
import { join } from 'node:path';
import { TIMING_ENV, type CompactionSettings, type Timing } from '../../src/config';
import type { S3Endpoint } from '../../src/devservers';

const workerMain = join(__dirname, '..', '..', 'src', 'worker', 'main.ts');
const crashGuard = join(__dirname, 'crash-guard.mjs');

/** Exit code of a worker process that met an uncaught exception or unhandled rejection (set by crash-guard.mjs). */
export const UNCAUGHT_EXIT_CODE = 70;

const crashes: string[] = [];

/**
 * The worker processes that crashed on an uncaught exception or unhandled rejection since the last call; the test setup
 * fails on any.
 */
export function takeWorkerCrashes(): string[] {
  return crashes.splice(0);
}

/** Where a worker process finds Temporal, the bucket and its task queue. */
export interface WorkerTarget {
  readonly temporalAddress: string;
  readonly s3: S3Endpoint;
  readonly bucket: string;
  readonly taskQueue: string;
}

/** The environment that points a process at `target` with these settings. */
export function workerEnvironment(target: WorkerTarget, settings: CompactionSettings): NodeJS.ProcessEnv {
  const timing = Object.fromEntries(
    Object.entries(TIMING_ENV).map(([field, name]) => [name, String(settings.timing[field as keyof Timing])]),
  );
  return {
    ...process.env,
    TEMPORAL_ADDRESS: target.temporalAddress,
    COMPACTION_TASK_QUEUE: target.taskQueue,
    COMPACTION_S3_BUCKET: target.bucket,
    COMPACTION_S3_FORCE_PATH_STYLE: 'true',
    AWS_ENDPOINT_URL_S3: target.s3.endpoint,
    AWS_REGION: target.s3.region,
    AWS_ACCESS_KEY_ID: target.s3.accessKey,
    AWS_SECRET_ACCESS_KEY: target.s3.secretKey,
    ...timing,
    COMPACTION_TARGET_SEGMENT_BYTES: String(settings.targetSegmentBytes),
    COMPACTION_MAX_FAN_IN: String(settings.maxFanIn),
    COMPACTION_HEARTBEAT_TIMEOUT_MS: String(settings.heartbeatTimeoutMs),
  };
}

/**
 * How long a start waits for a spawned worker process to poll: it loads tsx and bundles its workflows first, slowly on
 * a busy machine.
 */
export const SPAWNED_WORKER_TIMEOUT_MS = 60_000;

/** Starts `src/worker/main.ts` under tsx with this environment and the crash guard. */
export function spawnWorkerProcess(
  env: NodeJS.ProcessEnv,
  stdio: StdioOptions = ['ignore', 'inherit', 'inherit'],
): ChildProcess {
  const child = spawn(process.execPath, ['--import', crashGuard, '--import', 'tsx', workerMain], {
    stdio,
    env: { ...env, CRASH_GUARD_EXIT_CODE: String(UNCAUGHT_EXIT_CODE) },
  });
  child.on('exit', (code) => {
    if (code === UNCAUGHT_EXIT_CODE)
      crashes.push(
        `worker process ${child.pid} (${env.COMPACTION_TASK_QUEUE ?? 'default task queue'}) died of an uncaught exception or unhandled rejection; its stderr says which`,
      );
  });
  return child;
}
