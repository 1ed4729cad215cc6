/** A worker in its own process (src/worker/main.ts), configured only by the environment, as an operator would run it. */
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { inject } from 'vitest';
import type { TestStore } from './stores';

const workerMain = join(__dirname, '..', '..', 'src', 'worker', 'main.ts');

/** Starts a worker on MinIO at shrunk timings (refresh 1 s); `env` adds or overrides variables. */
export function spawnWorker(fixture: TestStore, taskQueue: string, env: Record<string, string> = {}): ChildProcess {
  const endpoint = fixture.endpoint!;
  return spawn(process.execPath, ['--import', 'tsx', workerMain], {
    stdio: ['ignore', 'inherit', 'inherit'],
    env: {
      ...process.env,
      TEMPORAL_ADDRESS: inject('temporalAddress'),
      COMPACTION_TASK_QUEUE: taskQueue,
      COMPACTION_S3_BUCKET: fixture.bucket,
      COMPACTION_S3_FORCE_PATH_STYLE: 'true',
      AWS_ENDPOINT_URL_S3: endpoint.endpoint,
      AWS_REGION: endpoint.region,
      AWS_ACCESS_KEY_ID: endpoint.accessKey,
      AWS_SECRET_ACCESS_KEY: endpoint.secretKey,
      COMPACTION_LEASE_REFRESH_INTERVAL_MS: '1000',
      COMPACTION_OPERATION_DEADLINE_MS: '500',
      COMPACTION_PUBLICATION_BUDGET_MS: '1000',
      COMPACTION_CLOCK_SAFETY_MARGIN_MS: '1000',
      COMPACTION_TARGET_SEGMENT_BYTES: '1024',
      COMPACTION_HEARTBEAT_TIMEOUT_MS: '2000',
      ...env,
    },
  });
}
