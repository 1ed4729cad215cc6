/** `gc run`: one collector pass now, outside the schedule; `gc schedule …` lives in gc-schedule.ts. */
import type { Command } from 'commander';
import { gcPassResult, startGcPass } from '../client';
import { namespaceId } from '../keys';
import type { GcReport } from '../workflows/gc';
import type { CliContext } from './context';
import { CliError, ExitCode } from './exit-codes';
import { addGcManifestCommands } from './gc-manifest';
import { addGcScheduleCommands } from './gc-schedule';
import { repeated, withWorkerCheck, workerTimeoutMs, type WorkerCheck } from './options';
import { isoTime, printFields, printJson } from './output';

interface RunOptions extends WorkerCheck {
  readonly dryRun?: boolean;
  readonly namespace?: string[];
  readonly wait?: boolean;
  readonly json?: boolean;
}

function printReport(ctx: CliContext, report: GcReport): void {
  const t = report.totals;
  printFields(ctx.out, [
    ['clock', `${isoTime(report.nowMs)}${report.dryRun ? ' (dry run: nothing claimed or deleted)' : ''}`],
    ['namespaces', `${t.namespaces} (${t.failedNamespaces} failed)`],
    [
      'prefixes',
      `${t.prefixesSeen}: live ${t.live}, claimed ${t.claimed}, orphaned ${t.orphaned}, corrupt ${t.corrupt}, failed ${t.failedPrefixes}`,
    ],
    [
      report.dryRun ? 'would delete' : 'deleted',
      `${t.objectsDeleted} objects, ${t.bytesDeleted} bytes, ${t.leasesDeleted} leases`,
    ],
    [
      'retained',
      `referenced ${t.retainedReferenced}, young ${t.retainedYoung}, unrecognised ${t.retainedUnrecognised}`,
    ],
    [
      'retired',
      `segments: ${report.dryRun ? 'would delete' : 'deleted'} ${t.retiredDeleted} retired and ${t.lostWritesDeleted} lost writes, ` +
        `${t.retiredRecordsDropped} records dropped, ${t.retainedInGrace} in reader grace`,
    ],
    // The reason already names the key (`lease <key> is corrupt: …`).
    ...report.corruptLeases.map(
      (c) => ['corrupt lease', c.reason.includes(c.key) ? c.reason : `${c.key}: ${c.reason}`] as const,
    ),
    ...report.failures.map((f) => ['failure', `${f.key}: ${f.message}`] as const),
    ...report.rootProblems.map(
      (r) => ['skipped namespace', `${r.namespaceId}: root ${r.problem}: ${r.reason}`] as const,
    ),
    ...report.manifests.map((m) => ['manifest', m] as const),
  ]);
}

async function run(ctx: CliContext, options: RunOptions): Promise<void> {
  const namespaces = options.namespace?.map((ns) => namespaceId(ns));
  const client = await ctx.client();
  const dryRun = options.dryRun === true;
  const collectorTaskQueue = ctx.collectorTaskQueue();
  const handle = await startGcPass(client, {
    workflowId: `compaction-gc-run-${new Date(ctx.nowMs()).toISOString()}`,
    taskQueue: ctx.taskQueue(),
    collectorTaskQueue,
    store: ctx.storeIdentity(),
    dryRun,
    workerTimeoutMs: workerTimeoutMs(options),
    ...(namespaces ? { namespaces } : {}),
    summary: `Collector pass from the CLI${dryRun ? ' (dry run)' : ''}${namespaces ? ` over ${namespaces.join(', ')}` : ''}`,
  });
  const started = { workflowId: handle.workflowId, runId: handle.firstExecutionRunId };
  if (!options.wait) {
    if (options.json) printJson(ctx.out, started);
    else
      printFields(ctx.out, [
        ['workflow', started.workflowId],
        ['run', started.runId],
      ]);
    return;
  }
  const { complete, report } = await gcPassResult(handle, {
    collectorTaskQueue,
    onWait: (line) => ctx.out.error(line),
  });
  if (options.json) printJson(ctx.out, { ...started, complete, report });
  else printReport(ctx, report);
  if (!complete) {
    const t = report.totals;
    throw new CliError(
      ExitCode.failed,
      `collector pass ${started.workflowId} incomplete (${t.corrupt} corrupt leases, ${t.failedPrefixes} failed prefixes, ${t.failedNamespaces} failed namespaces, ` +
        `${t.skippedNamespaces} namespaces skipped for their root): see docs/operations.md, then run it again`,
    );
  }
}

export function addGcCommands(program: Command, ctx: CliContext): void {
  const gc = program.command('gc').description('the collector: claim expired leases and reclaim what no job owns');
  const runCommand = gc
    .command('run')
    .description('start one collector pass now (workflow gcWorkflow), beside any schedule')
    .option('--dry-run', 'report what a pass would claim and delete, changing nothing')
    .option('--namespace <namespace>', 'collect only this namespace (repeatable); by default every namespace', repeated)
    .option('--wait', 'wait for the pass and print its report; exit 1 if it is incomplete')
    .option('--json', 'machine-readable output');
  withWorkerCheck(runCommand).action((options: RunOptions) => run(ctx, options));
  addGcScheduleCommands(gc, ctx);
  addGcManifestCommands(gc, ctx);
}
