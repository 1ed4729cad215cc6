import { join, resolve } from 'node:path';
import { freePort, startOnFreePorts } from './ports';
import { httpOk, startServer } from './process';
import type { S3Server } from './s3';

export interface MotoOptions {
  /** Default: env MOTO_PYTHON (set by scripts/provision.sh), else `python3` on PATH. */
  pythonPath?: string;
  /** 0/undefined: a free port. */
  port?: number;
  logFile?: string;
  readyTimeoutMs?: number;
}

// src/devservers and lib/devservers are both two levels below the package root.
const MOTO_SCRIPT = join(resolve(__dirname, '..', '..'), 'scripts', 'moto_server.py');

/** moto accepts any credentials; state lives in memory and dies with the process. */
export function startMoto(opts: MotoOptions = {}): Promise<S3Server> {
  return startOnFreePorts(opts.port, () => startMotoOnce(opts));
}

async function startMotoOnce(opts: MotoOptions): Promise<S3Server> {
  const port = opts.port || (await freePort());
  const endpoint = `http://127.0.0.1:${port}`;
  const server = await startServer({
    name: 'moto',
    command: opts.pythonPath ?? process.env.MOTO_PYTHON ?? 'python3',
    args: [MOTO_SCRIPT, '--host', '127.0.0.1', '--port', String(port)],
    ...(opts.logFile !== undefined && { logFile: opts.logFile }),
    // GET / is S3 ListBuckets: it answers only once moto has loaded its (lazily imported) S3 backend.
    probe: () => httpOk(`${endpoint}/`),
    readyTimeoutMs: opts.readyTimeoutMs ?? 60_000,
  });
  return { endpoint, accessKey: 'test', secretKey: 'test', region: 'us-east-1', stop: () => server.stop() };
}
