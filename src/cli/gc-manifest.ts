/**
 * `gc passes`, `gc show PASS`, `gc why KEY`: what the collector deleted and why, read from its manifests in the bucket
 * (no Temporal needed).
 */
import type { Command } from 'commander';
import { listGcPasses, showGcPass, whyDeleted, type LeaseFacts, type ManifestLine } from '../collector';
import type { CliContext } from './context';
import { CliError, ExitCode } from './exit-codes';
import { repeated } from './options';
import { isoTime, printJson, tableWriter } from './output';

interface ReadOptions {
  readonly namespace?: string[];
  readonly json?: boolean;
}

/**
 * What the claim saw, for a person: a lease the collector claims was `active` and past its expiry when
 * read (this pass claimed it), or `reaping` already (claimed before, by an earlier pass or attempt).
 * The stored status alone ("active") read as if a live job's prefix had been deleted.
 */
const leaseFact = ({ status, heartbeatAtMs }: LeaseFacts): string =>
  status === 'active'
    ? `lease expired (heartbeat ${isoTime(heartbeatAtMs)}), claimed by this pass`
    : `lease claimed before (reaping, heartbeat ${isoTime(heartbeatAtMs)})`;

const readFact = ({ read }: ManifestLine): string =>
  [
    read.lease && leaseFact(read.lease),
    read.rootGeneration !== undefined && `root generation ${read.rootGeneration}`,
    read.retiredAtMs !== undefined && `retired ${isoTime(read.retiredAtMs)}`,
    read.visibleAtMs !== undefined && `visible ${isoTime(read.visibleAtMs)}`,
  ]
    .filter(Boolean)
    .join('; ') || '-';

async function passes(ctx: CliContext, options: ReadOptions & { limit: string }): Promise<void> {
  const limit = Number(options.limit);
  if (!Number.isInteger(limit) || limit < 1)
    throw new CliError(ExitCode.usage, `--limit must be a whole number ≥ 1, not ${options.limit}`);
  const found = await listGcPasses(await ctx.store(), {
    ...(options.namespace && { namespaces: options.namespace }),
    limit,
  });
  if (options.json) return printJson(ctx.out, found);
  const table = tableWriter(ctx.out, ['pass', 'clock', 'kind', 'objects', 'bytes', 'rules']);
  table.rows(
    found.map((p) => ({
      pass: p.passId,
      clock: isoTime(p.nowMs),
      kind: p.dryRun ? 'dry run' : 'pass',
      objects: p.objects,
      bytes: p.bytes,
      rules: Object.entries(p.byRule)
        .map(([rule, n]) => `${rule} ${n}`)
        .join(', '),
    })),
  );
}

async function show(ctx: CliContext, pass: string, options: ReadOptions): Promise<void> {
  const shown = await showGcPass(await ctx.store(), pass, options.namespace ? { namespaces: options.namespace } : {});
  if (options.json) return printJson(ctx.out, shown);
  if (shown.length === 0)
    throw new CliError(
      ExitCode.notFound,
      `no manifest of pass ${pass}${options.namespace ? ` in ${options.namespace.join(', ')}` : ''}: list passes with \`compaction-lease gc passes\``,
    );
  const table = tableWriter(ctx.out, ['namespace', 'rule', 'size', 'lastModified', 'read', 'key']);
  for (const { namespaceId, lines } of shown) {
    table.rows(
      lines.map((l) => ({
        namespace: namespaceId,
        rule: l.rule,
        size: l.size,
        lastModified: l.lastModified ?? '-',
        read: readFact(l),
        key: l.key,
      })),
    );
  }
}

async function why(ctx: CliContext, key: string, options: { json?: boolean }): Promise<void> {
  const found = await whyDeleted(await ctx.store(), key);
  if (options.json) return printJson(ctx.out, found);
  if (found.length === 0)
    throw new CliError(
      ExitCode.notFound,
      `no manifest names ${key}: the collector did not delete it within the manifest retention`,
    );
  const table = tableWriter(ctx.out, ['pass', 'clock', 'kind', 'rule', 'read', 'part']);
  table.rows(
    found.map(({ passId, part, line }) => ({
      pass: passId,
      clock: isoTime(line.decidedAtMs),
      kind: line.dryRun ? 'dry run' : 'deleted',
      rule: line.rule,
      read: readFact(line),
      part,
    })),
  );
}

export function addGcManifestCommands(gc: Command, ctx: CliContext): void {
  gc.command('passes')
    .description('recent collector passes with their manifests, newest first, with what each deleted by rule')
    .option('--namespace <namespace>', 'only this namespace (repeatable); by default every namespace', repeated)
    .option('--limit <n>', 'how many passes', '10')
    .option('--json', 'machine-readable output')
    .action((options: ReadOptions & { limit: string }) => passes(ctx, options));
  gc.command('show')
    .argument('<pass>', 'a pass id (gc_…), as `gc passes` lists it')
    .description('what a pass deleted (or a dry run would delete) and why, one line per object')
    .option('--namespace <namespace>', 'only this namespace (repeatable)', repeated)
    .option('--json', 'machine-readable output')
    .action((pass: string, options: ReadOptions) => show(ctx, pass, options));
  gc.command('why')
    .argument('<key>', 'an object key under namespaces/')
    .description('the manifest lines that name a key: which pass deleted it, by which rule, having read what')
    .option('--json', 'machine-readable output')
    .action((key: string, options: { json?: boolean }) => why(ctx, key, options));
}
