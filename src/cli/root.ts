/**
 * `root restore`: putting back the last root a collector pass judged a namespace by, after the root was lost or went
 * back.
 */
import type { Command } from 'commander';
import { namespaceId } from '../keys';
import { restoreJudgedRoot } from '../collector';
import { jsonRootCodec, MAX_COLLECTED_ROOT_BYTES } from '../root';
import { loadFormatModule } from '../worker/format-module';
import type { CliContext } from './context';
import { printFields, printJson } from './output';

async function restore(
  ctx: CliContext,
  nsArg: string,
  options: { apply?: boolean; json?: boolean; format?: string },
): Promise<void> {
  const ns = namespaceId(nsArg);
  // The root is rewritten (its generation raised), so through the service's root codec: its format module's, else
  // root.json.
  const codec =
    options.format === undefined
      ? await ctx.rootCodec()
      : ((await loadFormatModule(options.format)).rootCodec ?? jsonRootCodec);
  const plan = await restoreJudgedRoot(await ctx.store(), ns, codec, {
    apply: options.apply === true,
    maxBytes: MAX_COLLECTED_ROOT_BYTES,
  });
  if (options.json) return printJson(ctx.out, plan);
  const unnamed = plan.unnamedCount
    ? ` (registered after the copy, or lost writes: register those that hold data again within the lost-write grace): ${plan.unnamedSegments.join(', ')}${plan.unnamedCount > plan.unnamedSegments.length ? ', …' : ''}`
    : '';
  printFields(ctx.out, [
    ['namespace', ns],
    ['root now', plan.currentGeneration === undefined ? 'missing' : `generation ${plan.currentGeneration}`],
    ['judged copy', `generation ${plan.judgedGeneration}`],
    [plan.applied ? 'restored' : 'would restore', `the judged copy, at generation ${plan.restoredGeneration}`],
    ['unnamed segments', `${plan.unnamedCount}${unnamed}`],
  ]);
  if (!plan.applied) ctx.out.line('dry run: nothing written; run again with --apply to restore');
}

export function addRootCommands(program: Command, ctx: CliContext): void {
  const root = program.command('root').description("the namespace root: restoring it from the collector's judged copy");
  root
    .command('restore')
    .argument('<namespace>', 'the namespace whose root was lost or went back')
    .description('put back the last root a collector pass judged the namespace by (a dry run unless --apply)')
    .option('--apply', 'write it; without, only say what would be written')
    .option(
      '--format <module>',
      'the format module whose root codec the service uses (default: COMPACTION_FORMAT_MODULE, else root.json)',
    )
    .option('--json', 'machine-readable output')
    .action((ns: string, options: { apply?: boolean; json?: boolean; format?: string }) => restore(ctx, ns, options));
}
