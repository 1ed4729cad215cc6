/**
 * Randomized interleavings (spec section 7): jobs (create, write, refresh, publish) and collectors
 * (claim, reclaim, delete lease) race on one namespace of the real MinIO, through the S3 fault proxy,
 * under a virtual clock. Every store call waits at a fast-check scheduler gate; the scheduler picks
 * which waiting call goes next (sometimes two at once, so MinIO itself arbitrates a race). After the
 * actors finish, faults stop, the clock passes every expiry and staging grace, and one more pass runs.
 * The invariant checker then judges the store's own history (what the proxy saw MinIO apply, lost
 * responses included), not what the actors believed.
 *
 * The seed (printed) replays the plans, fault choices and gate choices; which calls are waiting at a
 * given moment still depends on real I/O, so a replay is close to, not always exactly, the original.
 */
import { ConfiguredRetryStrategy } from '@smithy/core/retry';
import { S3Client } from '@aws-sdk/client-s3';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveTiming } from '../../src/config';
import {
  familyGroup,
  inputSegmentKey,
  jobId,
  namespaceId,
  namespacePrefix,
  rootKey,
  segmentId,
  stagedSegmentKey,
  type FamilyGroup,
  type NamespaceId,
} from '../../src/keys';
import {
  createJobLease,
  LeaseLostError,
  publishCompaction,
  PublicationBudgetExceededError,
  readRoot,
  refreshJobLease,
  type PublicationOutcome,
} from '../../src/protocol';
import {
  DeleteFailedError,
  executeOnStore,
  runNamespacePass,
  startNamespacePass,
  type CollectorExecutor,
  type PassRules,
  type SettledOwner,
} from '../../src/collector';
import { encodeRoot, groupSegments, jsonRootCodec } from '../../src/root';
import {
  AmbiguousError,
  ConflictError,
  createS3ObjectStore,
  StoreUnavailableError,
  type ObjectStore,
} from '../../src/store';
import { wrapStore } from '../support/faults';
import { harnessExecutor } from '../support/harness-executor';
import {
  checkInvariants,
  describeViolations,
  storeEventsOf,
  type AuditTally,
  type StoreEvent,
} from '../support/invariants';
import { FAULT_KINDS, startS3FaultProxy, type FaultKind, type S3FaultProxy } from '../support/s3-fault-proxy';
import { openTestStore, s3ClientConfig, type TestStore } from '../support/stores';

/** Virtual milliseconds. A store call lands within the operation deadline of its invocation: the clock waits for it. */
const timing = resolveTiming({
  leaseRefreshIntervalMs: 2_000,
  operationDeadlineMs: 1_000,
  publicationBudgetMs: 4_000,
  clockSafetyMarginMs: 500,
});
const GROUPS = ['bindings', 'inodes'].map(familyGroup);
const ATTEMPTS_PER_STEP = 6;
/** The pass after the actors, faults off and every lease expired: its claims are not counted as contested. */
const SETTLE = 'settle';

/** Each step is preceded by the job's own work (an idle gate), during which the clock may move freely. */
type JobStep = 'write' | 'refresh';
interface JobPlan {
  readonly group: FamilyGroup;
  readonly steps: readonly JobStep[];
  readonly publishes: boolean;
}
interface RunPlan {
  readonly jobs: readonly JobPlan[];
  /** Passes of each collector. */
  readonly collectors: readonly number[];
  /** Clock steps, each taken when the scheduler picks it. */
  readonly ticks: readonly number[];
  /** Gates released at once, cycled: 2 sends two calls to MinIO together. */
  readonly bursts: readonly number[];
  readonly faultSeed: number | undefined;
}

