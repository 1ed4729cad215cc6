/**
 * A standalone worker process, configured only by the environment (see ./from-env.ts). Runs until
 * SIGINT or SIGTERM.
 */
import { serveUntilStopped, startWorkerFromEnv, type StartWorkerFromEnvOptions } from './from-env';

/**
 * Serves a worker configured by the environment alone until SIGINT or SIGTERM. `extra` is for the
 * benchmark's worker process (a test compactor, other worker options); operators pass nothing.
 */
export async function serveWorkerFromEnv(
  extra: Pick<StartWorkerFromEnvOptions, 'compactor' | 'workerOptions' | 'log'> = {},
): Promise<void> {
  await serveUntilStopped(await startWorkerFromEnv(extra));
}

if (require.main === module) {
  serveWorkerFromEnv().catch((err: unknown) => {
    console.error(err instanceof Error ? `${err.name}: ${err.message}` : err);
    process.exit(1);
  });
}
