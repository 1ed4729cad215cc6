/**
 * `npm run sim`: the deterministic simulator from the command line.
 *
 *   npm run sim -- --seeds 10000 --from 1      run seeds 1…10000 on every core
 *   npm run sim -- --seed 4242                 replay one seed exactly: its configuration and trace,
 *                                              and, if it fails, its shrunk schedule and trace
 *   npm run sim -- --seed 4242 --choices 'L'   replay a shrunk schedule a failure printed
 *
 * Options: --workers K (processes, default the cores), --determinism-every K (seeds run twice,
 * default 100), --shrink-seconds N (default 60; 0: no shrinking), --all-known (known defects fail
 * the run too). Exits 1 when a scenario fails (a known defect does not, unless --all-known).
 */
import { availableParallelism } from 'node:os';
import { formatChoiceList, parseChoiceList } from './choices';
import { KNOWN_DEFECTS, knownDefectOf } from './known-defects';
import { mergeBatches, runBatch, runBatchInWorkers, runSeed, shrink, type Batch } from './runner';
import { describeConfig, type ScenarioResult } from './scenario';

interface Args {
  readonly from: number;
  readonly seeds: number;
  readonly seed?: number;
  readonly choices?: readonly number[];
  readonly workers: number;
  readonly determinismEvery: number;
  readonly shrinkSeconds: number;
  readonly allKnown: boolean;
  readonly worker: boolean;
}

function parseArgs(argv: readonly string[]): Args {
  const value = (name: string): string | undefined => {
    const at = argv.indexOf(name);
    return at >= 0 ? argv[at + 1] : undefined;
  };
  const number = (name: string, fallback: number): number => {
    const raw = value(name);
    if (raw === undefined) return fallback;
    const n = Number(raw);
    if (!Number.isSafeInteger(n) || n < 0) throw new Error(`${name} takes a whole number, not ${JSON.stringify(raw)}`);
    return n;
  };
  const seed = value('--seed');
  const choices = value('--choices');
  return {
    from: number('--from', 1),
    seeds: number('--seeds', 1000),
    ...(seed !== undefined && { seed: number('--seed', 0) }),
    ...(choices !== undefined && { choices: parseChoiceList(choices) }),
    workers: Math.max(1, number('--workers', availableParallelism())),
    determinismEvery: number('--determinism-every', 100),
    shrinkSeconds: number('--shrink-seconds', 60),
    allKnown: argv.includes('--all-known'),
    worker: argv.includes('--worker'),
  };
}

const knownOf = (result: ScenarioResult) =>
  result.violation && knownDefectOf(result.violation, { invariants: result.invariants, timing: result.config.timing });

function printScenario(result: ScenarioResult, heading: string): void {
  console.log(
    `\n=== ${heading} ===\n${describeConfig(result.config)}\n--- trace (ms since start, party, step) ---\n${result.trace}`,
  );
  const defect = knownOf(result);
  if (result.violation)
    console.log(
      `--- violation ---\n${result.violation.invariant}: ${result.violation.message}${defect ? `\n(known defect ${defect.id}, issue ${defect.issue}: ${defect.title})` : ''}`,
    );
  else console.log('--- no violation ---');
}

/** Replays `seed` with its trace; if it fails, shrinks it and prints the shrunk schedule and its trace. */
async function replay(seed: number, choices: readonly number[] | undefined, shrinkSeconds: number): Promise<boolean> {
  const result = await runSeed(seed, { trace: 'keep', ...(choices && { choices }) });
  printScenario(result, `seed ${seed}${choices ? ' (the given choices)' : ''}`);
  if (!result.violation) return true;
  if (shrinkSeconds > 0) {
    const shrunk = await shrink(seed, result, shrinkSeconds * 1000);
    printScenario(
      shrunk.result,
      `seed ${seed} shrunk (${shrunk.runs} runs, ${result.choices.length} → ${shrunk.choices.length} choices)`,
    );
    console.log(`\nshrunk schedule: npm run sim -- --seed ${seed} --choices '${formatChoiceList(shrunk.choices)}'`);
  }
  console.log(`replay: npm run sim -- --seed ${seed}`);
  return false;
}

function printBatch(batch: Batch, from: number): void {
  const secs = (batch.elapsedMs / 1000).toFixed(1);
  console.log(
    `sim: seeds ${from}…${from + batch.scenarios - 1}: ${batch.scenarios} scenarios in ${secs} s, ${batch.events} events`,
  );
  console.log('\ncoverage (occurrences over all scenarios):');
  for (const [label, n] of Object.entries(batch.coverage).sort(([a], [b]) => (a < b ? -1 : 1)))
    console.log(`  ${String(n).padStart(9)}  ${label}`);
  console.log('\nknown defects (first violation of a scenario; expected until their fix lands):');
  for (const defect of KNOWN_DEFECTS) {
    const tally = batch.known[defect.id];
    console.log(
      `  ${defect.id.padEnd(30)} issue ${defect.issue.padEnd(5)} ${tally ? `${String(tally.count).padStart(6)} scenarios, first at seed ${tally.first}` : '     not found'}`,
    );
  }
  const { checked, mismatches } = batch.determinism;
  console.log(
    `\ndeterminism: ${checked} seeds run twice, ${mismatches.length ? `traces DIFFER for seeds ${mismatches.join(', ')}` : 'traces equal'}`,
  );
  if (batch.clockReads.count)
    console.log(
      `clock reads outside the simulation: ${batch.clockReads.count}, the first at ${batch.clockReads.first}`,
    );
  console.log(`\nfailures: ${batch.failures.length || 'none'}`);
  for (const f of batch.failures.slice(0, 20)) console.log(`  seed ${f.seed}: ${f.invariant}: ${f.message}`);
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  if (args.worker) {
    const batch = await runBatch(args.from, args.seeds, { determinismEvery: args.determinismEvery });
    process.send!(batch);
    return;
  }
  if (args.seed !== undefined) {
    process.exitCode = (await replay(args.seed, args.choices, args.shrinkSeconds)) ? 0 : 1;
    return;
  }
  const batch =
    args.workers > 1
      ? await runBatchInWorkers(args.from, args.seeds, args.workers, args.determinismEvery)
      : mergeBatches([await runBatch(args.from, args.seeds, { determinismEvery: args.determinismEvery })]);
  printBatch(batch, args.from);
  const knownFails = args.allKnown && Object.keys(batch.known).length > 0;
  const failed =
    batch.failures.length > 0 || batch.determinism.mismatches.length > 0 || batch.clockReads.count > 0 || knownFails;
  const first = batch.failures[0];
  if (first) await replay(first.seed, undefined, args.shrinkSeconds);
  process.exitCode = failed ? 1 : 0;
}

void main();
