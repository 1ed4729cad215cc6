/** `compact start`: one compaction per group, idempotent (a second start returns the running one). */
import type { Command } from 'commander';
import { compactionResult, startCompaction } from '../client';
import { familyGroup, namespaceId } from '../keys';
import type { CompactionResult } from '../workflows/compaction';
import type { CliContext } from './context';
import { CliError, ExitCode } from './exit-codes';
import { withWorkerCheck, workerTimeoutMs, type WorkerCheck } from './options';
import { printFields, printJson } from './output';

interface StartOptions extends WorkerCheck {
  readonly namespace: string;
  readonly group: string;
  readonly wait?: boolean;
  readonly json?: boolean;
}

async function start(ctx: CliContext, options: StartOptions): Promise<void> {
  const ns = namespaceId(options.namespace);
  const group = familyGroup(options.group);
  const client = await ctx.client();
  const handle = await startCompaction(client, {
    namespaceId: ns,
    group,
    taskQueue: ctx.taskQueue(),
    store: ctx.storeIdentity(),
    workerTimeoutMs: workerTimeoutMs(options),
  });
  const started = { workflowId: handle.workflowId, runId: handle.firstExecutionRunId, namespaceId: ns, group };
  if (!options.wait) {
    if (options.json) printJson(ctx.out, started);
    else
      printFields(ctx.out, [
        ['workflow', started.workflowId],
        ['run', started.runId],
        ['wait', `compaction-lease compact start --namespace ${ns} --group ${group} --wait`],
      ]);
    return;
  }
  // A run that waits for a worker says so on stderr, every 30 s; a workflow task that keeps failing ends the wait.
  const result: CompactionResult = await compactionResult(handle, { onWait: (line) => ctx.out.error(line) });
  if (options.json) printJson(ctx.out, { ...started, result });
  else {
    printFields(ctx.out, [
      ['workflow', started.workflowId],
      ['outcome', result.outcome],
      ['job', result.jobId],
      ['inputs', result.inputCount],
      ['outputs', `${result.outputs.length} segments, ${result.recordsOut} records, ${result.bytesOut} bytes`],
      ...(result.fencedJobIds.length ? ([['fenced before', result.fencedJobIds.join(', ')]] as const) : []),
      ...(result.detail ? ([['detail', result.detail]] as const) : []),
    ]);
  }
  if (result.outcome !== 'published') {
    throw new CliError(
      ExitCode.failed,
      `compaction of ${group} in ${ns} ended ${result.outcome}${result.detail ? `: ${result.detail}` : ''}; the inputs are unchanged, start it again to retry`,
    );
  }
}

export function addCompactCommands(program: Command, ctx: CliContext): void {
  const compact = program.command('compact').description('run compactions');
  const startCommand = compact
    .command('start')
    .description(
      'start the compaction of one family group, or return the one already running (workflow id compaction:<namespace>:<group>)',
    )
    .requiredOption('--namespace <namespace>', 'namespace id')
    .requiredOption('--group <group>', 'family group')
    .option('--wait', 'wait for the outcome; exit 1 unless it is published')
    .option('--json', 'machine-readable output');
  withWorkerCheck(startCommand).action((options: StartOptions) => start(ctx, options));
}
