/**
 * One scenario: a configuration drawn from the choices (timings through `resolveTiming`, parties
 * and their plans, the store's fault profile, the operator's acts), the parties run against the
 * simulated bucket until a horizon, then every fault heals and liveness is judged: every party
 * ends, every group compacts, and within a few passes every orphan and retired segment is gone.
 */
import { resolveSettings, resolveTiming, type Timing } from '../../src/config';
import { attemptsSpanning } from '../../src/config/retry';
import { judgedRootKey, namespaceId, namespacePrefix, parseManifestPartKey, rootKey } from '../../src/keys';
import { readGroupRecords, readGroupSnapshot, type LiveRecord } from '../../src/reader';
import { encodeRoot, jsonRootCodec, referencedKeys } from '../../src/root';
import type { ConditionalDelete, ObjectStore, StreamedObject } from '../../src/store';
import { between, chance, listedChoices, pick, seededChoices, type Choices } from './choices';
import { retryDelayOf, type Env } from './env';
import type { FaultProfile } from './faults';
import { Invariants, type SnapshotContext } from './invariants';
import { Model } from './model';
import { runPass, type PassPlan } from './parties/collector';
import { runCompaction, runCompactionTrigger, type CompactionPlan, type TriggerPlan } from './parties/compaction';
import { foreignKeys, Operator, type OperatorPlan } from './parties/operator';
import { runProber, runReader, type ReaderPlan } from './parties/reader';
import { runRewrite, type RewritePlan } from './parties/service';
import { runWriter, type WriterPlan } from './parties/writer';
import { Sim, type Partition, type Party, type PartyKind, type Violation } from './sim';
import { shortKey, type TraceMode } from './trace';

/** 2026-01-01: the store's clock when every scenario starts (pass ids need a 13-digit clock). */
const START_MS = 1_767_225_600_000;
/** The refresh interval: every other timing is drawn around it. */
const UNIT_MS = 1000;
/** A scenario whose events pass this is a runaway (a livelock, or a bug of the simulator). */
const MAX_EVENTS = 200_000;
/** Passes after the faults healed within which every orphan and retired segment must be gone. */
export const LIVENESS_PASSES = 3;

export interface ScenarioConfig {
  readonly timing: Timing;
  readonly horizonMs: number;
  readonly groups: readonly string[];
  readonly writers: readonly WriterPlan[];
  readonly compactions: readonly CompactionPlan[];
  /** The service's compaction trigger, if it runs one: compactions right after the writes that warrant them. */
  readonly trigger: TriggerPlan | undefined;
  readonly passes: readonly PassPlan[];
  readonly readers: readonly ReaderPlan[];
  /** Readers of a group that take a snapshot every few hundred milliseconds and read one segment of each late. */
  readonly probers: readonly ReaderPlan[];
  readonly rewrites: readonly RewritePlan[];
  readonly operator: OperatorPlan;
  readonly faults: FaultProfile;
  /**
   * What the bucket does with `If-Match` on DeleteObject: honoured (S3, moto) or ignored (MinIO), as `store check`
   * reports it.
   */
  readonly conditionalDelete: ConditionalDelete;
  readonly lateSpanMs: number;
  /** The skew of each party's clock, in the order parties are made. */
  readonly skews: readonly number[];
  /** Parties cut off from the store for a while, by the order parties are made. */
  readonly partitions: readonly { readonly party: number; readonly partition: Partition }[];
}

/**
 * Timings around {@link UNIT_MS}, each drawn, every invariant of `resolveTiming` kept (it refuses any that breaks one).
 */
function drawTiming(c: Choices): Timing {
  const deadline = between(c, UNIT_MS / 10, UNIT_MS / 2);
  const margin = between(c, UNIT_MS / 10, UNIT_MS / 2);
  const writerBudgetMs = between(c, UNIT_MS / 2, 2 * UNIT_MS);
  const base = resolveTiming({
    leaseRefreshIntervalMs: UNIT_MS,
    operationDeadlineMs: deadline,
    clockSafetyMarginMs: margin,
    publicationBudgetMs: between(c, UNIT_MS / 2, 2 * UNIT_MS),
    writerBudgetMs,
    lostWriteGraceMs: writerBudgetMs + deadline + margin,
  });
  return resolveTiming({
    ...base,
    readerGraceMs:
      base.readerGraceMs +
      pick(c, [
        [3, 0],
        [1, between(c, 0, 4 * UNIT_MS)],
      ]),
    lostWriteGraceMs:
      base.lostWriteGraceMs +
      pick(c, [
        [3, 0],
        [1, between(c, 0, 4 * UNIT_MS)],
      ]),
  });
}

