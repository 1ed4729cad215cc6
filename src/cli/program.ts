/** The `compaction-lease` command tree, and running it to an exit code. */
import { Command } from 'commander';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { addCompactCommands } from './compact';
import type { CliContext } from './context';
import { EXIT_CODES_HELP, explainFailure, type ExitCode } from './exit-codes';
import { addGcCommands } from './gc';
import { addLeaseCommands } from './lease';
import { addRootCommands } from './root';
import { addStoreCommands } from './store';
import { addTemporalCommands } from './temporal';
import { addWorkerCommand } from './worker';

const CONFIGURATION_HELP = `
Configuration comes from the environment: COMPACTION_S3_BUCKET (else the embedded store at
COMPACTION_EMBEDDED_STORE), AWS_* for S3, TEMPORAL_ADDRESS / TEMPORAL_PROFILE for Temporal,
COMPACTION_TASK_QUEUE, the COMPACTION_*_MS timings (lease expiry decides live/expired), and for
workers COMPACTION_FORMAT_MODULE (worker --format), a module exporting your compactor and root codec.`;

/** Read at run time: package.json sits two folders up from both src/cli and lib/cli, and outside tsc's rootDir. */
const PACKAGE_VERSION = (
  JSON.parse(readFileSync(join(__dirname, '..', '..', 'package.json'), 'utf8')) as { version: string }
).version;

export function buildProgram(ctx: CliContext): Command {
  // Output and exit settings first: subcommands copy them when they are created.
  const program = new Command('compaction-lease')
    .description('Operate compactions under an S3 lease and the collector that reclaims what dead jobs left behind.')
    .exitOverride()
    .configureOutput({
      writeOut: (text) =>
        text
          .trimEnd()
          .split('\n')
          .forEach((line) => ctx.out.line(line)),
      writeErr: (text) =>
        text
          .trimEnd()
          .split('\n')
          .forEach((line) => ctx.out.error(line)),
      outputError: (text, write) => write(`${text.trim()} (see --help)\n`),
    })
    .version(PACKAGE_VERSION, '-V, --version', 'the package version')
    .showSuggestionAfterError()
    .addHelpText('afterAll', `${CONFIGURATION_HELP}\n${EXIT_CODES_HELP}`);
  addCompactCommands(program, ctx);
  addLeaseCommands(program, ctx);
  addGcCommands(program, ctx);
  addRootCommands(program, ctx);
  addStoreCommands(program, ctx);
  addTemporalCommands(program, ctx);
  addWorkerCommand(program, ctx);
  return program;
}

/**
 * Parses and runs `argv` (without the node and script paths); resolves to the exit code, having printed any error as
 * one line.
 */
export async function runCli(argv: readonly string[], ctx: CliContext): Promise<ExitCode> {
  try {
    await buildProgram(ctx).parseAsync([...argv], { from: 'user' });
    return 0;
  } catch (err) {
    const { exitCode, line } = explainFailure(err);
    if (line) ctx.out.error(line);
    return exitCode;
  } finally {
    await ctx.close();
  }
}
