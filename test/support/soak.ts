/**
 * The chaos soak (issue 5, item 3): many concurrent compactions plus the collector's schedule at
 * shrunk timings, on a Temporal dev server of its own (a database file, so it can restart) and a
 * MinIO of its own behind the S3 fault proxy. While it runs, workers are SIGKILLed and restarted,
 * the dev server is restarted on the same port and file, and S3 requests fail. Then faults stop,
 * the jobs finish, the collector runs for two staging-grace periods, and the auditor checks the
 * whole bucket history. Used by scripts/soak.ts and, small, by test/integration/soak-smoke.test.ts.
 *
 * The bucket has versioning on: the auditor reads every root and lease version and every delete
 * from it. The workers reach MinIO only through the proxy; the soak's own writer (the metadata
 * service's stand-in) and the auditor go to MinIO directly, so faults hit only the code under test.
 */
import { type ChildProcess } from 'node:child_process';
import { closeSync, mkdirSync, openSync } from 'node:fs';
import { cpus, loadavg, totalmem } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { CreateBucketCommand, PutBucketVersioningCommand, S3Client } from '@aws-sdk/client-s3';
import { Client, Connection, WorkflowFailedError } from '@temporalio/client';
import { ensureGcSchedule, pauseGcSchedule, startCompaction, unpauseGcSchedule } from '../../src/client';
import { resolveSettings, shrunkTiming, type CompactionSettings } from '../../src/config';
import {
  freePort,
  SEARCH_ATTRIBUTES,
  startMinio,
  startTemporalDevServer,
  type S3Server,
  type TemporalDevServer,
} from '../../src/devservers';
import type { SegmentRecord } from '../../src/segments';
import { createS3ObjectStore, type ObjectStore } from '../../src/store';
import { writeInputSegment } from '../../src/writer';
import type { CompactionResult } from '../../src/workflows/compaction';
import type { GcReport } from '../../src/workflows/gc';
import { auditBucket, type AuditReport, type Violation } from './auditor';
import { FAULT_KINDS, s3Requests, startS3FaultProxy, type FaultKind, type S3FaultProxy } from './s3-fault-proxy';
import { spawnWorkerProcess, workerEnvironment } from './worker-env';

export interface SoakOptions {
  /** How long workers are killed, the server restarted and S3 faulted. */
  readonly durationMs: number;
  /** Compaction workflows started in all, paced over the first 80 % of the duration. */
  readonly jobs: number;
  /** Compactions running at once (each on its own family group). */
  readonly concurrency: number;
  readonly workers: number;
  readonly namespaces: number;
  readonly groupsPerNamespace: number;
  /** Seeds the chaos schedule, the fault draws, the job order and the records. */
  readonly seed: number;
  /** The lease refresh interval; every other timing is shrunk from it (src/config shrunkTiming). */
  readonly unitMs: number;
  readonly heartbeatTimeoutMs: number;
  readonly gcEveryMs: number;
  /** Mean time between worker SIGKILLs; the first falls in the first 40 % of the run. */
  readonly killEveryMs: number;
  /** Mean time between dev-server restarts; the first falls between 30 % and 70 % of the run. */
  readonly restartEveryMs: number;
  /**
   * Probability that an S3 request of a worker is faulted (delay, 500, 503, lost response, timeout), plus scripted 409s
   * on conditional writes.
   */
  readonly faultRate: number;
  /** Records per input segment; each job gets one or two new segments first. */
  readonly recordsPerSegment: number;
  /** Everything the run keeps: the dev server's database, MinIO's data, logs. */
  readonly workDir: string;
  /** Give up waiting for jobs or a settled pass after this long. */
  readonly settleTimeoutMs: number;
  readonly log: (line: string) => void;
}

