/** The CLI as an operator runs it: a child process (src/cli/index.ts under tsx) configured only by its environment. */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { join } from 'node:path';

const cliMain = join(__dirname, '..', '..', 'src', 'cli', 'index.ts');

export interface CliRun {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
  /** From the spawn to the exit. */
  readonly ms: number;
}

/** Starts `compaction-lease <args>` with exactly this environment. */
export const spawnCli = (args: readonly string[], env: NodeJS.ProcessEnv): ChildProcessWithoutNullStreams =>
  spawn(process.execPath, ['--import', 'tsx', cliMain, ...args], { env: { ...env, NODE_NO_WARNINGS: '1' } });

/** What a started CLI process printed and how it exited; `onStderr` sees its error output as it comes. */
export function finished(
  child: ChildProcessWithoutNullStreams,
  onStderr: (text: string) => void = () => {},
): Promise<CliRun> {
  const started = Date.now();
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
    onStderr(stderr);
  });
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, stdout, stderr, ms: Date.now() - started }));
  });
}

/** Runs `compaction-lease <args>` to its exit. */
export const runCliProcess = (args: readonly string[], env: NodeJS.ProcessEnv): Promise<CliRun> =>
  finished(spawnCli(args, env));