const arbJob: fc.Arbitrary<JobPlan> = fc.record({
  group: fc.constantFrom(...GROUPS),
  steps: fc.array(fc.constantFrom<JobStep>('write', 'refresh'), { maxLength: 10 }),
  publishes: fc.boolean(),
});
const { leaseRefreshIntervalMs: refresh, leaseExpiryMs: expiry } = timing;
const arbPlan: fc.Arbitrary<RunPlan> = fc.record({
  jobs: fc.array(arbJob, { minLength: 1, maxLength: 3 }),
  collectors: fc.array(fc.integer({ min: 1, max: 4 }), { minLength: 1, maxLength: 2 }),
  ticks: fc.array(fc.constantFrom(refresh / 2, refresh, expiry / 2, expiry, expiry, 2 * expiry), {
    minLength: 2,
    maxLength: 16,
  }),
  bursts: fc.array(fc.constantFrom(1, 1, 1, 2), { minLength: 1, maxLength: 16 }),
  faultSeed: fc.option(fc.nat(), { freq: 4 }),
});

/**
 * The run's only clock. It never passes the invocation of a pending call of a publication attempt
 * plus the operation deadline: the spec's timings (expiry ≥ T ≥ budget + deadline + margin) assume
 * those calls land within their deadline, and so must the model. Every other call may wait any time:
 * a late create or refresh only makes the lease look older, a late staged write is a young orphan,
 * and the collector's safety rests on CAS and on re-reading the root, not on timing.
 */
class VirtualClock {
  private nowMs: number;
  private readonly pending = new Map<number, number>();
  private nextCall = 0;
  constructor(startMs: number) {
    this.nowMs = startMs;
  }
  readonly now = (): number => this.nowMs;
  begin(): number {
    this.pending.set(this.nextCall, this.nowMs);
    return this.nextCall++;
  }
  end(call: number): void {
    this.pending.delete(call);
  }
  advance(stepMs: number): void {
    const limit = Math.min(...this.pending.values()) + timing.operationDeadlineMs;
    this.nowMs = Math.max(this.nowMs, Math.min(this.nowMs + stepMs, limit));
  }
}

/** Store errors an activity's retry policy would retry; anything else is a bug and fails the test. */
const isRetried = (err: unknown) =>
  [AmbiguousError, StoreUnavailableError, ConflictError, DeleteFailedError, PublicationBudgetExceededError].some(
    (type) => err instanceof type,
  );

/** Gave up after {@link ATTEMPTS_PER_STEP} retried failures, as an activity out of attempts. */
class GaveUp extends Error {}

interface Outcomes {
  jobs: Record<PublicationOutcome['outcome'] | 'fenced while running' | 'stopped' | 'gave up', number>;
  claims: Record<SettledOwner['owner'] | 'raced', number>;
}

/** One run's actors: each gets its own view of the store, whose calls wait at the scheduler. */
interface Run {
  readonly ns: NamespaceId;
  readonly clock: VirtualClock;
  /** `landsWithinDeadline` is asked at each call: does the clock wait for it? */
  readonly storeFor: (actor: string, landsWithinDeadline: () => boolean) => ObjectStore;
  readonly idle: (actor: string) => Promise<void>;
  readonly outcomes: Outcomes;
}

async function retrying<T>(run: Run, actor: string, step: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await step();
    } catch (err) {
      if (!isRetried(err)) throw err;
      if (attempt === ATTEMPTS_PER_STEP) throw new GaveUp(`${actor}: ${(err as Error).message}`);
      await run.idle(actor);
    }
  }
}