export const DEFAULT_SOAK_OPTIONS: Omit<SoakOptions, 'workDir' | 'log'> = {
  durationMs: 10 * 60_000,
  jobs: 40,
  concurrency: 6,
  workers: 3,
  namespaces: 2,
  groupsPerNamespace: 4,
  seed: 1,
  unitMs: 2000,
  heartbeatTimeoutMs: 4000,
  gcEveryMs: 3000,
  killEveryMs: 30_000,
  restartEveryMs: 150_000,
  faultRate: 0.05,
  recordsPerSegment: 1500,
  settleTimeoutMs: 10 * 60_000,
};

export interface SoakReport {
  readonly seed: number;
  readonly options: Omit<SoakOptions, 'log'>;
  readonly machine: {
    cpu: string;
    cores: number;
    ramGiB: number;
    node: string;
    loadavgStart: number[];
    loadavgEnd: number[];
  };
  readonly durationMs: { total: number; chaos: number; settle: number };
  readonly jobs: {
    started: number;
    published: number;
    /** Jobs of a one-segment group with nothing to drop, left alone. */
    unchanged: number;
    /** Jobs fenced and run again as a new job (continue-as-new with a new job id). */
    fencedAndRerun: number;
    endedFenced: number;
    abandoned: number;
    superseded: number;
    failed: number;
    unfinished: number;
  };
  readonly faults: Record<FaultKind, number>;
  readonly s3Requests: number;
  readonly workerKills: number;
  /** Worker processes that exited without being killed (restarted like killed ones). */
  readonly workerExits: number;
  readonly serverRestarts: number;
  readonly gcPasses: {
    completed: number;
    failed: number;
    other: number;
    unpaused: number;
    settledPassClockMs: number | undefined;
  };
  readonly audit: Omit<AuditReport, 'violations'>;
  /** Must be empty. */
  readonly violations: readonly Violation[];
  /** Problems that are not invariant violations but mean the run proved less (jobs unfinished, no settled pass). */
  readonly incomplete: readonly string[];
}

/** mulberry32: small, seeded, good enough to replay a chaos schedule. */
export class SeededRandom {
  private state: number;
  constructor(seed: number) {
    this.state = seed >>> 0;
  }
  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
  between(min: number, max: number): number {
    return min + (max - min) * this.next();
  }
  int(below: number): number {
    return Math.floor(this.next() * below);
  }
  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)] as T;
  }
  /** Exponentially distributed gap with this mean. */
  gap(meanMs: number): number {
    return -Math.log(1 - this.next()) * meanMs;
  }
}

/** One family group and everything the soak ever wrote to it. */
interface GroupState {
  readonly ns: string;
  readonly group: string;
  readonly written: SegmentRecord[][];
  nextSeq: number;
  busy: boolean;
}

const KEY_SPACE = 3000;

function makeRecords(random: SeededRandom, state: GroupState, count: number): SegmentRecord[] {
  const keys = new Set<number>();
  while (keys.size < Math.min(count, KEY_SPACE)) keys.add(random.int(KEY_SPACE));
  return [...keys].map((k) => {
    const key = `k${String(k).padStart(6, '0')}`;
    const seq = state.nextSeq++;
    return random.next() < 0.1
      ? { key, seq, tombstone: true as const }
      : { key, seq, value: `v${seq}-${'x'.repeat(k % 50)}` };
  });
}

const machine = () => ({
  cpu: cpus()[0]?.model ?? 'unknown',
  cores: cpus().length,
  ramGiB: Math.round((totalmem() / 2 ** 30) * 10) / 10,
  node: process.version,
});

/** Worker processes in numbered slots; a slot whose process dies (killed or not) is refilled until the pool stops. */
class WorkerPool {
  private readonly slots: (ChildProcess | undefined)[];
  private readonly planned = new Set<ChildProcess>();
  private stopping = false;
  private generation = 0;
  kills = 0;
  exits = 0;

  constructor(
    size: number,
    private readonly env: NodeJS.ProcessEnv,
    private readonly workDir: string,
    private readonly log: (line: string) => void,
  ) {
    this.slots = new Array<ChildProcess | undefined>(size).fill(undefined);
  }

