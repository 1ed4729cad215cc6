/**
 * `temporal check` and `temporal setup`: the Temporal namespace's side of a deployment. A namespace
 * without the search attributes the workflows set fails their workflow tasks and leaves the runs
 * waiting, so every command that starts work checks them first; these two say what is there and
 * register what is not.
 */
import type { Command } from 'commander';
import {
  checkSearchAttributes,
  cloudSearchAttributeCommand,
  registerSearchAttributes,
  SEARCH_ATTRIBUTES,
  searchAttributeCommands,
  SearchAttributesMissingError,
  type SearchAttributeCheck,
} from '../client/search-attributes';
import type { CliContext } from './context';
import { CliError, ExitCode } from './exit-codes';
import { printJson, tableWriter } from './output';

function printCheck(ctx: CliContext, check: SearchAttributeCheck): void {
  ctx.out.line(`Temporal namespace ${check.namespace}, asked through its ${check.source}:`);
  const mismatch = new Map(check.mismatches.map((m) => [m.name, m]));
  tableWriter(ctx.out, ['attribute', 'type', 'registered']).rows(
    Object.entries(SEARCH_ATTRIBUTES).map(([name, type]) => {
      const m = mismatch.get(name);
      return {
        attribute: name,
        type,
        registered: m === undefined ? 'yes' : m.registered === undefined ? 'MISSING' : `as ${m.registered}`,
      };
    }),
  );
}

async function check(ctx: CliContext, options: { json?: boolean }): Promise<void> {
  const client = await ctx.client();
  const result = await checkSearchAttributes(client.connection, client.options.namespace);
  if (options.json) printJson(ctx.out, result);
  else printCheck(ctx, result);
  if (result.mismatches.length) throw new SearchAttributesMissingError(result.namespace, result.mismatches);
}

async function setup(ctx: CliContext, options: { print?: boolean }): Promise<void> {
  if (options.print) {
    const { namespace } = ctx.temporal();
    for (const command of searchAttributeCommands(namespace)) ctx.out.line(command);
    ctx.out.line(`# Temporal Cloud: ${cloudSearchAttributeCommand(namespace)}`);
    return;
  }
  const client = await ctx.client();
  const { namespace } = client.options;
  const before = await checkSearchAttributes(client.connection, namespace);
  if (before.source !== 'operator API' && before.mismatches.length) {
    const missing = Object.fromEntries(before.mismatches.map((m) => [m.name, m.expected]));
    throw new CliError(
      ExitCode.config,
      `the Temporal server refuses its operator API (Temporal Cloud does): register the search attributes with \`${cloudSearchAttributeCommand(namespace, missing)}\`, then run \`compaction-lease temporal check\``,
    );
  }
  const added = before.mismatches.length ? await registerSearchAttributes(client.connection, namespace) : [];
  ctx.out.line(
    added.length
      ? `registered in Temporal namespace ${namespace}: ${added.map((name) => `${name} (${SEARCH_ATTRIBUTES[name]})`).join(', ')}`
      : `Temporal namespace ${namespace} had every search attribute already`,
  );
  const after = added.length ? await checkSearchAttributes(client.connection, namespace) : before;
  if (after.mismatches.length) throw new SearchAttributesMissingError(namespace, after.mismatches);
}

export function addTemporalCommands(program: Command, ctx: CliContext): void {
  const temporal = program
    .command('temporal')
    .description("the Temporal namespace's set-up: the search attributes every workflow of the package sets");
  temporal
    .command('check')
    .description(
      'list the search attributes the workflows set and whether the namespace (TEMPORAL_NAMESPACE, default "default") has each; exit 4 if one is missing or of another type',
    )
    .option('--json', 'machine-readable output')
    .action((options: { json?: boolean }) => check(ctx, options));
  temporal
    .command('setup')
    .description(
      'register the missing search attributes in the namespace through the operator API (self-hosted or dev server; Temporal Cloud: tcld), then check them',
    )
    .option(
      '--print',
      'only print the commands that register them by hand (temporal CLI, and tcld for Temporal Cloud), connecting to nothing',
    )
    .action((options: { print?: boolean }) => setup(ctx, options));
}