async function runJob(run: Run, plan: JobPlan, index: number): Promise<keyof Outcomes['jobs']> {
  const actor = `job${index}`;
  let publishing = false;
  const store = run.storeFor(actor, () => publishing);
  const job = { namespaceId: run.ns, jobId: jobId(`cmp_${String(index + 1).padStart(32, '0')}`) };
  await run.idle(actor);
  const inputs = groupSegments(
    (await retrying(run, actor, () => readRoot(store, run.ns, jsonRootCodec))).root,
    plan.group,
  );
  const startedAtMs = run.clock.now();
  const outputs: string[] = [];
  const steps = plan.publishes && !plan.steps.includes('write') ? ['write' as const, ...plan.steps] : plan.steps;
  try {
    // A retried create can find its own lease already claimed: fenced before its first output.
    let held = await retrying(run, actor, () => createJobLease(store, { ...job, ownerId: actor, startedAtMs }));
    for (const step of steps) {
      await run.idle(actor);
      if (step === 'refresh') held = await retrying(run, actor, () => refreshJobLease(store, job, held, run.clock.now));
      else {
        const key = stagedSegmentKey(
          run.ns,
          job.jobId,
          segmentId(`seg_${String(index * 16 + outputs.length).padStart(32, '0')}`),
          'mseg',
        );
        await retrying(run, actor, () => store.put(key, new TextEncoder().encode(`${actor} output`)));
        outputs.push(key);
      }
    }
  } catch (err) {
    if (err instanceof LeaseLostError) return 'fenced while running';
    throw err;
  }
  if (!plan.publishes) return 'stopped';
  await run.idle(actor);
  publishing = true;
  // A wait between root races is an idle gate: the scheduler may run anything, and move the clock, meanwhile.
  const clock = {
    leaseClockMs: run.clock.now,
    elapsedMs: run.clock.now,
    sleep: () => run.idle(actor),
    random: () => 0.5,
  };
  const request = { ...job, group: plan.group, inputs, outputs };
  return (
    await retrying(run, actor, () =>
      publishCompaction(store, request, {
        budgetMs: timing.publicationBudgetMs,
        maxRootRaces: 3,
        raceBackoff: { firstMs: 100, maxMs: 1000 },
        clock,
        codec: jsonRootCodec,
      }),
    )
  ).outcome;
}

/**
 * One pass as gcNamespaceWorkflow runs it: the same plan (corruption scan, survey, claim with the
 * survey's ETag, reclaim, lease last), its commands executed against the store, each retried like
 * its activity. A page's commands are one `runPage` (its prefixes one `collectPrefixes` in it), retried from where it
 * stood as from the activity's heartbeat; once its retries are spent, the command in flight comes to what its row
 * says and the page goes on command by command, as the workflow does. Pages of two prefixes, two at a time, so runs
 * with several jobs take the scan phase.
 */
async function collectPass(run: Run, actor: string, store: ObjectStore, pass: number): Promise<void> {
  const nowMs = run.clock.now();
  const rules: PassRules = {
    nowMs,
    // Deterministic, one per pass of each actor: a seed replays the same bytes.
    passId: `gc_${String(nowMs).padStart(13, '0')}_${Buffer.from(actor).toString('hex').slice(0, 12).padStart(12, '0')}${pass.toString(16).padStart(4, '0')}`,
    leaseRefreshIntervalMs: timing.leaseRefreshIntervalMs,
    leaseExpiryMs: timing.leaseExpiryMs,
    stagingGraceMs: timing.stagingGraceMs,
    readerGraceMs: timing.readerGraceMs,
    lostWriteGraceMs: timing.lostWriteGraceMs,
    dryRun: false,
    prefixesPerPage: 2,
    prefixConcurrency: 2,
    keysPerFlush: 2,
    reportLimit: 10,
  };
  /** One attempt of one command, after the actor's idle gate. */
  const attempt: CollectorExecutor = async (command, progress) => {
    await run.idle(actor);
    const pass = { store, namespaceId: run.ns, rules, codec: jsonRootCodec };
    const result = await executeOnStore(pass, command, progress);
    if (result.kind === 'claimed' && actor !== SETTLE)
      run.outcomes.claims[result.owner.owner === 'job' && result.owner.raced ? 'raced' : result.owner.owner]++;
    return result;
  };
  const execute = harnessExecutor({
    namespaceId: run.ns,
    rules,
    attempt,
    retried: (_, work) => retrying(run, actor, work),
    gaveUp: (err): err is Error => err instanceof GaveUp,
  });
  const report = await runNamespacePass(startNamespacePass(run.ns, rules), execute, async () => {});
  if (report.corruptLeases.length)
    throw new Error(`no corrupt lease was written, yet ${JSON.stringify(report.corruptLeases)}`);
}

async function runCollector(run: Run, passes: number, index: number): Promise<void> {
  const actor = `gc${index}`;
  const store = run.storeFor(actor, () => false);
  for (let pass = 0; pass < passes; pass++) {
    await run.idle(actor);
    await collectPass(run, actor, store, pass);
  }
}

async function runClock(run: Run, ticks: readonly number[]): Promise<void> {
  for (const step of ticks) {
    await run.idle(`clock +${step}`);
    run.clock.advance(step);
  }
}