export function drawConfig(c: Choices): ScenarioConfig {
  const timing = drawTiming(c);
  const horizonMs = between(c, 15 * UNIT_MS, 40 * UNIT_MS);
  const groups = ['inodes', 'bindings'].slice(0, between(c, 1, 2));
  const keys = between(c, 2, 6);
  const tombstonePercent = pick(c, [
    [1, 0],
    [2, 20],
    [2, 40],
  ]);
  // A burst crowds the writes, jobs and readers into a few refresh intervals: interleavings need neighbours.
  const burst = chance(c, 50);
  const burstStart = between(c, 0, horizonMs / 2);
  const spread = () => between(c, 0, horizonMs);
  const at = () => (burst ? burstStart + between(c, 0, 4 * UNIT_MS) : spread());
  const group = () => groups[c.next(groups.length)]!;
  const writers = Array.from({ length: between(c, 1, 4) }, (_, w): WriterPlan => {
    const count = between(c, 1, 4);
    return {
      group: group(),
      writes: Array.from({ length: count }, (_, n) => {
        // A few distinct keys: the first `size` of a shuffle.
        const order = Array.from({ length: keys }, (_, k) => k);
        const size = between(c, 1, Math.min(3, keys));
        for (let i = 0; i < size; i++) {
          const j = i + c.next(keys - i);
          [order[i], order[j]] = [order[j]!, order[i]!];
        }
        return {
          afterMs: n === 0 && burst ? at() : between(c, 0, burst ? UNIT_MS / 2 : horizonMs / count),
          records: order
            .slice(0, size)
            .map((k) =>
              chance(c, tombstonePercent)
                ? { key: `k${k}`, tombstone: true as const }
                : { key: `k${k}`, value: `w${w}.${n}` },
            ),
        };
      }),
    };
  });
  const compactions = Array.from({ length: between(c, 0, 3) }, (): CompactionPlan => ({
    afterMs: at(),
    group: group(),
    targetSegmentBytes: pick(c, [
      [3, 1 << 20],
      [1, 64],
    ]),
    maxFanIn: pick(c, [
      [3, 64],
      [1, 2],
    ]),
    leaseDelayMs: pick(c, [
      [5, () => 0],
      [1, () => between(c, 0, 2 * timing.stagingGraceMs)],
    ])(),
    publishDelayMs: pick(c, [
      [3, () => 0],
      [1, () => between(c, 0, 2 * timing.leaseExpiryMs)],
    ])(),
  }));
  // Passes now and then, or on a schedule: every few refresh intervals, or often (a small deployment's
  // collector, which meets every deletion as soon as it is due).
  const scheduleMs = chance(c, 50)
    ? pick(c, [
        [2, () => between(c, 2 * UNIT_MS, 6 * UNIT_MS)],
        [1, () => between(c, UNIT_MS / 2, 2 * UNIT_MS)],
      ])()
    : undefined;
  const passTimes = scheduleMs
    ? Array.from({ length: Math.floor(horizonMs / scheduleMs) }, (_, i) => (i + 1) * scheduleMs)
    : Array.from({ length: between(c, 1, 6) }, () => (chance(c, 50) ? at() : spread()));
  const trigger = chance(c, 50)
    ? {
        everyMs: between(c, UNIT_MS / 4, UNIT_MS),
        threshold: between(c, 2, 3),
        cutOffPercent: pick(c, [
          [3, 0],
          [1, 30],
        ]),
      }
    : undefined;
  const passes: PassPlan[] = [];
  for (const afterMs of passTimes) {
    const plan = {
      afterMs,
      prefixesPerPage: between(c, 1, 3),
      prefixConcurrency: between(c, 1, 2),
      keysPerFlush: between(c, 1, 3),
    };
    passes.push(plan);
    // Two passes at once: a schedule's pass beside a manual one.
    if (chance(c, scheduleMs ? 5 : 20))
      passes.push({ ...plan, afterMs: plan.afterMs + between(c, 0, timing.operationDeadlineMs) });
  }
  // Readers that read a few snapshots, and a prober per group that takes one at every moment.
  const readers = Array.from({ length: between(c, 0, 4) }, (): ReaderPlan => ({
    afterMs: at(),
    group: group(),
    rounds: between(c, 1, 4),
  }));
  const probers = groups.map((g): ReaderPlan => ({ afterMs: 0, group: g, rounds: 0 }));
  const rewrites = Array.from({ length: between(c, 0, 2) }, (): RewritePlan => ({ afterMs: at(), group: group() }));
  const acts: OperatorPlan['acts'][number][] = [];
  const restore = () =>
    pick(c, [
      [1, undefined],
      [1, between(c, UNIT_MS, 8 * UNIT_MS)],
    ]);
  if (chance(c, 12)) acts.push({ afterMs: at(), act: { kind: 'delete root', restoreAfterMs: restore() } });
  if (chance(c, 6)) acts.push({ afterMs: at(), act: { kind: 'corrupt root', restoreAfterMs: restore() } });
  if (chance(c, 6)) acts.push({ afterMs: at(), act: { kind: 'corrupt a lease' } });
  // An operator who deletes the lease of a job stuck at its publication (below): its CAS still in flight.
  const stuckLeaseDeleted = chance(c, 10);
  if (stuckLeaseDeleted) acts.push({ afterMs: at(), act: { kind: 'delete a stuck lease' } });
  if (chance(c, 15)) acts.push({ afterMs: at(), act: { kind: 'foreign objects' } });
  const faults: FaultProfile = {
    percent: pick(c, [
      [2, 0],
      [3, 3],
      [3, 10],
      [2, 25],
    ]),
    late: chance(c, 60),
    maxPauseMs: pick(c, [
      [1, 0],
      [2, timing.leaseExpiryMs],
      [1, 3 * timing.leaseExpiryMs],
    ]),
    lateRootPercent: pick(c, [
      [2, 0],
      [1, 15],
      [1, 40],
    ]),
  };
  const lateSpanMs =
    2 * (timing.leaseExpiryMs + Math.max(timing.stagingGraceMs, timing.readerGraceMs, timing.lostWriteGraceMs));
  const parties =
    writers.length + compactions.length + passes.length + readers.length + probers.length + rewrites.length;
  const skews = Array.from(
    { length: parties },
    () => between(c, 0, timing.clockSafetyMarginMs) - Math.floor(timing.clockSafetyMarginMs / 2),
  );
  const { operationDeadlineMs: deadline, gcMinGraceMs: T, leaseExpiryMs: expiry, stagingGraceMs: staging } = timing;
  const partitions = Array.from(
    {
      length: pick(c, [
        [3, 0],
        [2, 1],
        [1, 2],
      ]),
    },
    () => {
      const party = c.next(parties);
      const fromMs = START_MS + at();
      const lasts = pick(c, [
        [1, () => between(c, deadline, T)],
        [2, () => between(c, T, expiry)],
        [1, () => between(c, expiry, 2 * expiry)],
      ])();
      return { party, partition: { fromMs, lastsMs: lasts, onRootWrite: chance(c, 50) } };
    },
  );
  // A job cut off from its publication on for longer than an expiry: its CAS may land after a pass claimed it. Where
  // the operator deletes a stuck lease, every job is cut off past the staging grace: its CAS may land after a pass
  // took its lease-less prefix and deleted its outputs.
  compactions.forEach((plan, i) => {
    if (stuckLeaseDeleted)
      partitions.push({
        party: writers.length + i,
        partition: {
          fromMs: START_MS + plan.afterMs,
          lastsMs: between(c, staging, staging + 2 * expiry),
          onRootWrite: true,
        },
      });
    else if (chance(c, 25))
      partitions.push({
        party: writers.length + i,
        partition: { fromMs: START_MS + plan.afterMs, lastsMs: expiry + between(c, 0, 2 * expiry), onRootWrite: true },
      });
  });
  // The collector runs on a store that ignores the condition of a delete (MinIO) as on one that honours it.
  const conditionalDelete = pick(c, [
    [2, 'honoured'],
    [1, 'ignored'],
  ] as const);
  return {
    timing,
    horizonMs,
    groups,
    writers,
    compactions,
    trigger,
    passes,
    readers,
    probers,
    rewrites,
    operator: { acts },
    faults,
    conditionalDelete,
    lateSpanMs,
    skews,
    partitions,
  };
}

