/** Processes configured only by the environment, as an operator would run them: the worker (src/worker/main.ts) and the CLI. */
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { inject } from 'vitest';
import { TIMING_ENV, type CompactionSettings, type Timing } from '../../src/config';
import type { TestStore } from './stores';
import { testSettings } from './temporal';

const workerMain = join(__dirname, '..', '..', 'src', 'worker', 'main.ts');

/** The environment that points a process at the test servers, the fixture's bucket and these settings. */
export function environmentFor(fixture: TestStore, taskQueue: string, settings: CompactionSettings): NodeJS.ProcessEnv {
  const endpoint = fixture.endpoint!;
  const timing = Object.fromEntries(Object.entries(TIMING_ENV).map(([field, name]) => [name, String(settings.timing[field as keyof Timing])]));
  return {
    ...process.env,
    TEMPORAL_ADDRESS: inject('temporalAddress'),
    COMPACTION_TASK_QUEUE: taskQueue,
    COMPACTION_S3_BUCKET: fixture.bucket,
    COMPACTION_S3_FORCE_PATH_STYLE: 'true',
    AWS_ENDPOINT_URL_S3: endpoint.endpoint,
    AWS_REGION: endpoint.region,
    AWS_ACCESS_KEY_ID: endpoint.accessKey,
    AWS_SECRET_ACCESS_KEY: endpoint.secretKey,
    ...timing,
    COMPACTION_TARGET_SEGMENT_BYTES: String(settings.targetSegmentBytes),
    COMPACTION_HEARTBEAT_TIMEOUT_MS: String(settings.heartbeatTimeoutMs),
  };
}

/** Starts a worker process on MinIO at shrunk timings (refresh 1 s, 1 KiB segments, heartbeat timeout 2 s); `env` adds or overrides. */
export function spawnWorker(fixture: TestStore, taskQueue: string, env: Record<string, string> = {}): ChildProcess {
  const settings = testSettings(1000, { targetSegmentBytes: 1024, heartbeatTimeoutMs: 2000 });
  return spawn(process.execPath, ['--import', 'tsx', workerMain], {
    stdio: ['ignore', 'inherit', 'inherit'],
    env: { ...environmentFor(fixture, taskQueue, settings), ...env },
  });
}