const zeroOutcomes = (): Outcomes => ({
  jobs: { published: 0, fenced: 0, abandoned: 0, superseded: 0, 'fenced while running': 0, stopped: 0, 'gave up': 0 },
  claims: { collector: 0, another_pass: 0, job: 0, raced: 0, corrupt: 0 },
});

describe('randomized interleavings of jobs and collectors on MinIO, with S3 faults', () => {
  let direct: TestStore;
  let proxy: S3FaultProxy;
  let throughProxy: ObjectStore;
  let runs = 0;

  beforeAll(async () => {
    direct = await openTestStore('minio');
    proxy = await startS3FaultProxy(direct.endpoint!.endpoint);
    throughProxy = createS3ObjectStore({
      bucket: direct.bucket!,
      // The SDK's own retry decisions (3 attempts), with a millisecond backoff instead of its 100 ms base.
      client: new S3Client({
        ...s3ClientConfig(direct.endpoint!),
        endpoint: proxy.endpoint,
        retryStrategy: new ConfiguredRetryStrategy(3, 1),
      }),
      operationDeadlineMs: 5_000,
    });
  });
  afterAll(async () => {
    await throughProxy?.close();
    await direct?.store.close();
    await proxy?.stop();
  });

  /** Runs one plan under one schedule; returns what the store's history shows. */
  async function checkOne(plan: RunPlan, s: fc.Scheduler, outcomes: Outcomes): Promise<AuditTally> {
    const ns = namespaceId(`il${runs++}-${process.pid}-${Date.now().toString(36)}`);
    const scope = namespacePrefix(ns);
    const clock = new VirtualClock(Date.now());
    const log: StoreEvent[] = [];
    const dates = new Map<string, Date>();
    const unobserve = proxy.observe((exchange) => {
      for (const event of storeEventsOf(exchange, clock.now())) {
        if (!event.key.startsWith(scope)) continue;
        log.push(event);
        if (event.kind === 'put') dates.set(event.key, new Date(event.atMs));
      }
    });
    // Objects are dated by the virtual clock at the moment MinIO applied their write.
    const dated = wrapStore(throughProxy, async (operation, args, call) => {
      const result = await call();
      if (operation !== 'list') return result;
      const page = result as Awaited<ReturnType<ObjectStore['list']>>;
      return { ...page, objects: page.objects.map((o) => ({ ...o, lastModified: dates.get(o.key) })) };
    });
    let inFlight = 0;
    const run: Run = {
      ns,
      clock,
      outcomes,
      idle: (actor) => s.schedule(Promise.resolve(), `${actor} idle`),
      storeFor: (actor, landsWithinDeadline) =>
        wrapStore(dated, async (operation, args, call) => {
          const bounded = landsWithinDeadline();
          // A publishing job may pause before a read (the budget must catch a pause after its refresh), never between
          // its budget check and the root CAS.
          if (bounded && operation === 'get') await s.schedule(Promise.resolve(), `${actor} paused`);
          const pending = bounded ? clock.begin() : undefined;
          try {
            await s.schedule(
              Promise.resolve(),
              `${actor} ${operation} ${typeof args[0] === 'string' ? args[0].slice(scope.length) : ''}`,
            );
            inFlight++;
            try {
              return await call();
            } finally {
              inFlight--;
            }
          } finally {
            if (pending !== undefined) clock.end(pending);
          }
        }),
    };
    try {
      const inputs = Object.fromEntries(
        GROUPS.map((g, i) => [
          g,
          [0, 1].map((n) => inputSegmentKey(ns, segmentId(`seg_${'f'.repeat(31)}${i * 2 + n}`), 'mseg')),
        ]),
      );
      for (const key of Object.values(inputs).flat()) await dated.put(key, new TextEncoder().encode('input'));
      await dated.putIfAbsent(rootKey(ns), encodeRoot({ namespace_id: ns, generation: 1, groups: inputs }));

      proxy.setPlan(
        plan.faultSeed === undefined
          ? {}
          : {
              seed: plan.faultSeed,
              delayMs: 5,
              timeoutMs: 100,
              probabilities: {
                delay: 0.03,
                error500: 0.03,
                error503: 0.02,
                conflict409: 0.05,
                lostResponse: 0.06,
                timeout: 0.01,
              },
            },
      );
      let finished = false;
      const actors = Promise.allSettled([
        ...plan.jobs.map((job, i) => runJob(run, job, i).then((outcome) => void outcomes.jobs[outcome]++)),
        ...plan.collectors.map((passes, i) => runCollector(run, passes, i)),
        runClock(run, plan.ticks),
      ]).finally(() => (finished = true));
      for (let release = 0; !finished;) {
        await new Promise((resolve) => setImmediate(resolve));
        // Only when nothing is in flight does every actor wait at a gate: the scheduler then chooses among all of them.
        if (inFlight === 0 && s.count() > 0)
          await s.waitNext(Math.min(plan.bursts[release++ % plan.bursts.length]!, s.count()));
      }
      for (const result of await actors) {
        if (result.status === 'rejected') {
          if (!(result.reason instanceof GaveUp)) throw result.reason;
          if (/^job/.test((result.reason as Error).message)) outcomes.jobs['gave up']++;
        }
      }

      // Liveness: faults off, every lease expired and every object older than the staging grace, one more pass.
      proxy.setPlan({});
      clock.advance(timing.leaseExpiryMs + timing.stagingGraceMs + 1);
      await collectPass({ ...run, idle: async () => {} }, SETTLE, dated, 0);
    } finally {
      proxy.setPlan({});
      unobserve();
    }

    const final = new Map<string, Uint8Array>();
    for (let cursor: string | undefined; ;) {
      const page = await direct.store.list({ prefix: scope, cursor });
      for (const o of page.objects) final.set(o.key, (await direct.store.get(o.key)).body);
      cursor = page.nextCursor;
      if (cursor === undefined) break;
    }
    const audit = checkInvariants(log, final, {
      leaseExpiryMs: timing.leaseExpiryMs,
      liveness: 'everything-reclaimed',
      scope,
    });
    expect(describeViolations(audit.violations), `violations in namespace ${ns}`).toBe('');
    return audit.tally;
  }

  it('every schedule keeps one owner per lease version, publishes no fenced job, deletes nothing referenced, live or outside a job prefix, and reclaims every claimed lease and orphan', async () => {
    const seed = Number(process.env.INTERLEAVING_SEED ?? Date.now() % 2 ** 31);
    const numRuns = Number(process.env.INTERLEAVING_RUNS ?? 150);
    const outcomes = zeroOutcomes();
    const history: Record<keyof AuditTally, number> = {
      leasesCreated: 0,
      refreshes: 0,
      claims: 0,
      leasesDeleted: 0,
      publications: 0,
      objectsDeleted: 0,
    };
    const faultsBefore = { ...proxy.injected };
    const requestsBefore = proxy.requests;
    console.log(
      `interleavings: seed ${seed}, ${numRuns} schedules (INTERLEAVING_SEED and INTERLEAVING_RUNS replay or resize)`,
    );
    await fc.assert(
      fc.asyncProperty(arbPlan, fc.scheduler(), async (plan, s) => {
        const tally = await checkOne(plan, s, outcomes);
        for (const name of Object.keys(history) as (keyof AuditTally)[]) history[name] += tally[name];
      }),
      { seed, numRuns, endOnFailure: true },
    );
    const faults = Object.fromEntries(FAULT_KINDS.map((k: FaultKind) => [k, proxy.injected[k] - faultsBefore[k]]));
    console.log(
      `interleavings: ${JSON.stringify({ seed, schedules: numRuns, requests: proxy.requests - requestsBefore, faults, ...outcomes, history })}`,
    );
    // The schedules exercised the protocol's contested paths, not only quiet ones.
    expect(outcomes.jobs.published).toBeGreaterThan(0);
    expect(outcomes.jobs.fenced + outcomes.jobs['fenced while running']).toBeGreaterThan(0);
    expect(history.claims).toBeGreaterThan(0);
    expect(Object.values(faults).reduce((a, b) => a + b, 0)).toBeGreaterThan(0);
  }, 1_800_000);
});
