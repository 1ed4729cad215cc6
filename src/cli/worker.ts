/**
 * `worker`: a worker in this process, assembled like every other (src/worker/from-env.ts) from the
 * CLI's context, until SIGINT or SIGTERM; `--role` stands for `COMPACTION_WORKER_ROLE`, `--format`
 * for `COMPACTION_FORMAT_MODULE`. It is the only command that reads segments or roots: `compact` and
 * `gc` run on workers, `lease` reads leases and key listings, so only it takes a format.
 */
import { Option, type Command } from 'commander';
import { WORKER_ROLE_ENV, WORKER_ROLES, type WorkerRole } from '../config';
import { FORMAT_MODULE_ENV } from '../worker/format-module';
import { connectTemporal, type CliContext } from './context';

interface WorkerCommandOptions {
  role?: WorkerRole;
  format?: string;
}

async function runWorker(ctx: CliContext, options: WorkerCommandOptions): Promise<void> {
  // Before anything starts: a wrong module is a configuration error, not a failed job later.
  const setup = await ctx.workerSetup({ role: options.role, formatModule: options.format });
  // Loaded here: the native worker runtime is the heaviest import, and no other command needs it.
  const { NativeConnection } = await import('@temporalio/worker');
  const { serveUntilStopped, startWorker } = await import('../worker/from-env.js');
  const started = await startWorker(setup, {
    log: (line) => ctx.out.line(line),
    connect: (target) => connectTemporal(target, () => NativeConnection.connect(target.connectionOptions)),
  });
  await serveUntilStopped(started);
}

export function addWorkerCommand(program: Command, ctx: CliContext): void {
  program
    .command('worker')
    .description(
      'run a worker until SIGINT or SIGTERM: every workflow, and the activities of its role, on COMPACTION_TASK_QUEUE ' +
        '(default compaction-lease), or on COMPACTION_COLLECTOR_TASK_QUEUE for role collector',
    )
    .addOption(
      new Option(
        '--role <role>',
        `the activities it serves, with credentials for that role alone (default: ${WORKER_ROLE_ENV}, else all)`,
      ).choices(WORKER_ROLES),
    )
    .option(
      '--format <module>',
      `an ES module (a path, or a package, resolved from the current directory) whose named exports \`compactor\` and/or \`rootCodec\` ` +
        `replace the .mseg compactor and root.json codec; every worker of a deployment needs the same (default: ${FORMAT_MODULE_ENV}; docs/plugins.md)`,
    )
    .action((options: WorkerCommandOptions) => runWorker(ctx, options));
}
