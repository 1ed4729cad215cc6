/**
 * Runs scenarios by seed, in this process or in worker processes: tallies coverage, sorts first
 * violations into known defects and failures, checks that some seeds give the same trace twice, and
 * shrinks a failing scenario's choice list with fast-check.
 */
import { fork } from 'node:child_process';
import path from 'node:path';
import fc from 'fast-check';
import { CHOICE_RANGE } from './choices';
import { installDeterminism } from './determinism';
import { KNOWN_DEFECTS, knownDefectOf, type KnownDefect } from './known-defects';
import { runScenario, type RunOptions, type ScenarioResult } from './scenario';

export interface Failure {
  readonly seed: number;
  readonly invariant: string;
  readonly message: string;
}

/** What a batch of seeds showed; batches of several workers merge into one. */
export interface Batch {
  readonly scenarios: number;
  readonly events: number;
  /** Wall time of the batch (of the slowest worker, once merged). */
  readonly elapsedMs: number;
  readonly coverage: Record<string, number>;
  /** Per known defect: how many scenarios it was the first violation of, and the first seed. */
  readonly known: Record<string, { count: number; first: number }>;
  readonly failures: readonly Failure[];
  /** Seeds run twice, and those whose two traces differed. */
  readonly determinism: {
    readonly checked: number;
    readonly mismatches: readonly number[];
    readonly hashes: Record<number, string>;
  };
  /**
   * Clock reads of the package's code (each a clock the simulation does not control), and where the first came from.
   */
  readonly clockReads: { readonly count: number; readonly first?: string };
}

/** Runs one scenario with the process's entropy seeded for it. */
export async function runSeed(seed: number, options: RunOptions = {}): Promise<ScenarioResult> {
  const determinism = installDeterminism();
  determinism.seedEntropy(seed);
  return runScenario(seed, options);
}

export interface BatchOptions {
  /** Every seed divisible by this runs twice and must give the same trace (0: none). */
  readonly determinismEvery: number;
  readonly known?: readonly KnownDefect[];
  readonly onScenario?: (result: ScenarioResult, known: KnownDefect | undefined) => void;
}

/** Runs seeds `from` … `from + count - 1` in this process. */
export async function runBatch(from: number, count: number, options: BatchOptions): Promise<Batch> {
  const started = process.hrtime.bigint();
  const coverage: Record<string, number> = {};
  const known: Record<string, { count: number; first: number }> = {};
  const failures: Failure[] = [];
  const hashes: Record<number, string> = {};
  const mismatches: number[] = [];
  let events = 0;
  for (let seed = from; seed < from + count; seed++) {
    const checked = options.determinismEvery > 0 && seed % options.determinismEvery === 0;
    const result = await runSeed(seed, { trace: checked ? 'hash' : 'off' });
    events += result.events;
    for (const [label, n] of result.coverage) coverage[label] = (coverage[label] ?? 0) + n;
    const defect =
      result.violation &&
      knownDefectOf(
        result.violation,
        { invariants: result.invariants, timing: result.config.timing },
        options.known ?? KNOWN_DEFECTS,
      );
    if (defect) {
      const tally = (known[defect.id] ??= { count: 0, first: seed });
      tally.count++;
    } else if (result.violation)
      failures.push({ seed, invariant: result.violation.invariant, message: result.violation.message });
    if (checked) {
      hashes[seed] = result.traceHash;
      if ((await runSeed(seed, { trace: 'hash' })).traceHash !== result.traceHash) mismatches.push(seed);
    }
    options.onScenario?.(result, defect);
  }
  const { count: reads, first } = installDeterminism().clockReads;
  return {
    scenarios: count,
    events,
    elapsedMs: Number(process.hrtime.bigint() - started) / 1e6,
    coverage,
    known,
    failures,
    determinism: { checked: Object.keys(hashes).length, mismatches, hashes },
    clockReads: { count: reads, ...(first && { first }) },
  };
}