/** The configuration in a line, for a failure's report. */
export function describeConfig(config: ScenarioConfig): string {
  const t = config.timing;
  return [
    `timing: refresh ${t.leaseRefreshIntervalMs}, deadline ${t.operationDeadlineMs}, margin ${t.clockSafetyMarginMs}, budget ${t.publicationBudgetMs}, T ${t.gcMinGraceMs}, expiry ${t.leaseExpiryMs}, staging ${t.stagingGraceMs}, reader grace ${t.readerGraceMs}, writer budget ${t.writerBudgetMs}, lost-write grace ${t.lostWriteGraceMs}`,
    `horizon ${config.horizonMs} ms; groups ${config.groups.join(', ')}; ${config.writers.length} writers (${config.writers.map((w) => w.writes.length).join('+')} writes), ${config.compactions.length} compactions${config.trigger ? ` and a trigger (every ${config.trigger.everyMs} ms, ${config.trigger.threshold} segments, ${config.trigger.cutOffPercent}% of its jobs cut off at their publication)` : ''}, ${config.passes.length} passes, ${config.readers.length} readers, ${config.probers.length} probers, ${config.rewrites.length} rewrites`,
    `partitions: ${config.partitions.map((p) => `party ${p.party} for ${p.partition.lastsMs} ms ${p.partition.onRootWrite ? 'from its first root write after' : 'at'} ${p.partition.fromMs - START_MS}`).join(', ') || 'none'}; faults: ${config.faults.percent}% of requests, late ${config.faults.late ? `yes (${config.faults.lateRootPercent}% of root writes)` : 'no'}, pauses up to ${config.faults.maxPauseMs} ms; conditional delete ${config.conditionalDelete}; operator: ${config.operator.acts.map((a) => a.act.kind).join(', ') || 'nothing'}`,
  ].join('\n');
}

