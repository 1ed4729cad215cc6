import { existsSync, mkdirSync } from 'node:fs';
import { delimiter, dirname, join } from 'node:path';
import { Connection } from '@temporalio/client';
import { freePort, startOnFreePorts } from './ports';
import { startServer } from './process';
import { PROVISION_HINT, provisionCache } from './provisioned';
import { registerSearchAttributes, type SearchAttributeType } from '../client/search-attributes';

/**
 * How {@link startTemporalDevServer} runs `temporal server start-dev`: ports, persistence, the namespace it creates.
 */
export interface TemporalDevServerOptions {
  /** Default: env TEMPORAL_CLI, else what scripts/provision.sh installs, else `temporal` on PATH. */
  cliPath?: string;
  /** gRPC frontend port; 0/undefined: a free port. */
  port?: number;
  /** Web UI port; 0/undefined: a free port; 'none': headless. */
  uiPort?: number | 'none';
  /** SQLite file to persist state in; default: in memory, gone when the server stops. */
  dbFilename?: string;
  searchAttributes?: Record<string, SearchAttributeType>;
  /** Created at launch in addition to `default`; readiness waits for it. */
  namespace?: string;
  logFile?: string;
  readyTimeoutMs?: number;
  /**
   * Whether the server cancels a worker's polls when it sends `ShutdownWorker`
   * (`frontend.enableCancelWorkerPollsOnShutdown`, off in a server's own defaults): then it stops
   * listing a stopped worker's pollers at once. Default true.
   */
  cancelPollsOnShutdown?: boolean;
}

/** A running Temporal dev server: where to connect, and how to stop it. */
export interface TemporalDevServer {
  /** host:port of the gRPC frontend. */
  address: string;
  uiUrl?: string;
  stop(): Promise<void>;
}

/**
 * The Temporal CLI this package runs: env TEMPORAL_CLI, else what scripts/provision.sh installs, else `temporal` on
 * PATH.
 */
export function temporalCliPath(): string {
  const fromEnv = process.env.TEMPORAL_CLI;
  if (fromEnv !== undefined) {
    if (!existsSync(fromEnv)) throw new Error(`TEMPORAL_CLI=${fromEnv} does not exist; ${PROVISION_HINT}`);
    return fromEnv;
  }
  const cache = provisionCache();
  const provisioned = [join(cache, 'temporal-venv', 'bin', 'temporal'), join(cache, 'temporal-go', 'temporal')];
  const onPath = (process.env.PATH ?? '')
    .split(delimiter)
    .filter(Boolean)
    .map((dir) => join(dir, 'temporal'));
  const found = [...provisioned, ...onPath].find((p) => existsSync(p));
  if (found === undefined) {
    throw new Error(
      `Temporal CLI not found (looked at $TEMPORAL_CLI, ${provisioned.join(', ')} and PATH); ${PROVISION_HINT}`,
    );
  }
  return found;
}

/**
 * Ready means: the frontend answers, the namespace exists, and every custom search attribute is
 * registered. A server on an existing `--db-filename` ignores `--search-attribute` for attributes
 * added since, so missing ones are added here through the operator API.
 */
async function probe(
  address: string,
  namespace: string,
  searchAttributes: Record<string, SearchAttributeType>,
): Promise<boolean> {
  const connection = await Connection.connect({ address, connectTimeout: '1s' });
  try {
    return await connection.withDeadline(Date.now() + 2_000, async () => {
      await connection.workflowService.getSystemInfo({});
      return (await registerSearchAttributes(connection, namespace, searchAttributes)).length === 0;
    });
  } finally {
    await connection.close();
  }
}

/**
 * A Temporal dev server (`temporal server start-dev`) on free ports, ready once its namespace and the search attributes
 * asked for exist; `stop()` ends it.
 */
export function startTemporalDevServer(opts: TemporalDevServerOptions = {}): Promise<TemporalDevServer> {
  return startOnFreePorts(opts.port, () => startTemporalDevServerOnce(opts));
}

async function startTemporalDevServerOnce(opts: TemporalDevServerOptions): Promise<TemporalDevServer> {
  const cliPath = opts.cliPath ?? temporalCliPath();
  const port = opts.port || (await freePort());
  const uiPort = opts.uiPort === 'none' ? undefined : opts.uiPort || (await freePort());
  // The CLI picks these itself by default, from ports it has just released, so it can pick the
  // gRPC port chosen here before the server has bound it ("bind: address already in use").
  const [httpPort, metricsPort] = [await freePort(), await freePort()];
  const namespace = opts.namespace ?? 'default';
  const searchAttributes = opts.searchAttributes ?? {};
  const address = `127.0.0.1:${port}`;

  const args = ['server', 'start-dev', '--ip', '127.0.0.1', '--port', String(port)];
  args.push('--http-port', String(httpPort), '--metrics-port', String(metricsPort));
  args.push(...(uiPort === undefined ? ['--headless'] : ['--ui-port', String(uiPort)]));
  if (opts.dbFilename !== undefined) {
    // The server creates the file, not its directory (the demo's ./data does not exist in a fresh clone).
    mkdirSync(dirname(opts.dbFilename), { recursive: true });
    args.push('--db-filename', opts.dbFilename);
  }
  if (namespace !== 'default') args.push('--namespace', namespace);
  for (const [name, type] of Object.entries(searchAttributes)) args.push('--search-attribute', `${name}=${type}`);
  // The version check phones home, which CI's network does not allow. A worker that stops sends
  // ShutdownWorker; with polls cancelled on it, the server stops listing the worker's pollers at once
  // instead of for about a minute, so a start on a queue whose worker just stopped is refused.
  args.push('--dynamic-config-value', 'frontend.enableServerVersionCheck=false');
  args.push(
    '--dynamic-config-value',
    `frontend.enableCancelWorkerPollsOnShutdown=${opts.cancelPollsOnShutdown !== false}`,
  );
  args.push('--log-level', 'warn');

  const server = await startServer({
    name: 'temporal',
    command: cliPath,
    args,
    ...(opts.logFile !== undefined && { logFile: opts.logFile }),
    probe: () => probe(address, namespace, searchAttributes),
    readyTimeoutMs: opts.readyTimeoutMs ?? 60_000,
  });
  return { address, ...(uiPort !== undefined && { uiUrl: `http://127.0.0.1:${uiPort}` }), stop: () => server.stop() };
}
