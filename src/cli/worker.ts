/**
 * `worker`: a worker in this process, configured like the standalone one (src/worker/main.ts) by the
 * environment alone, until SIGINT or SIGTERM; `--role` stands for `COMPACTION_WORKER_ROLE`, `--format`
 * for `COMPACTION_FORMAT_MODULE`. It is the only command that reads segments or roots: `compact` and
 * `gc` run on workers, `lease` reads leases and key listings, so only it takes a format.
 */
import { Option, type Command } from 'commander';
import { WORKER_ROLE_ENV, WORKER_ROLES, workerRoleFromEnv, type WorkerRole } from '../config';
import { configuredFormat, FORMAT_MODULE_ENV } from '../worker/format-module';
import { connectTemporal, type CliContext } from './context';

interface WorkerCommandOptions {
  role?: WorkerRole;
  format?: string;
}

async function runWorker(ctx: CliContext, options: WorkerCommandOptions): Promise<void> {
  // Before anything starts: a wrong module is a configuration error, not a failed job later.
  const format = await configuredFormat(process.env, options.format);
  // Loaded here: the native worker runtime is the heaviest import, and no other command needs it.
  const { NativeConnection } = await import('@temporalio/worker');
  const { serveWorker } = await import('../worker/index.js');
  const { installRuntime } = await import('../worker/runtime.js');
  installRuntime();
  const role = options.role ?? workerRoleFromEnv();
  const settings = ctx.settings();
  const store = await ctx.store({ create: true });
  const target = ctx.temporal();
  const connection = await connectTemporal(target, () => NativeConnection.connect(target.connectionOptions));
  try {
    const serverLabel = `${target.address}/${target.namespace}`;
    const taskQueue = role === 'collector' ? ctx.collectorTaskQueue() : ctx.taskQueue();
    await serveWorker({
      store, settings, connection, namespace: target.namespace, role, taskQueue, serverLabel, log: (l) => ctx.out.line(l),
      compactor: format?.compactor, rootCodec: format?.rootCodec, formatLabel: format?.label,
    });
  } finally {
    await connection.close();
  }
}

export function addWorkerCommand(program: Command, ctx: CliContext): void {
  program
    .command('worker')
    .description(
      'run a worker until SIGINT or SIGTERM: every workflow, and the activities of its role, on COMPACTION_TASK_QUEUE ' +
        '(default compaction-lease), or on COMPACTION_COLLECTOR_TASK_QUEUE for role collector',
    )
    .addOption(
      new Option('--role <role>', `the activities it serves, with credentials for that role alone (default: ${WORKER_ROLE_ENV}, else all)`)
        .choices(WORKER_ROLES),
    )
    .option(
      '--format <module>',
      `an ES module (a path, or a package, resolved from the current directory) whose named exports \`compactor\` and/or \`rootCodec\` ` +
        `replace the .mseg compactor and root.json codec; every worker of a deployment needs the same (default: ${FORMAT_MODULE_ENV}; docs/plugins.md)`,
    )
    .action((options: WorkerCommandOptions) => runWorker(ctx, options));
}