export interface ScenarioResult {
  readonly seed: number;
  /** The first violation, if any (a scenario stops at its first). */
  readonly violation: Violation | undefined;
  readonly coverage: ReadonlyMap<string, number>;
  readonly traceHash: string;
  readonly trace: string;
  readonly choices: readonly number[];
  readonly events: number;
  readonly config: ScenarioConfig;
  readonly invariants: Invariants;
}

export interface RunOptions {
  /** Replay this list of choices instead of drawing from the seed. */
  readonly choices?: readonly number[];
  /** What of the trace to record (default `hash`). */
  readonly trace?: TraceMode;
}

/** Reads every segment of `group` once more, faults healed, and holds the view to every acknowledged write. */
async function finalViews(env: Env, groups: readonly string[]): Promise<void> {
  const party = env.sim.party('final reader', 'reader');
  for (const group of groups) {
    const read: SnapshotContext = { snapshot: {} };
    party.context = read;
    const snapshot = await readGroupSnapshot(party.store, { namespaceId: env.ns, group }, jsonRootCodec, party.clock);
    party.context = undefined;
    const bytes = new Map<string, Uint8Array>();
    for (const key of snapshot.segments) {
      const parts: Uint8Array[] = [];
      for await (const part of (await party.store.getStream(key)).body) parts.push(part);
      bytes.set(key, Buffer.concat(parts));
    }
    const store = {
      getStream: async (key: string): Promise<StreamedObject> => ({
        key,
        body: (async function* () {
          yield bytes.get(key)!;
        })(),
        etag: '',
        lastModified: undefined,
      }),
    };
    const view: LiveRecord[] = [];
    for await (const record of readGroupRecords(store as unknown as ObjectStore, snapshot)) view.push(record);
    env.invariants.readerViewMatchesModel(
      `the final reader of ${group}`,
      group,
      view,
      read.snapshot.event!,
      snapshot.rootGeneration,
    );
  }
}