  startAll(): void {
    for (let i = 0; i < this.slots.length; i++) this.start(i);
  }

  private start(slot: number): void {
    const owner = `soak-worker-${slot}-gen${this.generation++}`;
    const out = openSync(join(this.workDir, `worker-${slot}.log`), 'a');
    const child = spawnWorkerProcess({ ...this.env, COMPACTION_OWNER_ID: owner }, ['ignore', out, out]);
    closeSync(out);
    this.slots[slot] = child;
    child.once('exit', (code, signal) => {
      this.slots[slot] = undefined;
      if (this.stopping) return;
      if (!this.planned.delete(child)) {
        this.exits++;
        this.log(`worker ${owner} exited on its own (${signal ?? code}); restarting`);
      }
      // A worker that cannot reach the server exits at once; wait a little before the next one.
      setTimeout(() => this.stopping || this.start(slot), 1000 + Math.random() * 2000).unref();
    });
  }

  /** SIGKILLs a random live worker; the pool restarts its slot. */
  killOne(random: SeededRandom): void {
    const live = this.slots.flatMap((c, i) => (c ? [i] : []));
    if (live.length === 0) return;
    const child = this.slots[random.pick(live)] as ChildProcess;
    this.planned.add(child);
    child.kill('SIGKILL');
    this.kills++;
  }

  get live(): number {
    return this.slots.filter(Boolean).length;
  }

  async stop(): Promise<void> {
    this.stopping = true;
    await Promise.all(
      this.slots.map(
        (child) =>
          child &&
          new Promise<void>((resolve) => {
            child.once('exit', () => resolve());
            child.kill('SIGTERM');
            setTimeout(() => child.kill('SIGKILL'), 10_000).unref();
          }),
      ),
    );
  }
}

/**
 * Retries `call` across a server restart (or any transport error) until `deadline`; workflow failures are answers, not
 * retried.
 */
async function persist<T>(deadline: number, call: () => Promise<T>): Promise<T> {
  for (;;) {
    try {
      return await call();
    } catch (err) {
      if (err instanceof WorkflowFailedError || Date.now() > deadline) throw err;
      await sleep(1000);
    }
  }
}

