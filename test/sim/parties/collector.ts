/**
 * A collector pass over the namespace as `gcNamespaceWorkflow` runs it: the pass plan
 * (`runNamespacePass`), each command executed on the store by `executeOnStore` and retried as its
 * activity is (a page's `collectPrefixes` resumed from where it stood, then command by command once
 * its retries are spent; a walk, the fence and the reclaim of retired segments failing into the
 * plan's own results). The pass's clock is its party's, read once at its start.
 */
import { TypedError } from '../../../src/errors';
import { newPassId } from '../../../src/keys';
import {
  executeOnStore,
  runNamespacePass,
  startNamespacePass,
  type CollectorCommand,
  type CollectorExecutor,
  type CollectorResult,
  type GcReport,
  type PassRules,
} from '../../../src/collector';
import { harnessExecutor } from '../../support/harness-executor';
import { jsonRootCodec } from '../../../src/root';
import type { Env } from '../env';
import type { PassContext } from '../invariants';
import { PartyGaveUp, type Party } from '../sim';
import { runActivity } from './activity';

export interface PassPlan {
  readonly afterMs: number;
  readonly prefixesPerPage: number;
  readonly prefixConcurrency: number;
  readonly keysPerFlush: number;
}

/** Attempts of each collector activity (`GC_ATTEMPTS` of the workflow). */
const GC_ATTEMPTS = 10;

/** A failure the workflow turns into the plan's own result: an activity that failed (typed) or ran out of attempts. */
const activityFailed = (err: unknown): err is Error => err instanceof TypedError || err instanceof PartyGaveUp;

export async function runPass(env: Env, party: Party, plan: PassPlan): Promise<GcReport> {
  await party.sleep(plan.afterMs);
  const { ns, timing, invariants } = env;
  const nowMs = party.clock();
  const rules: PassRules = {
    nowMs,
    leaseExpiryMs: timing.leaseExpiryMs,
    stagingGraceMs: timing.stagingGraceMs,
    readerGraceMs: timing.readerGraceMs,
    lostWriteGraceMs: timing.lostWriteGraceMs,
    leaseRefreshIntervalMs: timing.leaseRefreshIntervalMs,
    dryRun: false,
    prefixesPerPage: plan.prefixesPerPage,
    prefixConcurrency: plan.prefixConcurrency,
    keysPerFlush: plan.keysPerFlush,
    reportLimit: 10,
    passId: newPassId(nowMs),
  };
  party.log(`pass ${rules.passId} starts at its clock ${nowMs}`);
  invariants.passStarted(party.name);
  let context: PassContext = { pass: party.name };
  party.context = context;
  const corrupted = (what: string) => {
    if (context.corruption === undefined) party.context = context = { ...context, corruption: what };
  };
  const observe = (command: CollectorCommand, result: CollectorResult): void => {
    if (result.kind === 'claimed' && command.kind === 'claimLease') {
      env.sim.count(
        `claim: ${result.owner.owner}${result.owner.owner === 'job' && result.owner.raced ? ' (raced by a refresh)' : ''}`,
      );
    }
    if (result.kind === 'rootRead' && result.problem) corrupted(`the root ${result.problem.problem}`);
    if (result.kind === 'surveyed' && result.prefixes.some((p) => p.owner.owner === 'corrupt'))
      corrupted('a corrupt lease');
    if (result.kind === 'retiredReclaimed' && 'rootProblem' in result.outcome)
      corrupted(`the root ${result.outcome.rootProblem.problem}`);
  };
  /** One attempt of one command's activity. */
  const attempt: CollectorExecutor = async (command, progress) => {
    const result = await executeOnStore(
      { store: party.store, namespaceId: ns, rules, codec: jsonRootCodec, clockMs: party.clock },
      command,
      progress,
    );
    observe(command, result);
    return result;
  };
  const execute = harnessExecutor({
    namespaceId: ns,
    rules,
    attempt,
    retried: (name, work) => runActivity(party, name, { attempts: GC_ATTEMPTS, backoffScale: env.backoffScale }, work),
    gaveUp: activityFailed,
  });
  try {
    const report = await runNamespacePass(startNamespacePass(ns, rules), execute, async () => {});
    const t = report.totals;
    party.log(
      `pass done: claimed ${t.claimed}, orphaned ${t.orphaned}, live ${t.live}, deleted ${t.objectsDeleted} objects and ${t.leasesDeleted} leases, ` +
        `${t.retiredDeleted} retired and ${t.lostWritesDeleted} lost writes${report.rootProblems.length ? `, root ${report.rootProblems[0]!.problem}` : ''}${report.failures.length ? `, ${report.failures.length} failures` : ''}`,
    );
    for (const [name, n] of Object.entries({
      claimed: t.claimed,
      'leases deleted': t.leasesDeleted,
      'retired deleted': t.retiredDeleted,
      'lost writes deleted': t.lostWritesDeleted,
      'staged deleted': t.objectsDeleted - t.retiredDeleted - t.lostWritesDeleted,
    })) {
      if (n > 0) env.sim.count(`pass: ${name}`, n);
    }
    return report;
  } finally {
    party.context = undefined;
    invariants.passEnded(party.name);
  }
}