/** What is left in the namespace that liveness says should be gone: unnamed segments, leases, retired records. */
function leftovers(env: Env): string[] {
  const root = env.invariants.root;
  if (!root) return ['the root (missing or corrupt)'];
  const named = referencedKeys(root);
  const foreign = new Set(foreignKeys(env));
  const left = env.sim.world
    .keys()
    .filter(
      (k) =>
        k.startsWith(namespacePrefix(env.ns)) &&
        k !== rootKey(env.ns) &&
        k !== judgedRootKey(env.ns) &&
        !named.has(k) &&
        !foreign.has(k) &&
        !parseManifestPartKey(k),
    )
    .map(shortKey);
  return root.retired?.length ? [...left, `${root.retired.length} retired records`] : left;
}

/**
 * Liveness, once faults have healed and every party ended: each group compacted by a fresh job
 * (which must end published, unchanged, or find the group empty), then passes at clocks past every
 * expiry and grace until nothing is left to reclaim, at most {@link LIVENESS_PASSES}.
 */
async function settle(env: Env, config: ScenarioConfig, settler: Party): Promise<void> {
  const { sim, timing } = env;
  const longest =
    Math.max(timing.leaseExpiryMs, timing.stagingGraceMs, timing.readerGraceMs, timing.lostWriteGraceMs) +
    timing.clockSafetyMarginMs +
    1;
  await settler.sleep(longest);
  for (const group of config.groups) {
    let outcome: string;
    try {
      outcome = await runCompaction(env, settler, {
        afterMs: 0,
        group,
        targetSegmentBytes: 1 << 20,
        maxFanIn: 64,
        leaseDelayMs: 0,
        publishDelayMs: 0,
      });
    } catch (err) {
      outcome = `failed: ${err instanceof Error ? `${err.name}: ${err.message}` : String(err)}`;
    }
    if (!['published', 'unchanged', 'empty'].includes(outcome)) {
      sim.violate({
        invariant: 'liveness',
        message: `after the faults healed, group ${group} did not compact: ${outcome}`,
        evidence: { outcome },
      });
      return;
    }
  }
  let left: string[] = [];
  for (let pass = 1; pass <= LIVENESS_PASSES; pass++) {
    await settler.sleep(longest);
    await runPass(env, settler, { afterMs: 0, prefixesPerPage: 10, prefixConcurrency: 2, keysPerFlush: 10 });
    left = leftovers(env);
    if (left.length === 0) break;
  }
  if (left.length) {
    sim.violate({
      invariant: 'liveness',
      message: `after the faults healed, ${LIVENESS_PASSES} passes left ${left.join(', ')}`,
      evidence: { left },
    });
    return;
  }
  await finalViews(env, config.groups);
}

/** Runs the scheduler until no event is left, the first violation, or a runaway. */
async function runUntilIdle(sim: Sim): Promise<void> {
  while (sim.violations.length === 0 && (await sim.scheduler.step())) {
    if (sim.scheduler.events > MAX_EVENTS) {
      sim.violate({ invariant: 'liveness', message: `the simulation ran past ${MAX_EVENTS} events (a livelock?)` });
      return;
    }
  }
}