export async function runSoak(options: SoakOptions): Promise<SoakReport> {
  const { log, ...recorded } = options;
  const random = new SeededRandom(options.seed);
  const loadavgStart = loadavg();
  const startedAt = Date.now();
  mkdirSync(options.workDir, { recursive: true });
  const settings: CompactionSettings = resolveSettings({
    timing: shrunkTiming(options.unitMs, options.heartbeatTimeoutMs),
    targetSegmentBytes: 8192,
    heartbeatTimeoutMs: options.heartbeatTimeoutMs,
  });
  const { timing } = settings;
  const taskQueue = 'soak';
  const scheduleId = 'soak-gc';
  const incomplete: string[] = [];

  const cleanups: (() => Promise<void>)[] = [];
  try {
    const minio: S3Server = await startMinio({
      dataDir: join(options.workDir, 'minio'),
      logFile: join(options.workDir, 'minio.log'),
    });
    cleanups.push(() => minio.stop());
    const bucket = 'soak';
    const s3 = new S3Client({
      endpoint: minio.endpoint,
      region: minio.region,
      forcePathStyle: true,
      credentials: { accessKeyId: minio.accessKey, secretAccessKey: minio.secretKey },
    });
    cleanups.push(async () => s3.destroy());
    await s3.send(new CreateBucketCommand({ Bucket: bucket }));
    await s3.send(new PutBucketVersioningCommand({ Bucket: bucket, VersioningConfiguration: { Status: 'Enabled' } }));
    const writer: ObjectStore = createS3ObjectStore({ bucket, client: s3, operationDeadlineMs: 30_000 });

    const proxy: S3FaultProxy = await startS3FaultProxy(minio.endpoint);
    cleanups.push(() => proxy.stop());

    const port = await freePort();
    const serverOptions = {
      port,
      uiPort: 'none' as const,
      dbFilename: join(options.workDir, 'temporal.db'),
      searchAttributes: SEARCH_ATTRIBUTES,
      logFile: join(options.workDir, 'temporal.log'),
      readyTimeoutMs: 120_000,
    };
    let server: TemporalDevServer | undefined = await startTemporalDevServer(serverOptions);
    cleanups.push(() => server?.stop() ?? Promise.resolve());
    const connection = await Connection.connect({ address: server.address });
    cleanups.push(() => connection.close());
    const client = new Client({ connection });

    const groups: GroupState[] = [];
    for (let n = 0; n < options.namespaces; n++) {
      for (let g = 0; g < options.groupsPerNamespace; g++)
        groups.push({ ns: `soak-${n}`, group: `group-${g}`, written: [], nextSeq: 1, busy: false });
    }
    const addSegment = async (state: GroupState) => {
      const records = makeRecords(random, state, options.recordsPerSegment);
      await writeInputSegment(writer, { namespaceId: state.ns, group: state.group }, records);
      state.written.push(records);
    };
    for (const state of groups) for (let i = 0; i < 2; i++) await addSegment(state);

    // No store probe at each (re)start: the scripted 409s below wait for the next CAS, and a probe would take
    // them from the jobs they are meant for (and exit its worker on them); store-probe.test.ts covers the probe.
    const environment = {
      ...workerEnvironment(
        { temporalAddress: server.address, s3: { ...minio, endpoint: proxy.endpoint }, bucket, taskQueue },
        settings,
      ),
      COMPACTION_STORE_CHECK: 'skip',
    };
    const pool = new WorkerPool(options.workers, environment, options.workDir, log);
    cleanups.push(() => pool.stop());
    pool.startAll();
    await ensureGcSchedule(client, { every: options.gcEveryMs, scheduleId, taskQueue, catchupWindow: '1 minute' });

    // Chaos: faults by probability, 409s by script, worker kills and server restarts on a seeded schedule.
    const chaosEnds = startedAt + options.durationMs;
    const rate = options.faultRate;
    proxy.setPlan({
      seed: options.seed,
      probabilities: {
        delay: rate * 0.4,
        error500: rate * 0.15,
        error503: rate * 0.15,
        lostResponse: rate * 0.2,
        timeout: rate * 0.1,
      },
      delayMs: Math.floor(timing.operationDeadlineMs / 4),
      timeoutMs: timing.operationDeadlineMs + 500,
    });
    const chaosOver = () => Date.now() >= chaosEnds;
    const untilChaosOver = async (firstAtMs: number, meanGapMs: number, act: () => Promise<void> | void) => {
      let at = startedAt + firstAtMs;
      while (at < chaosEnds) {
        await sleep(Math.max(0, at - Date.now()));
        if (chaosOver()) return;
        await act();
        at = Date.now() + random.gap(meanGapMs);
      }
    };
    let serverRestarts = 0;
    let unpaused = 0;
    const restartServer = async () => {
      log(`restarting the Temporal dev server (${serverRestarts + 1})`);
      await server?.stop();
      server = undefined;
      await sleep(random.between(0, 3000));
      for (let attempt = 1; ; attempt++) {
        try {
          server = await startTemporalDevServer(serverOptions);
          break;
        } catch (err) {
          if (attempt >= 5) throw err;
          log(`dev server did not come back (${(err as Error).message.split('\n')[0]}); retrying`);
          await sleep(2000);
        }
      }
      serverRestarts++;
    };
    const chaos = Promise.all([
      untilChaosOver(random.between(0.1, 0.4) * options.durationMs, options.killEveryMs, () => pool.killOne(random)),
      untilChaosOver(random.between(0.3, 0.7) * options.durationMs, options.restartEveryMs, restartServer),
      untilChaosOver(random.gap(options.unitMs * 3), options.unitMs * 3, () => {
        proxy.script('conflict409', random.next() < 0.8 ? s3Requests.compareAndSwap : s3Requests.createIfAbsent);
      }),
    ]);

    // A pass that fails (faults exhausted its retries) pauses the schedule; the soak notes it and unpauses.
    let watching = true;
    const watcher = (async () => {
      while (watching) {
        await sleep(2000);
        try {
          const description = await client.schedule.getHandle(scheduleId).describe();
          if (description.state.paused && watching) {
            log(`collector schedule paused (${description.state.note ?? 'no note'}); unpausing`);
            await unpauseGcSchedule(client, 'soak: continue after a failed pass', { scheduleId });
            unpaused++;
          }
        } catch {
          // The server is restarting.
        }
      }
    })();

    // Jobs: each on a free group, after one or two new input segments; sometimes a segment arrives while it runs.
    const results: CompactionResult[] = [];
    let started = 0;
    let failed = 0;
    let unfinished = 0;
    const jobsDeadline = () => Math.max(chaosEnds, Date.now()) + options.settleTimeoutMs;
    const runJob = async (state: GroupState) => {
      try {
        for (let i = 0, n = 1 + random.int(2); i < n; i++) await addSegment(state);
        const handle = await persist(jobsDeadline(), () =>
          startCompaction(client, { namespaceId: state.ns, group: state.group, taskQueue }),
        );
        const meanwhile =
          random.next() < 0.3
            ? sleep(random.between(0, 4 * options.unitMs)).then(() => addSegment(state))
            : Promise.resolve();
        try {
          results.push(await persist(jobsDeadline(), () => handle.result()));
        } catch (err) {
          if (err instanceof WorkflowFailedError) {
            failed++;
            log(`job on ${state.ns}/${state.group} failed: ${err.cause?.message ?? err.message}`);
          } else {
            unfinished++;
            log(`job on ${state.ns}/${state.group} did not finish: ${(err as Error).message}`);
          }
        }
        await meanwhile;
      } finally {
        state.busy = false;
      }
    };
    const running = new Set<Promise<void>>();
    const launchEveryMs = (0.8 * options.durationMs) / options.jobs;
    const progress = setInterval(() => {
      log(
        `${Math.round((Date.now() - startedAt) / 1000)} s: ${started} jobs started, ${results.length} done, ${failed} failed; ${pool.kills} kills, ${serverRestarts} restarts, ${pool.live} workers up; faults ${JSON.stringify(proxy.injected)}`,
      );
    }, 15_000);
    cleanups.push(async () => clearInterval(progress));
    while (started < options.jobs) {
      await sleep(Math.max(0, startedAt + started * launchEveryMs - Date.now()));
      while (running.size >= options.concurrency || !groups.some((g) => !g.busy)) await Promise.race(running);
      const state = random.pick(groups.filter((g) => !g.busy));
      state.busy = true;
      started++;
      const job = runJob(state).finally(() => running.delete(job));
      running.add(job);
    }
    await chaos;
    proxy.setPlan({});
    const chaosMs = Date.now() - startedAt;
    log(`chaos over after ${Math.round(chaosMs / 1000)} s; faults off, waiting for ${running.size} jobs`);
    await Promise.all(running);
    const jobsDoneAt = Date.now();

    // Settle: the collector runs on, without faults, for two staging-grace periods after the last job.
    const settledAfter = jobsDoneAt + 2 * timing.stagingGraceMs;
    log(`jobs done; the collector runs until a clean pass with a clock after ${new Date(settledAfter).toISOString()}`);
    let settledPassClockMs: number | undefined;
    const settleDeadline = Date.now() + options.settleTimeoutMs;
    while (settledPassClockMs === undefined && Date.now() < settleDeadline) {
      await sleep(options.gcEveryMs);
      settledPassClockMs = await persist(settleDeadline, () => latestCleanPassClock(client, settledAfter));
    }
    if (settledPassClockMs === undefined)
      incomplete.push(
        `no clean collector pass with a clock after ${new Date(settledAfter).toISOString()} within ${options.settleTimeoutMs} ms`,
      );
    watching = false;
    await watcher;
    await pauseGcSchedule(client, 'soak: audit', { scheduleId });
    await waitForRunningPasses(client);
    const gcPasses = { ...(await countPasses(client)), unpaused, settledPassClockMs };
    await pool.stop();
    const settleMs = Date.now() - jobsDoneAt;

    log('auditing the bucket history');
    const published = results.filter((r) => r.outcome === 'published');
    const audit = await auditBucket({
      client: s3,
      bucket,
      timing,
      settledPassClockMs,
      published,
      groups: groups.map((g) => ({ namespaceId: g.ns, group: g.group, written: g.written })),
    });
    if (unfinished > 0) incomplete.push(`${unfinished} jobs did not finish`);
    const { violations, ...auditCounts } = audit;
    return {
      seed: options.seed,
      options: recorded,
      machine: { ...machine(), loadavgStart, loadavgEnd: loadavg() },
      durationMs: { total: Date.now() - startedAt, chaos: chaosMs, settle: settleMs },
      jobs: {
        started,
        published: published.length,
        unchanged: results.filter((r) => r.outcome === 'unchanged').length,
        fencedAndRerun: results.reduce((n, r) => n + r.fencedJobIds.length, 0),
        endedFenced: results.filter((r) => r.outcome === 'fenced').length,
        abandoned: results.filter((r) => r.outcome === 'abandoned').length,
        superseded: results.filter((r) => r.outcome === 'superseded').length,
        failed,
        unfinished,
      },
      faults: Object.fromEntries(FAULT_KINDS.map((k) => [k, proxy.injected[k]])) as Record<FaultKind, number>,
      s3Requests: proxy.requests,
      workerKills: pool.kills,
      workerExits: pool.exits,
      serverRestarts,
      gcPasses,
      audit: auditCounts,
      violations,
      incomplete,
    };
  } finally {
    for (const cleanup of cleanups.reverse()) await cleanup().catch((err: unknown) => log(`cleanup: ${String(err)}`));
  }
}

