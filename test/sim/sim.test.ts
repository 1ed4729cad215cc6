/**
 * The deterministic simulator in CI: 10,000 seeded scenarios of writers, compaction jobs,
 * collector passes, readers and an operator on the simulated bucket, every fault healed at the end
 * and liveness judged. A scenario whose first violation is a known defect (`known-defects.ts`,
 * reported and not yet fixed) counts as that defect; any other violation fails. Each known defect
 * must still be found, so its entry is removed when its fix lands, and the simulator then holds the
 * code to the invariant. `npm run sim -- --seed S` replays any seed this prints.
 */
import { describe, expect, it } from 'vitest';
import { KNOWN_DEFECTS } from './known-defects';
import { runBatchInWorkers, type Batch } from './runner';

const SEEDS = Number(process.env.SIM_SEEDS ?? 10_000);
const FROM = Number(process.env.SIM_FROM ?? 1);
const WORKERS = 2;
/** Every seed divisible by this runs twice in its worker; the traces must hash the same. */
const DETERMINISM_EVERY = 100;

function summary(batch: Batch): string {
  const known = KNOWN_DEFECTS.map(
    (d) => `${d.id} ${batch.known[d.id]?.count ?? 0} (first seed ${batch.known[d.id]?.first ?? '-'})`,
  ).join(', ');
  return `sim: ${batch.scenarios} scenarios from seed ${FROM} in ${(batch.elapsedMs / 1000).toFixed(1)} s on ${WORKERS} processes, ${batch.events} events; known defects: ${known}`;
}

describe('the deterministic simulation of the protocol', () => {
  let batch: Batch;

  it(`${SEEDS} seeded scenarios break no invariant but the known defects, and find each of those`, async () => {
    batch = await runBatchInWorkers(FROM, SEEDS, WORKERS, DETERMINISM_EVERY);
    console.log(summary(batch));
    const replays = batch.failures.map(
      (f) => `seed ${f.seed}: ${f.invariant}: ${f.message}\n  replay: npm run sim -- --seed ${f.seed}`,
    );
    expect(replays.join('\n'), 'violations that are no known defect').toBe('');
    for (const defect of KNOWN_DEFECTS) {
      expect(
        batch.known[defect.id],
        `known defect ${defect.id} (issue ${defect.issue}) was not found: if its fix landed, remove it from KNOWN_DEFECTS`,
      ).toBeDefined();
    }
  });

  it('replays a seed exactly: twice in one process, and alone in a fresh process as within the batch', async () => {
    expect(batch.determinism.checked).toBeGreaterThanOrEqual(Math.floor(SEEDS / DETERMINISM_EVERY));
    expect(batch.determinism.mismatches).toEqual([]);
    expect(batch.clockReads, 'the package read a clock the simulation does not control').toEqual({ count: 0 });
    const seed = Number(Object.keys(batch.determinism.hashes).at(-1));
    const alone = await runBatchInWorkers(seed, 1, 1, 1);
    expect(alone.determinism.hashes[seed]).toBe(batch.determinism.hashes[seed]);
  });

  it('reaches every fault on every kind of write, and the interleavings each defect needs', () => {
    const seen = (pattern: RegExp) =>
      Object.entries(batch.coverage)
        .filter(([label]) => pattern.test(label))
        .reduce((n, [, count]) => n + count, 0);
    const expected: Record<string, RegExp> = {
      'a lost answer on a writer root CAS': /^fault lost-reply-retried: writer putIfMatch root$/,
      'a lost answer on a lease refresh': /^fault lost-reply-retried: job putIfMatch lease$/,
      'a lost answer on a claim': /^fault lost-reply-retried: collector putIfMatch lease$/,
      'a lost answer on a lease create': /^fault lost-reply-retried: job putIfAbsent lease$/,
      'a lost answer on a publication': /^fault lost-reply-retried: job putIfMatch root$/,
      'a lost answer on a batched delete': /^fault lost-reply-retried: collector deleteMany/,
      'a lost answer on a lease deletion': /^fault lost-reply-retried: collector deleteIfMatch lease$/,
      'a late publication CAS': /^interleaving: publication CAS arrived late/,
      'a publication CAS after its lease was claimed':
        /^interleaving: publication CAS arrived after its lease was claimed/,
      'a pause inside the writer budget': /^interleaving: writer CAS sent in the second half of its budget/,
      'a pause inside the publication budget': /^interleaving: publication CAS sent in the second half of its budget/,
      'a writer CAS past the lost-write grace': /^interleaving: writer CAS arrived past the lost-write grace/,
      'two collector passes at once': /^interleaving: two collector passes at once$/,
      'a partition from a root write': /^partition of a .* from its root write$/,
      'a fenced job': /^job fenced$/,
      'a claim lost to a refresh': /^claim: job \(raced by a refresh\)$/,
      'a lost root with history, refused to writers': /^write failed: RootLost$/,
      'a root lost while still the empty first one, created again':
        /^root re-created empty: the lost root was the empty first one$/,
      'a store that ignores a conditional delete': /^store: conditional delete ignored$/,
      'a live lease deleted under its job': /^operator: a lease deleted before it expired$/,
    };
    const missing = Object.entries(expected)
      .filter(([, pattern]) => seen(pattern) === 0)
      .map(([name]) => name);
    expect(missing).toEqual([]);
  });
});
