/**
 * SeaweedFS (`weed server` with its S3 gateway) for scripts/check-stores.sh: a store no one here
 * wrote, checked by the store probe and the conformance suite. Not part of the test servers: its
 * binary is built only by `scripts/provision.sh seaweedfs`.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, startOnFreePorts } from './ports';
import { httpOk, startServer } from './process';
import { provisionCache } from './provisioned';
import type { S3Server } from './s3';

export interface SeaweedfsOptions {
  /** Default: env SEAWEEDFS_BIN, else the binary `scripts/provision.sh seaweedfs` builds. */
  binPath?: string;
  logFile?: string;
  readyTimeoutMs?: number;
}

export function startSeaweedfs(opts: SeaweedfsOptions = {}): Promise<S3Server> {
  return startOnFreePorts(undefined, () => startSeaweedfsOnce(opts));
}

async function startSeaweedfsOnce(opts: SeaweedfsOptions): Promise<S3Server> {
  const binPath = opts.binPath ?? process.env.SEAWEEDFS_BIN ?? join(provisionCache(), 'seaweedfs-bin', 'weed');
  if (!existsSync(binPath))
    throw new Error(
      `SeaweedFS binary ${binPath} does not exist; run \`eval "$(scripts/provision.sh seaweedfs)"\` first`,
    );
  const accessKey = 'compaction-lease';
  const secretKey = 'compaction-lease-secret';
  // Every component's HTTP and gRPC port named: the defaults (HTTP + 10000 for gRPC) clash or overflow on random ports.
  const [master, masterGrpc, volume, volumeGrpc, filer, filerGrpc, s3, s3Grpc] = await Promise.all(
    Array.from({ length: 8 }, () => freePort()),
  );
  const dataDir = mkdtempSync(join(tmpdir(), 'compaction-lease-seaweedfs-'));
  const endpoint = `http://127.0.0.1:${s3}`;
  const removeDataDir = () => rmSync(dataDir, { recursive: true, force: true });
  const server = await startServer({
    name: 'seaweedfs',
    command: binPath,
    args: [
      'server',
      `-dir=${dataDir}`,
      '-ip=127.0.0.1',
      '-ip.bind=127.0.0.1',
      // No anonymous statistics to the project's telemetry server: the machine reaches no such host.
      '-master.telemetry=false',
      `-master.port=${master}`,
      `-master.port.grpc=${masterGrpc}`,
      '-master.volumeSizeLimitMB=64',
      // Every bucket is a collection of its own volumes: the default cap of 8 volumes is spent by the second bucket
      // ("No writable volumes and no free volumes left", a 500 on every PUT); 0 sizes the cap by the free disk.
      `-volume.port=${volume}`,
      `-volume.port.grpc=${volumeGrpc}`,
      '-volume.max=0',
      '-filer',
      `-filer.port=${filer}`,
      `-filer.port.grpc=${filerGrpc}`,
      '-s3',
      `-s3.port=${s3}`,
      `-s3.port.grpc=${s3Grpc}`,
      '-s3.port.iceberg=0',
      '-s3.port.lance=0',
    ],
    // The S3 gateway makes these an admin identity.
    env: { AWS_ACCESS_KEY_ID: accessKey, AWS_SECRET_ACCESS_KEY: secretKey },
    ...(opts.logFile !== undefined && { logFile: opts.logFile }),
    // Ready when the gateway answers and the master can place a write on a volume.
    probe: async () => (await httpOk(`${endpoint}/healthz`)) && httpOk(`http://127.0.0.1:${master}/dir/assign`),
    readyTimeoutMs: opts.readyTimeoutMs ?? 120_000,
  }).catch((err: unknown) => {
    removeDataDir();
    throw err;
  });
  const stop = async () => {
    await server.stop();
    removeDataDir();
  };
  return { endpoint, accessKey, secretKey, region: 'us-east-1', stop };
}