const GC_PASSES = "WorkflowType = 'gcWorkflow'";

/** The clock of the latest pass that completed cleanly with a clock at or after `after`, if any. */
async function latestCleanPassClock(client: Client, after: number): Promise<number | undefined> {
  let latest: number | undefined;
  for await (const execution of client.workflow.list({
    query: `${GC_PASSES} AND ExecutionStatus = 'Completed' AND StartTime >= '${new Date(after).toISOString()}'`,
  })) {
    const report = await client.workflow
      .getHandle<() => Promise<GcReport>>(execution.workflowId, execution.runId)
      .result();
    if (report.nowMs >= after && (latest === undefined || report.nowMs > latest)) latest = report.nowMs;
  }
  return latest;
}

async function waitForRunningPasses(client: Client): Promise<void> {
  for await (const execution of client.workflow.list({ query: `${GC_PASSES} AND ExecutionStatus = 'Running'` })) {
    await client.workflow
      .getHandle(execution.workflowId, execution.runId)
      .result()
      .catch(() => undefined);
  }
}

/** Passes by how they ended; a pass that continued as new counts once, by its last run. */
async function countPasses(client: Client): Promise<{ completed: number; failed: number; other: number }> {
  const counts = { completed: 0, failed: 0, other: 0 };
  for await (const execution of client.workflow.list({ query: GC_PASSES })) {
    const status = execution.status.name;
    if (status === 'COMPLETED') counts.completed++;
    else if (status === 'FAILED') counts.failed++;
    else if (status !== 'CONTINUED_AS_NEW') counts.other++;
  }
  return counts;
}