export async function runScenario(seed: number, options: RunOptions = {}): Promise<ScenarioResult> {
  const choices = options.choices ? listedChoices(options.choices) : seededChoices(seed);
  const config = drawConfig(choices);
  const { timing } = config;
  const ns = namespaceId('sim');
  const sim = new Sim({
    startMs: START_MS,
    choices,
    timing,
    faults: config.faults,
    lateSpanMs: config.lateSpanMs,
    conditionalDelete: config.conditionalDelete,
    trace: options.trace ?? 'hash',
  });
  sim.count(`store: conditional delete ${config.conditionalDelete}`);
  const model = new Model();
  const invariants = new Invariants(sim, model, ns);
  sim.monitor = invariants;
  const backoffScale = timing.leaseRefreshIntervalMs / resolveTiming().leaseRefreshIntervalMs;
  const env: Env = {
    sim,
    model,
    invariants,
    ns,
    timing,
    settings: resolveSettings({ timing, heartbeatTimeoutMs: 1000 }),
    backoffScale,
    shortAttempts: attemptsSpanning(timing.leaseExpiryMs / backoffScale),
    retryDelayMs: retryDelayOf(backoffScale),
  };
  sim.operate(() => sim.world.put(rootKey(ns), encodeRoot({ namespace_id: ns, generation: 1, groups: {} })));

  let made = 0;
  const make = (name: string, kind: PartyKind): Party => {
    const index = made++;
    return sim.party(
      name,
      kind,
      config.skews[index] ?? 0,
      config.partitions.filter((p) => p.party === index).map((p) => p.partition),
    );
  };
  config.writers.forEach((plan, i) => {
    const party = make(`writer${i}`, 'writer');
    sim.spawn(party, () => runWriter(env, party, plan));
  });
  config.compactions.forEach((plan, i) => {
    const party = make(`job${i}`, 'job');
    sim.spawn(party, () => runCompaction(env, party, plan));
  });
  if (config.trigger) {
    const trigger = config.trigger;
    const party = sim.party('trigger', 'service');
    let started = 0;
    sim.spawn(party, () =>
      runCompactionTrigger(env, party, trigger, (group, done) => {
        const skew = between(sim.choices, 0, timing.clockSafetyMarginMs) - Math.floor(timing.clockSafetyMarginMs / 2);
        // Cut off for longer than an expiry, ending before the faults heal (which would end it at once).
        const leftMs = START_MS + config.horizonMs - sim.now - 2 * timing.leaseExpiryMs;
        const cutOff =
          leftMs > 0 && chance(sim.choices, trigger.cutOffPercent)
            ? [{ fromMs: sim.now, lastsMs: timing.leaseExpiryMs + between(sim.choices, 0, leftMs), onRootWrite: true }]
            : [];
        const job = sim.party(`auto${started++}`, 'job', skew, cutOff);
        sim.spawn(job, () =>
          runCompaction(env, job, {
            afterMs: 0,
            group,
            targetSegmentBytes: 1 << 20,
            maxFanIn: 64,
            leaseDelayMs: 0,
            publishDelayMs: 0,
          }).finally(done),
        );
      }),
    );
  }
  config.passes.forEach((plan, i) => {
    const party = make(`gc${i}`, 'collector');
    sim.spawn(party, () => runPass(env, party, plan));
  });
  config.readers.forEach((plan, i) => {
    const party = make(`reader${i}`, 'reader');
    sim.spawn(party, () => runReader(env, party, plan));
  });
  config.probers.forEach((plan, i) => {
    const party = make(`prober${i}`, 'reader');
    sim.spawn(party, () => runProber(env, party, plan));
  });
  config.rewrites.forEach((plan, i) => {
    const party = make(`service${i}`, 'service');
    sim.spawn(party, () => runRewrite(env, party, plan));
  });
  const operatorParty = sim.party('operator', 'operator');
  const operator = new Operator(env, operatorParty);
  sim.spawn(operatorParty, () => operator.run(config.operator));
  sim.scheduler.at(START_MS + config.horizonMs, () => {
    sim.trace.add(sim.now, 'sim', 'faults heal: late requests arrive now, new ones are quiet');
    sim.heal();
    operator.repair();
  });

  await sim.scheduler.drain();
  await runUntilIdle(sim);
  if (sim.violations.length === 0 && sim.running.size > 0) {
    sim.violate({
      invariant: 'liveness',
      message: `after the faults healed, ${[...sim.running].join(', ')} never ended`,
    });
  }
  if (sim.violations.length === 0) {
    const settler = sim.party('settler', 'settler');
    sim.spawn(settler, () => settle(env, config, settler));
    await sim.scheduler.drain();
    await runUntilIdle(sim);
  }
  return {
    seed,
    violation: sim.violations[0],
    coverage: sim.coverage,
    traceHash: sim.trace.digest(),
    trace: sim.trace.text(),
    choices: choices.drawn,
    events: sim.scheduler.events,
    config,
    invariants,
  };
}
