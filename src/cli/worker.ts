/**
 * `worker`: a worker in this process, configured like the standalone one (src/worker/main.ts) by the
 * environment alone, until SIGINT or SIGTERM.
 */
import type { Command } from 'commander';
import { TASK_QUEUE_ENV } from '../worker/task-queue';
import { connectTemporal, type CliContext } from './context';

async function runWorker(ctx: CliContext): Promise<void> {
  // Loaded here: the native worker runtime is the heaviest import, and no other command needs it.
  const { NativeConnection } = await import('@temporalio/worker');
  const { serveWorker } = await import('../worker/index.js');
  const { installRuntime } = await import('../worker/runtime.js');
  installRuntime();
  const settings = ctx.settings();
  const store = await ctx.store({ create: true });
  const target = ctx.temporal();
  const connection = await connectTemporal(target, () => NativeConnection.connect(target.connectionOptions));
  try {
    const serverLabel = `${target.address}/${target.namespace}`;
    await serveWorker({ store, settings, connection, namespace: target.namespace, taskQueue: ctx.taskQueue(), serverLabel, log: (l) => ctx.out.line(l) });
  } finally {
    await connection.close();
  }
}

export function addWorkerCommand(program: Command, ctx: CliContext): void {
  program
    .command('worker')
    .description(`run a worker for every workflow and activity on ${TASK_QUEUE_ENV} (default compaction-lease) until SIGINT or SIGTERM`)
    .action(() => runWorker(ctx));
}
