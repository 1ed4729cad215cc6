/**
 * `store check`: the store probe (`verifyStore`) against the configured bucket, as every worker runs
 * it at start: one row per property, held or failed, the bucket's versioning, and whether it honours
 * a conditional delete. It writes a few objects under `store-probe/` and deletes them, so it needs a
 * worker's credentials, not a reader's.
 */
import type { Command } from 'commander';
import { requireFitStore, verifyStore, type StoreCheck } from '../store';
import type { CliContext } from './context';
import { printFields, printJson, tableWriter } from './output';

const VERSIONING_NOTE = {
  enabled:
    'enabled: every deletion leaves a noncurrent version that is billed until a lifecycle rule expires it (docs/operations.md)',
  suspended: 'suspended: objects written while it was enabled leave noncurrent versions (docs/operations.md)',
  unversioned: 'off: deletions free the storage',
  unknown: 'unknown: the store would not say (no s3:GetBucketVersioning grant?)',
} as const;

const CONDITIONAL_DELETE_NOTE = {
  honoured: 'honoured: a lease is deleted only in the version its collector holds',
  ignored:
    "ignored: a lease's deletion is checked by a read, not fenced; a deletion delayed past its claim's expiry can remove a lease written since (docs/stores.md)",
} as const;

function printCheck(ctx: CliContext, check: StoreCheck): void {
  printFields(ctx.out, [
    ['store', check.store],
    ['versioning', VERSIONING_NOTE[check.versioning]],
    ['conditional delete', CONDITIONAL_DELETE_NOTE[check.conditionalDelete]],
    ['verdict', `${check.fit ? 'fit' : 'UNFIT'} (${check.durationMs} ms)`],
  ]);
  ctx.out.line('');
  tableWriter(ctx.out, ['property', 'result', 'detail']).rows(
    check.properties.map((p) => ({ property: p.property, result: p.outcome, detail: p.detail })),
  );
}

async function check(ctx: CliContext, options: { json?: boolean }): Promise<void> {
  const store = await ctx.store();
  const result = await verifyStore(store, { clockSafetyMarginMs: ctx.settings().timing.clockSafetyMarginMs });
  if (options.json) printJson(ctx.out, result);
  else printCheck(ctx, result);
  requireFitStore(result);
}

export function addStoreCommands(program: Command, ctx: CliContext): void {
  const store = program
    .command('store')
    .description('the configured object store (COMPACTION_S3_BUCKET, else the embedded store)');
  store
    .command('check')
    .description(
      'probe the store for the properties the protocol rests on (conditional writes, fresh ETags, read-after-write, clock skew, ' +
        'idempotent deletes), as every worker does at start; writes and deletes a few objects under store-probe/; exit 5 if one failed',
    )
    .option('--json', 'machine-readable output')
    .action((options: { json?: boolean }) => check(ctx, options));
}
