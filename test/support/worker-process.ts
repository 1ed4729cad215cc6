/**
 * Processes configured only by the environment, as an operator would run them: the worker (src/worker/main.ts) and the
 * CLI.
 */
import type { ChildProcess } from 'node:child_process';
import { inject } from 'vitest';
import type { CompactionSettings } from '../../src/config';
import type { TestStore } from './stores';
import { testSettings } from './temporal';
import { spawnWorkerProcess, workerEnvironment } from './worker-env';

/** The environment that points a process at the test servers, the fixture's bucket and these settings. */
export function environmentFor(fixture: TestStore, taskQueue: string, settings: CompactionSettings): NodeJS.ProcessEnv {
  return workerEnvironment(
    { temporalAddress: inject('temporalAddress'), s3: fixture.endpoint!, bucket: fixture.bucket!, taskQueue },
    settings,
  );
}

/**
 * Starts a worker process on MinIO at shrunk timings (refresh 1 s, 1 KiB segments, heartbeat timeout 2 s); `env` adds
 * or overrides.
 */
export function spawnWorker(fixture: TestStore, taskQueue: string, env: Record<string, string> = {}): ChildProcess {
  const settings = testSettings(1000, { targetSegmentBytes: 1024, heartbeatTimeoutMs: 2000 });
  return spawnWorkerProcess({ ...environmentFor(fixture, taskQueue, settings), ...env });
}