export function mergeBatches(batches: readonly Batch[]): Batch {
  const coverage: Record<string, number> = {};
  const known: Record<string, { count: number; first: number }> = {};
  for (const batch of batches) {
    for (const [label, n] of Object.entries(batch.coverage)) coverage[label] = (coverage[label] ?? 0) + n;
    for (const [id, { count, first }] of Object.entries(batch.known)) {
      const tally = (known[id] ??= { count: 0, first });
      tally.count += count;
      tally.first = Math.min(tally.first, first);
    }
  }
  const reads = batches.find((b) => b.clockReads.count > 0)?.clockReads;
  return {
    scenarios: batches.reduce((n, b) => n + b.scenarios, 0),
    events: batches.reduce((n, b) => n + b.events, 0),
    elapsedMs: Math.max(0, ...batches.map((b) => b.elapsedMs)),
    coverage,
    known,
    failures: batches.flatMap((b) => b.failures).sort((a, b) => a.seed - b.seed),
    determinism: {
      checked: batches.reduce((n, b) => n + b.determinism.checked, 0),
      mismatches: batches.flatMap((b) => b.determinism.mismatches),
      hashes: Object.assign({}, ...batches.map((b) => b.determinism.hashes)) as Record<number, string>,
    },
    clockReads: {
      count: batches.reduce((n, b) => n + b.clockReads.count, 0),
      ...(reads?.first && { first: reads.first }),
    },
  };
}

/** Runs the seeds split over `workers` processes (each `run.ts --worker`), and merges what they found. */
export async function runBatchInWorkers(
  from: number,
  count: number,
  workers: number,
  determinismEvery: number,
): Promise<Batch> {
  const share = Math.ceil(count / workers);
  const ranges = Array.from({ length: workers }, (_, w) => ({
    from: from + w * share,
    count: Math.max(0, Math.min(share, count - w * share)),
  })).filter((r) => r.count > 0);
  const batches = await Promise.all(
    ranges.map(
      (range) =>
        new Promise<Batch>((resolve, reject) => {
          const child = fork(
            path.join(__dirname, 'run.ts'),
            [
              '--worker',
              '--from',
              String(range.from),
              '--seeds',
              String(range.count),
              '--determinism-every',
              String(determinismEvery),
            ],
            {
              execArgv: ['--import', 'tsx'],
              stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
            },
          );
          let batch: Batch | undefined;
          child.on('message', (message) => (batch = message as Batch));
          child.on('error', reject);
          child.on('exit', (code) =>
            batch && code === 0
              ? resolve(batch)
              : reject(new Error(`sim worker for seeds ${range.from}… exited with ${code}`)),
          );
        }),
    ),
  );
  return mergeBatches(batches);
}

/** Whether `result` fails as `original` did: the same invariant broken, and the same known defect or none. */
const sameFailure = (original: ScenarioResult, result: ScenarioResult): boolean => {
  const defectOf = (r: ScenarioResult) =>
    r.violation && knownDefectOf(r.violation, { invariants: r.invariants, timing: r.config.timing })?.id;
  return result.violation?.invariant === original.violation?.invariant && defectOf(result) === defectOf(original);
};

/**
 * Shrinks the choice list of `original` (a failing scenario of `seed`) with fast-check: shorter
 * lists and smaller choices (0 is the quiet option) that still break the same invariant, within
 * `timeLimitMs`. Returns the smallest found, replayed with its trace.
 */
export async function shrink(
  seed: number,
  original: ScenarioResult,
  timeLimitMs: number,
): Promise<{ readonly choices: readonly number[]; readonly result: ScenarioResult; readonly runs: number }> {
  let runs = 0;
  const property = fc.asyncProperty(
    fc.array(fc.nat({ max: CHOICE_RANGE - 1 }), { maxLength: original.choices.length }),
    async (choices) => {
      runs++;
      return !sameFailure(original, await runSeed(seed, { choices, trace: 'off' }));
    },
  );
  const details = await fc.check(property, {
    examples: [[[...original.choices]]],
    numRuns: 1,
    interruptAfterTimeLimit: timeLimitMs,
    markInterruptAsFailure: false,
  });
  const choices = details.counterexample?.[0] ?? original.choices;
  return { choices, result: await runSeed(seed, { choices, trace: 'keep' }), runs };
}
