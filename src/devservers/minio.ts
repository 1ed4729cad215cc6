import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, startOnFreePorts } from './ports';
import { httpOk, startServer } from './process';
import { PROVISION_HINT, provisionCache } from './provisioned';
import type { S3Server } from './s3';

/** How {@link startMinio} runs MinIO: its binary, port, data folder and root credentials. */
export interface MinioOptions {
  /** Default: env MINIO_BIN, else the binary scripts/provision.sh builds. */
  binPath?: string;
  /** 0/undefined: a free port. */
  port?: number;
  /** Default: a fresh temporary directory, removed on stop. */
  dataDir?: string;
  accessKey?: string;
  /** MinIO rejects root passwords shorter than 8 characters. */
  secretKey?: string;
  logFile?: string;
  readyTimeoutMs?: number;
}

/**
 * A MinIO server on a free port (unless `port` is given), ready to serve S3 requests; `stop()` ends it and removes its
 * data.
 */
export function startMinio(opts: MinioOptions = {}): Promise<S3Server> {
  return startOnFreePorts(opts.port, () => startMinioOnce(opts));
}

async function startMinioOnce(opts: MinioOptions): Promise<S3Server> {
  const binPath = opts.binPath ?? process.env.MINIO_BIN ?? join(provisionCache(), 'minio-bin', 'minio');
  if (!existsSync(binPath)) throw new Error(`MinIO binary ${binPath} does not exist; ${PROVISION_HINT}`);
  const accessKey = opts.accessKey ?? 'compaction-lease';
  const secretKey = opts.secretKey ?? 'compaction-lease-secret';
  const port = opts.port || (await freePort());
  const consolePort = await freePort();
  const ownDataDir = opts.dataDir === undefined;
  const dataDir = opts.dataDir ?? mkdtempSync(join(tmpdir(), 'compaction-lease-minio-'));
  const endpoint = `http://127.0.0.1:${port}`;
  const removeOwnDataDir = (): void => {
    if (ownDataDir) rmSync(dataDir, { recursive: true, force: true });
  };

  const server = await startServer({
    name: 'minio',
    command: binPath,
    args: [
      'server',
      dataDir,
      '--address',
      `127.0.0.1:${port}`,
      '--console-address',
      `127.0.0.1:${consolePort}`,
      '--quiet',
    ],
    env: { MINIO_ROOT_USER: accessKey, MINIO_ROOT_PASSWORD: secretKey },
    ...(opts.logFile !== undefined && { logFile: opts.logFile }),
    probe: () => httpOk(`${endpoint}/minio/health/ready`),
    readyTimeoutMs: opts.readyTimeoutMs ?? 60_000,
  }).catch((err: unknown) => {
    removeOwnDataDir();
    throw err;
  });
  return {
    endpoint,
    accessKey,
    secretKey,
    region: 'us-east-1',
    stop: async () => {
      await server.stop();
      removeOwnDataDir();
    },
  };
}
