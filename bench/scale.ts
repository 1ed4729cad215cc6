/**
 * Scale benchmark, on a MinIO and Temporal dev servers started here, with worker processes
 * configured by the environment and running the test compactor (jobs hold their lease and wait):
 *  1. concurrent leases: N jobs on one worker at a shrunk refresh interval — worker CPU and RSS
 *     (/proc), Temporal heartbeat RPCs/s (the SDK's request counter), S3 PUTs/s (MinIO's own
 *     request counter), refresh latency p50/p99 (the package's histogram), false fences (the fence
 *     counter, fenced runs in Temporal, and a collector pass over every job at the end);
 *  2. horizontal scale: the same N over 2 and 3 worker processes on one task queue, per worker;
 *  3. request cost: S3 requests and billable Temporal actions (heartbeat RPCs plus the actions in
 *     the jobs' histories) per lease-hour at the default timings in steady state, and per collector
 *     pass per job prefix (live, claimed, reclaimed, orphaned), from MinIO's counters;
 *  3a. actions per whole job: jobs of one hour at the default timings, every timing divided by one
 *     factor (so every cadence scales alike), from start to their published end;
 *  4. time to reclaim: a worker SIGKILLed mid-job, the collector on a Schedule, until the prefix is empty;
 *  5. bare floor (`--phases bare-floor`, not run by default): at each N of `--leases`, N activities that only
 *     heartbeat once per refresh interval and wait (no lease, no store) on a worker built alike, then N held
 *     leases; their RSS and its split side by side, and the slope per activity of each.
 * Run: `eval "$(scripts/provision.sh)" && npx tsx bench/scale.ts` (see --help).
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { cpus, loadavg, platform, release, totalmem } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client, Connection } from '@temporalio/client';
import { Command, InvalidArgumentError } from 'commander';
import { ensureGcSchedule, startCompaction } from '../src/client';
import {
  defaultHeartbeatTimeoutMs,
  defaultTimingDividedBy,
  resolveSettings,
  shrunkTiming,
  type CompactionSettings,
  type Timing,
} from '../src/config';
import {
  SEARCH_ATTRIBUTES,
  startMinio,
  startTemporalDevServer,
  type S3Server,
  type TemporalDevServer,
} from '../src/devservers';
import {
  jobPrefix,
  namespaceId,
  newJobId,
  newSegmentId,
  parseCompactionKey,
  stagedSegmentKey,
  type NamespaceId,
} from '../src/keys';
import { createJobLease } from '../src/protocol';
import type { ObjectStore } from '../src/store';
import { inBatches } from '../src/store/batches';
import type { GcReport } from '../src/workflows/gc';
import { actionTotal, billableTotal, describeActions, jobActions } from './support/actions';
import {
  createBucket,
  GROUPS_PER_NAMESPACE,
  seedJobs,
  spawnScaleWorker,
  type Bucket,
  type JobSpec,
  type WorkerProcess,
} from './support/fleet';
import { describeHeap } from './support/heap-snapshot';
import { describeMappings, residentByMapping } from './support/smaps';
import { machineCpuSeconds, pidsWithArgs, totalCpuSeconds } from './support/proc';
import { describeRequests, minioRequests, requestDelta } from './support/minio-requests';
import { histogramBuckets, quantile, total, type Sample } from './support/prometheus';

const list = (raw: string): number[] =>
  raw.split(',').map((s) => {
    const n = Number(s);
    if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError(`${s} is not a positive whole number`);
    return n;
  });
const whole = (raw: string): number => list(raw)[0]!;

const program = new Command('scale')
  .option('--leases <n,…>', 'concurrent jobs on one worker', list, [100, 1000, 10000])
  .option(
    '--workers <k,…>',
    'worker processes sharing the largest N (horizontal scale); none: skip',
    (raw) => (raw === 'none' ? [] : list(raw)),
    [2, 3],
  )
  .option('--horizontal-leases <n>', 'N for the horizontal points (default: the largest --leases)', whole)
  .option('--refresh-ms <ms>', 'shrunk lease refresh interval of the concurrency points', whole, 60_000)
  .option(
    '--heartbeat-timeout-ms <ms>',
    'Temporal heartbeat timeout of the long activities (default: derived from the refresh interval)',
    whole,
  )
  .option('--window-intervals <k>', 'measurement window in refresh intervals', whole, 2)
  .option('--sdk-defaults', 'run the workers with the SDK default slots instead of createWorker’s (evidence for them)')
  .option(
    '--max-cached-workflows <n>',
    "the workers' sticky workflow cache (default: createWorker's, COMPACTION_WORKER_CACHED_WORKFLOWS)",
    whole,
  )
  .option(
    '--heap-snapshot-dir <dir>',
    "after each single-worker point's window, the worker's heap snapshot written here and summed by constructor",
  )
  .option(
    '--worker-options <json>',
    "worker options over createWorker's for every concurrency point (e.g. '{\"maxHeartbeatThrottleInterval\":1000}')",
    (raw) => JSON.parse(raw) as Record<string, unknown>,
  )
  .option(
    '--worker-node-options <flags>',
    "node and V8 flags of the worker processes, over createWorker's (e.g. '--max-semi-space-size=4')",
    (raw) => raw.split(' ').filter(Boolean),
  )
  .option(
    '--built [dir]',
    "the workers run the package's build (default lib/: `npm run build` first), as a user installs it",
  )
  .option('--no-gc-check', 'skip the collector pass over every job after a window')
  .option('--phases <p,…>', 'scale, cost, actions, gc-cost, reclaim; bare-floor', (raw) => raw.split(','), [
    'scale',
    'cost',
    'actions',
    'gc-cost',
    'reclaim',
  ])
  .option('--actions-jobs <n>', 'whole jobs of the actions phase', whole, 50)
  .option(
    '--actions-scale <f>',
    'the actions phase divides every default timing and the one-hour job by this',
    whole,
    60,
  )
  .option('--cost-leases <n>', 'jobs of the default-timing cost window', whole, 100)
  .option('--cost-window-s <s>', 'default-timing cost window (two refresh intervals: 600)', whole, 600)
  .option('--reclaim-trials <n>', 'dead jobs timed one after another', whole, 3)
  .option('--gc-every-s <s>', 'collector schedule period of the reclaim phase', whole, 5);
type Options = {
  leases: number[];
  workers: number[];
  horizontalLeases?: number;
  refreshMs: number;
  heartbeatTimeoutMs?: number;
  windowIntervals: number;
  actionsJobs: number;
  actionsScale: number;
  sdkDefaults?: boolean;
  maxCachedWorkflows?: number;
  workerOptions?: Record<string, unknown>;
  workerNodeOptions?: string[];
  built?: string | true;
  heapSnapshotDir?: string;
  gcCheck: boolean;
  phases: string[];
  costLeases: number;
  costWindowS: number;
  reclaimTrials: number;
  gcEveryS: number;
};

/** Other work on this shared machine skews every figure: the load average is printed at the start and end of each. */
const load = (): string =>
  `loadavg ${loadavg()
    .map((l) => l.toFixed(2))
    .join(' ')}`;
const stamp = (): string => new Date().toISOString().slice(11, 19);
const log = (line: string): void => console.log(`[${stamp()}] ${line}`);
const perSecond = (n: number, ms: number): string => ((n / ms) * 1000).toFixed(1);

function firstLine(cmd: string, args: string[]): string {
  try {
    return execFileSync(cmd, args, { encoding: 'utf8' }).split('\n')[0]!.trim();
  } catch {
    return 'unknown';
  }
}

function printMachine(): void {
  const cpu = cpus();
  console.log(
    `machine: ${cpu.length} × ${cpu[0]?.model}, ${(totalmem() / 2 ** 30).toFixed(0)} GiB, ${platform()} ${release()}, node ${process.version}, ${load()}`,
  );
  console.log(
    `temporal: ${firstLine(process.env.TEMPORAL_CLI ?? 'temporal', ['--version'])}; minio: ${firstLine(process.env.MINIO_BIN ?? 'minio', ['--version'])}`,
  );
  const sdk = JSON.parse(readFileSync(require.resolve('@temporalio/worker/package.json'), 'utf8')) as {
    version: string;
  };
  console.log(`sdk: @temporalio/worker ${sdk.version}`);
}

/** The servers of one measurement; Temporal is fresh per point so no earlier point's jobs load it. */
interface Servers {
  readonly minio: S3Server;
  readonly minioPids: number[];
  readonly temporal: TemporalDevServer;
  readonly temporalPids: number[];
  /** host:port of the Temporal frontend, for worker processes. */
  readonly address: string;
  readonly client: Client;
}

async function withTemporal<T>(minio: S3Server, work: (servers: Servers) => Promise<T>): Promise<T> {
  const temporal = await startTemporalDevServer({ uiPort: 'none', searchAttributes: SEARCH_ATTRIBUTES });
  const connection = await Connection.connect({ address: temporal.address });
  const port = temporal.address.split(':')[1]!;
  const servers: Servers = {
    minio,
    minioPids: pidsWithArgs('--address', new URL(minio.endpoint).host),
    temporal,
    temporalPids: pidsWithArgs('--port', port),
    address: temporal.address,
    client: new Client({ connection }),
  };
  try {
    return await work(servers);
  } finally {
    await connection.close();
    await temporal.stop();
  }
}

async function startJobs(client: Client, jobs: readonly JobSpec[], taskQueue: string): Promise<void> {
  await inBatches(jobs, 1, 32, ([job]) => startCompaction(client, { ...job!, taskQueue }));
}

const sumOver = async (workers: readonly WorkerProcess[], read: (s: Sample[]) => number): Promise<number[]> =>
  Promise.all(workers.map(async (w) => read(await w.scrape())));

const refreshes = (s: Sample[]) => total(s, 'compaction_lease_refreshes');
const fences = (s: Sample[]) => total(s, 'compaction_lease_fences');
const heartbeatRpcs = (s: Sample[]) => total(s, 'temporal_request', { operation: 'RecordActivityTaskHeartbeat' });
const activitySlotsUsed = (s: Sample[]) =>
  total(s, 'temporal_worker_task_slots_used', { worker_type: 'ActivityWorker' });
/**
 * The sticky workflow cache: a workflow task for a workflow not in it replays the whole history, fetched from the
 * server.
 */
const describeCache = (s: Sample[]) =>
  `workflow cache ${total(s, 'temporal_sticky_cache_size')} (misses ${total(s, 'temporal_sticky_cache_miss')}, ` +
  `forced evictions ${total(s, 'temporal_sticky_cache_total_forced_eviction')})`;

/** What a concurrency point's worker holds: jobs with their leases, or the bare floor's heartbeating activities. */
type Held = 'lease' | 'bare';

/** A worker's memory by where it is, at one moment. */
interface PointMemory {
  readonly rss: number;
  readonly heapTotal: number;
  readonly external: number;
  readonly threadHeaps: number;
  readonly load: string;
}

/** What is outside every JavaScript heap: the SDK's core, code, the allocator's keep. */
const outsideHeaps = (m: PointMemory): number => m.rss - m.heapTotal - m.external - m.threadHeaps;

interface PointResult {
  readonly n: number;
  readonly kind: Held;
  /** Activities held through the window (the fewest activity slots in use seen): N once the ramp completed. */
  readonly holding: number;
  /** Of the single-worker points. */
  readonly memory?: PointMemory;
}

/** Waits until `done` holds, checking every second; false once `timeoutMs` has passed. */
async function waitFor(done: () => Promise<boolean>, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await done()) return true;
    await sleep(1000);
  }
  return false;
}

/**
 * The concurrency points' settings: shrunk timings at `--refresh-ms`, the heartbeat timeout as set, else derived
 * from the shrunk timings as the default is (the expiry then covers it: shrunkTiming is given that timeout).
 */
function pointSettings(opts: Options): CompactionSettings {
  // The shrunk refresh interval and deadline do not depend on the heartbeat timeout shrunkTiming is given.
  const heartbeatTimeoutMs = opts.heartbeatTimeoutMs ?? defaultHeartbeatTimeoutMs(shrunkTiming(opts.refreshMs, 1000));
  return resolveSettings({ timing: shrunkTiming(opts.refreshMs, heartbeatTimeoutMs), heartbeatTimeoutMs });
}

/**
 * One concurrency point: N jobs over `workerCount` worker processes; everything measured over one window in steady
 * state.
 */
async function runPoint(
  opts: Options,
  minio: S3Server,
  bucket: Bucket,
  n: number,
  workerCount: number,
  index: number,
  kind: Held = 'lease',
): Promise<PointResult> {
  return withTemporal(minio, async ({ client, address, minioPids, temporalPids }) => {
    const settings = pointSettings(opts);
    const bare = kind === 'bare';
    const taskQueue = `scale-${index}`;
    const jobs = bare ? [] : await seedJobs(bucket.store, `p${index}`, n);
    const workerOptions = {
      ...(opts.sdkDefaults ? { maxConcurrentActivityTaskExecutions: 100 } : {}),
      ...(opts.maxCachedWorkflows ? { maxCachedWorkflows: opts.maxCachedWorkflows } : {}),
      ...opts.workerOptions,
    };
    const dir = opts.heapSnapshotDir;
    const snapshotOf = dir && ((k: number) => join(resolve(dir), `${bare ? 'bare-' : ''}w${k + 1}-${n}.heapsnapshot`));
    const workers = await Promise.all(
      Array.from({ length: workerCount }, (_, k) =>
        spawnScaleWorker({
          temporalAddress: address,
          bucket,
          taskQueue,
          settings,
          name: `w${k + 1}`,
          workerOptions,
          nodeOptions: opts.workerNodeOptions,
          ...(opts.built && { built: resolve(opts.built === true ? 'lib' : opts.built) }),
          bare,
          ...(snapshotOf && { heapSnapshot: snapshotOf(k) }),
        }),
      ),
    );
    try {
      const rampStart = performance.now();
      log(`point ${n} × ${workerCount}: starting ${n} ${bare ? 'bare activities' : 'jobs'}, ${load()}`);
      if (bare) await startBareHolds(client, n, taskQueue, settings);
      else await startJobs(client, jobs, taskQueue);
      const started = performance.now() - rampStart;
      // Steady state: every job holds its activity slot (the work with its lease keeper beside it), and then as many
      // refreshes as jobs have landed (a keeper's first refresh is jittered into the interval's second half); a bare
      // activity's first heartbeat comes one refresh interval after its start.
      const beaten = bare ? heartbeatRpcs : refreshes;
      // A 2-core machine takes about 8-12 jobs a second into their compacting phase (each a workflow task, a local
      // activity and three activities before its lease is held).
      const rampTimeout = 3 * opts.refreshMs + n * 100 + 30_000;
      const sumOf = async (read: (s: Sample[]) => number) => (await sumOver(workers, read)).reduce((a, b) => a + b, 0);
      let nextReport = performance.now() + 60_000;
      const allHeld = await waitFor(async () => {
        const samples = (await Promise.all(workers.map((w) => w.scrape()))).flat();
        if (performance.now() >= nextReport) {
          nextReport += 60_000;
          log(
            `  ramp: ~${activitySlotsUsed(samples)} jobs in their compacting phase; ${describeCache(samples)}; ${load()}`,
          );
        }
        return activitySlotsUsed(samples) >= n;
      }, rampTimeout);
      const beatenAtHeld = await sumOf(beaten);
      const steady =
        allHeld && (await waitFor(async () => (await sumOf(beaten)) - beatenAtHeld >= n, 2 * opts.refreshMs));
      const rampMs = performance.now() - rampStart;
      log(
        `  ${n} started in ${(started / 1000).toFixed(1)} s; ${steady ? 'steady' : 'NOT steady'} after ${(rampMs / 1000).toFixed(1)} s`,
      );

      const windowMs = opts.windowIntervals * opts.refreshMs;
      const loadBefore = load();
      const before = await Promise.all(workers.map((w) => w.scrape()));
      const minioBefore = await minioRequests(minio);
      const cpuBefore = {
        workers: workers.map((w) => w.cpuSeconds()),
        temporal: totalCpuSeconds(temporalPids),
        minio: totalCpuSeconds(minioPids),
        machine: machineCpuSeconds(),
      };
      const windowStart = performance.now();
      const rssPeak = workers.map(() => 0);
      const slotsSeen: number[][] = workers.map(() => []);
      while (performance.now() - windowStart < windowMs) {
        await sleep(Math.min(5000, windowMs - (performance.now() - windowStart)));
        workers.forEach((w, k) => (rssPeak[k] = Math.max(rssPeak[k]!, w.rssBytes())));
        (await sumOver(workers, activitySlotsUsed)).forEach((used, k) => slotsSeen[k]!.push(used));
      }
      const elapsed = performance.now() - windowStart;
      const after = await Promise.all(workers.map((w) => w.scrape()));
      const minioDelta = requestDelta(await minioRequests(minio), minioBefore);
      const machine = machineCpuSeconds();
      const cpu = {
        workers: workers.map((w, k) => w.cpuSeconds() - cpuBefore.workers[k]!),
        temporal: totalCpuSeconds(temporalPids) - cpuBefore.temporal,
        minio: totalCpuSeconds(minioPids) - cpuBefore.minio,
        machine: (machine.busy - cpuBefore.machine.busy) / (machine.total - cpuBefore.machine.total),
      };
      const delta = (read: (s: Sample[]) => number) => workers.map((_, k) => read(after[k]!) - read(before[k]!));
      const latency = histogramBuckets(after.flat(), before.flat(), 'compaction_lease_refresh_latency');
      const pct = (seconds: number) => `${((seconds / (elapsed / 1000)) * 100).toFixed(0)}%`;
      const refreshesPerWorker = delta(refreshes);
      const held = slotsSeen.map((s) => Math.min(...s));
      const perWorker = workers
        .map(
          (w, k) =>
            `${w.name}: ~${held[k]} leases held (activity slots), ${refreshesPerWorker[k]} refreshes, CPU ${pct(cpu.workers[k]!)}, RSS ${(rssPeak[k]! / 2 ** 20).toFixed(0)} MiB`,
        )
        .join('; ');

      let gcLine = steady ? 'collector check skipped' : 'collector check skipped: not every job held its lease';
      // A worker whose activity slots are all taken by lease keepers cannot run a collector pass: skipped then.
      if (opts.gcCheck && steady && !bare) {
        const namespaces = [...new Set(jobs.map((j) => j.namespaceId))];
        const report = await client.workflow.execute<
          (input: { namespaces: string[]; namespaceConcurrency: number }) => Promise<GcReport>
        >('gcWorkflow', {
          taskQueue,
          workflowId: `gc-check-${index}`,
          workflowExecutionTimeout: '15 minutes',
          args: [{ namespaces, namespaceConcurrency: 8 }],
        });
        gcLine = `collector pass after the window: ${report.totals.prefixesSeen} prefixes, ${report.totals.live} live, ${report.totals.claimed} claimed`;
      }
      const fencedRuns = (
        await client.workflow.count(
          `TaskQueue="${taskQueue}" AND WorkflowType="compactionWorkflow" AND ExecutionStatus!="Running"`,
        )
      ).count;
      const fenceCount = (await sumOver(workers, fences)).reduce((a, b) => a + b, 0);
      const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
      const leaseLines = [
        `  S3 (MinIO's count): PUT ${perSecond(minioDelta.get('putobject') ?? 0, elapsed)}/s, GET ${perSecond(minioDelta.get('getobject') ?? 0, elapsed)}/s; all: ${describeRequests(minioDelta)}`,
        `  refresh latency p50 ${quantile(latency, 0.5).toFixed(0)} ms, p99 ${quantile(latency, 0.99).toFixed(0)} ms (histogram buckets ${latency
          .map(([b]) => b)
          .filter(Number.isFinite)
          .join(',')})`,
        `  false fences: ${fenceCount} fence(s) counted, ${fencedRuns} compaction run(s) closed; ${gcLine}`,
      ];
      const line = [
        `N=${n}${bare ? ' bare activities' : ''} on ${workerCount} worker${workerCount > 1 ? 's' : ''}, refresh ${opts.refreshMs / 1000} s, heartbeat timeout ${settings.heartbeatTimeoutMs / 1000} s: ` +
          `ramp ${(rampMs / 1000).toFixed(0)} s (${steady ? 'every job refreshed' : 'NOT every job refreshed'}), window ${(elapsed / 1000).toFixed(0)} s`,
        `  load: ${loadBefore} → ${load()}; machine CPU ${(cpu.machine * 100).toFixed(0)}% busy; Temporal ${pct(cpu.temporal)}, MinIO ${pct(cpu.minio)} (of one core)`,
        `  workers: CPU ${pct(sum(cpu.workers))} (of one core), RSS ${(sum(rssPeak) / 2 ** 20).toFixed(0)} MiB peak; leases held ~${sum(held)}`,
        `  Temporal heartbeat RPCs ${perSecond(sum(delta(heartbeatRpcs)), elapsed)}/s; refreshes ${perSecond(sum(refreshesPerWorker), elapsed)}/s (expected N/interval = ${(n / (opts.refreshMs / 1000)).toFixed(1)}/s)`,
        `  ${describeCache(after.flat())} at the end of the window`,
        ...(bare ? [] : leaseLines),
        ...(workerCount > 1 ? [`  per worker: ${perWorker}`] : [`  ${perWorker}`]),
      ].join('\n');
      console.log(line);
      if (workerCount > 1) return { n, kind, holding: sum(held) };
      const memory = await workerMemory(workers[0]!);
      console.log(describeMemory(workers[0]!.name, memory));
      if (snapshotOf) console.log(describeHeap(snapshotOf(0), 30, n));
      return { n, kind, holding: sum(held), memory };
    } finally {
      await Promise.all(workers.map((w) => w.stop('SIGKILL')));
    }
  });
}

const mib = (b: number) => `${(b / 2 ** 20).toFixed(0)} MiB`;

/**
 * The worker's memory by where it is: RSS read by the kernel, then the main thread's heap and external memory and each
 * workflow thread's heap as the worker reports them (after its heap snapshot, if it writes one, has collected garbage).
 */
async function workerMemory(worker: WorkerProcess): Promise<PointMemory & { detail: string }> {
  // Read first: writing a heap snapshot takes hundreds of MiB of RSS (seen: 407 → 727 MiB at 1,000 bare activities).
  const rss = worker.rssBytes();
  const mappings = residentByMapping(worker.pid);
  const { main, spaces, threads } = await worker.reportMemory();
  return {
    rss,
    heapTotal: main.heapTotal,
    external: main.external,
    threadHeaps: threads.reduce((sum, t) => sum + t.total_physical_size, 0),
    load: load(),
    detail:
      `heap used ${mib(main.heapUsed)}, array buffers ${mib(main.arrayBuffers)}; workflow threads: ` +
      threads.map((t) => `${mib(t.used_heap_size)} used of ${mib(t.total_physical_size)}`).join(', ') +
      `; main heap by space, used of resident: ${spaces
        .filter((space) => space.physical_space_size >= 2 ** 20)
        .map((space) => `${space.space_name} ${mib(space.space_used_size)} of ${mib(space.physical_space_size)}`)
        .join(', ')}` +
      `; resident by mapping: ${describeMappings(mappings)}`,
  };
}

const describeMemory = (name: string, m: PointMemory & { detail: string }): string =>
  `  memory of ${name}: RSS ${mib(m.rss)}; main thread heap ${mib(m.heapTotal)}, external ${mib(m.external)}; workflow threads' heaps ${mib(m.threadHeaps)}; ` +
  `the rest (the SDK's core, code, allocator) ${mib(outsideHeaps(m))} (${m.detail}), ${m.load}`;

/**
 * N bare activities beside N held leases, and the cost of one more of each: the slope between consecutive points by
 * the activities held (N, unless a ramp fell short), where the worker's fixed cost cancels (and the workflow cache's,
 * once both are past its size).
 */
function describeFloor(points: readonly PointResult[]): string {
  const parts: [string, (m: PointMemory) => number][] = [
    ['RSS', (m) => m.rss],
    ['main heap', (m) => m.heapTotal],
    ['external', (m) => m.external],
    ['workflow threads', (m) => m.threadHeaps],
    ['outside every heap', outsideHeaps],
  ];
  const of = (kind: Held) => points.filter((p) => p.kind === kind && p.memory);
  const lines = ['bare floor beside held leases (one worker), MiB:'];
  for (const held of ['bare', 'lease'] as const) {
    for (const p of of(held))
      lines.push(
        `  ${held.padEnd(5)} N=${String(p.n).padStart(6)}, held ${String(p.holding).padStart(6)}: ${parts.map(([name, read]) => `${name} ${(read(p.memory!) / 2 ** 20).toFixed(0)}`).join(', ')}; ${p.memory!.load}`,
      );
  }
  lines.push('per activity between consecutive N, KiB:');
  for (const held of ['bare', 'lease'] as const) {
    const rows = of(held);
    for (let i = 1; i < rows.length; i++) {
      const [a, b] = [rows[i - 1]!, rows[i]!];
      const slope = (read: (m: PointMemory) => number) =>
        ((read(b.memory!) - read(a.memory!)) / (b.holding - a.holding) / 1024).toFixed(1);
      lines.push(
        `  ${held.padEnd(5)} ${a.holding}→${b.holding}: ${parts.map(([name, read]) => `${name} ${slope(read)}`).join(', ')}`,
      );
    }
  }
  return lines.join('\n');
}

/** N runs of the bare floor's workflow, each holding one activity that only heartbeats and waits. */
async function startBareHolds(
  client: Client,
  n: number,
  taskQueue: string,
  settings: CompactionSettings,
): Promise<void> {
  const activitySettings = {
    heartbeatTimeoutMs: settings.heartbeatTimeoutMs,
    operationDeadlineMs: settings.timing.operationDeadlineMs,
  };
  await inBatches(
    Array.from({ length: n }, (_, i) => i),
    1,
    32,
    ([i]) =>
      client.workflow.start('bareHoldWorkflow', {
        taskQueue,
        workflowId: `${taskQueue}-bare-${i}`,
        args: [activitySettings],
      }),
  );
}

/** The bare-floor phase: at each N, the bare activities, then the held leases, each on a fresh worker and Temporal. */
async function bareFloor(opts: Options, minio: S3Server, bucket: Bucket): Promise<void> {
  const points: PointResult[] = [];
  for (const [i, n] of opts.leases.entries()) {
    for (const [k, held] of (['bare', 'lease'] as const).entries())
      points.push(await runPoint(opts, minio, bucket, n, 1, 1000 + 2 * i + k, held));
  }
  console.log(describeFloor(points));
}

/**
 * S3 requests and billable Temporal actions per lease-hour at the default timings: N jobs in steady
 * state over a window of whole refresh intervals, real time (no timing shrunk).
 */
async function requestCost(opts: Options, minio: S3Server, bucket: Bucket): Promise<void> {
  await withTemporal(minio, async ({ client, address }) => {
    const settings = resolveSettings();
    const n = opts.costLeases;
    const jobs = await seedJobs(bucket.store, 'cost', n);
    const [worker] = [
      await spawnScaleWorker({ temporalAddress: address, bucket, taskQueue: 'cost', settings, name: 'cost' }),
    ];
    try {
      await startJobs(client, jobs, 'cost');
      // Every lease exists: from here on only the keepers write.
      await waitFor(async () => (await countLeases(bucket.store, jobs)) >= n, 120_000);
      log(
        `cost: ${n} leases at default timings (refresh ${settings.timing.leaseRefreshIntervalMs / 1000} s, heartbeat timeout ${settings.heartbeatTimeoutMs / 1000} s); window ${opts.costWindowS} s, ${load()}`,
      );
      const before = await minioRequests(minio);
      const refreshesBefore = refreshes(await worker!.scrape());
      const hbBefore = heartbeatRpcs(await worker!.scrape());
      const windowFrom = Date.now();
      await sleep(opts.costWindowS * 1000);
      const windowTo = Date.now();
      const delta = requestDelta(await minioRequests(minio), before);
      const metrics = await worker!.scrape();
      const refreshCount = refreshes(metrics) - refreshesBefore;
      const leaseHours = (n * opts.costWindowS) / 3600;
      const puts = delta.get('putobject') ?? 0;
      const heartbeats = heartbeatRpcs(metrics) - hbBefore;
      const history = await jobActions(client, jobs, windowFrom, windowTo);
      console.log(
        `request cost at default timings: ${n} leases × ${opts.costWindowS} s = ${leaseHours.toFixed(2)} lease-hours, ${load()}\n` +
          `  S3 requests (MinIO's count): ${describeRequests(delta)}\n` +
          `  ${(puts / leaseHours).toFixed(2)} PUT and ${((delta.get('getobject') ?? 0) / leaseHours).toFixed(2)} GET per lease-hour ` +
          `(one PUT per refresh: ${(3600_000 / settings.timing.leaseRefreshIntervalMs).toFixed(0)}); ${refreshCount} refreshes counted by the worker, ${(puts / Math.max(refreshCount, 1)).toFixed(3)} PUT per refresh\n` +
          `  Temporal heartbeat RPCs: ${heartbeats} (the worker's counter), ${(heartbeats / leaseHours).toFixed(2)} per lease-hour\n` +
          `  history actions in the window (every job's history): ${describeActions(history)}\n` +
          `  actions per job-hour in steady state: billable ${((heartbeats + billableTotal(history)) / leaseHours).toFixed(2)}, all ${((heartbeats + actionTotal(history)) / leaseHours).toFixed(2)}`,
      );
    } finally {
      await worker!.stop('SIGKILL');
    }
  });
}

/**
 * Billable actions of whole one-hour jobs, start to publication: every default timing and the job's
 * hour divided by `--actions-scale` (the heartbeat timeout, derived from them, scales alike), so each
 * job refreshes, heartbeats and retries as an hour-long job at the defaults would, in an hour / scale.
 */
async function wholeJobActions(opts: Options, minio: S3Server, bucket: Bucket): Promise<void> {
  await withTemporal(minio, async ({ client, address }) => {
    const f = opts.actionsScale;
    const settings = resolveSettings({ timing: defaultTimingDividedBy(f) });
    const holdMs = 3600_000 / f;
    // Two inputs a group and an output a job: the jobs publish, as a group's compactions do; a namespace
    // each, so no job loses its root races to the others publishing in the same second.
    const jobs = await seedJobs(bucket.store, 'actions', opts.actionsJobs, {
      inputsPerGroup: 2,
      groupsPerNamespace: 1,
    });
    const worker = await spawnScaleWorker({
      temporalAddress: address,
      bucket,
      taskQueue: 'actions',
      settings,
      name: 'actions',
      holdMs,
      publish: true,
    });
    try {
      log(
        `actions: ${jobs.length} one-hour jobs at the default timings ÷ ${f} (refresh ${settings.timing.leaseRefreshIntervalMs} ms, ` +
          `deadline ${settings.timing.operationDeadlineMs} ms, heartbeat timeout ${settings.heartbeatTimeoutMs} ms, work ${holdMs} ms), ${load()}`,
      );
      const hbBefore = heartbeatRpcs(await worker.scrape());
      const handles = await Promise.all(jobs.map((job) => startCompaction(client, { ...job, taskQueue: 'actions' })));
      const outcomes = await Promise.all(handles.map((h) => h.result().then((r) => r.outcome)));
      const heartbeats = heartbeatRpcs(await worker.scrape()) - hbBefore;
      const history = await jobActions(client, jobs);
      const perJob = 1 / jobs.length;
      const byOutcome = [...new Set(outcomes)].map((o) => `${o} ${outcomes.filter((x) => x === o).length}`).join(', ');
      console.log(
        `actions per one-hour job (default timings ÷ ${f}, ${jobs.length} jobs: ${byOutcome}), ${load()}\n` +
          `  heartbeat RPCs ${(heartbeats * perJob).toFixed(2)} (the worker's counter); history: ${describeActions(history, perJob)}\n` +
          `  billable (Temporal Cloud) ${((heartbeats + billableTotal(history)) * perJob).toFixed(2)} per job; ` +
          `not billable (workflow tasks) ${(history['workflow tasks'] * perJob).toFixed(2)}; total ${((heartbeats + actionTotal(history)) * perJob).toFixed(2)}`,
      );
    } finally {
      await worker.stop('SIGKILL');
    }
  });
}

async function countLeases(store: ObjectStore, jobs: readonly JobSpec[]): Promise<number> {
  const namespaces = [...new Set(jobs.map((j) => j.namespaceId))];
  const counts = await Promise.all(
    namespaces.map((ns) =>
      countKeys(store, `namespaces/${ns}/metadata/compactions/`, (key) => parseCompactionKey(key).kind === 'lease'),
    ),
  );
  return counts.reduce((a, b) => a + b, 0);
}

async function countKeys(
  store: ObjectStore,
  prefix: string,
  keep: (key: string) => boolean = () => true,
): Promise<number> {
  let n = 0;
  for (let cursor: string | undefined, first = true; first || cursor !== undefined; first = false) {
    const page = await store.list({ prefix, cursor });
    n += page.objects.filter((o) => keep(o.key)).length;
    cursor = page.nextCursor;
  }
  return n;
}

/**
 * Short timings for collector passes: expiry 6.6 s, T 1 s, staging grace 7.6 s (every invariant kept with a 5 s
 * heartbeat timeout).
 */
const collectorTiming: Partial<Timing> = {
  leaseRefreshIntervalMs: 400,
  operationDeadlineMs: 200,
  publicationBudgetMs: 400,
  clockSafetyMarginMs: 400,
  leaseExpiryMs: 6600,
};
const collectorHeartbeatTimeoutMs = 5000;

type PrefixKind = 'live' | 'claimed' | 'reclaimed' | 'orphaned';

/**
 * Job prefixes of one kind in a fresh namespace: a live or expired lease, staged objects old enough to reclaim, or
 * both.
 */
async function stagePrefixes(
  store: ObjectStore,
  ns: NamespaceId,
  kind: PrefixKind,
  count: number,
  settings: CompactionSettings,
): Promise<void> {
  await inBatches(
    Array.from({ length: count }, () => newJobId()),
    1,
    16,
    async ([job]) => {
      if (kind === 'reclaimed' || kind === 'orphaned')
        await store.put(stagedSegmentKey(ns, job!, newSegmentId(), 'seg'), new Uint8Array([1]));
      if (kind === 'claimed' || kind === 'reclaimed') {
        await createJobLease(store, {
          namespaceId: ns,
          jobId: job!,
          ownerId: 'bench',
          startedAtMs: Date.now() - 10 * settings.timing.leaseExpiryMs,
        });
      }
    },
  );
  if (kind === 'reclaimed' || kind === 'orphaned') await sleep(settings.timing.stagingGraceMs + 500);
  if (kind === 'live') {
    await inBatches(
      Array.from({ length: count }, () => newJobId()),
      1,
      16,
      ([job]) => createJobLease(store, { namespaceId: ns, jobId: job!, ownerId: 'bench', startedAtMs: Date.now() }),
    );
  }
}

/**
 * S3 requests of one collector pass per job prefix of each kind: the difference of passes over two prefix counts, so
 * per-pass overhead cancels.
 */
async function gcPassCost(minio: S3Server, bucket: Bucket): Promise<void> {
  await withTemporal(minio, async ({ client, address }) => {
    const settings = resolveSettings({ timing: collectorTiming, heartbeatTimeoutMs: collectorHeartbeatTimeoutMs });
    const worker = await spawnScaleWorker({
      temporalAddress: address,
      bucket,
      taskQueue: 'gc-cost',
      settings,
      name: 'gc',
    });
    try {
      console.log(
        `collector pass cost (expiry ${settings.timing.leaseExpiryMs} ms, staging grace ${settings.timing.stagingGraceMs} ms), ${load()}`,
      );
      const sizes = [10, 50] as const;
      for (const kind of ['live', 'claimed', 'reclaimed', 'orphaned'] as const) {
        const perSize: Map<string, number>[] = [];
        for (const size of sizes) {
          const ns = namespaceId(`gc-${kind}-${size}`);
          await stagePrefixes(bucket.store, ns, kind, size, settings);
          const before = await minioRequests(minio);
          const report = await client.workflow.execute<(input: { namespaces: string[] }) => Promise<GcReport>>(
            'gcWorkflow',
            {
              taskQueue: 'gc-cost',
              workflowId: `gc-cost-${ns}`,
              args: [{ namespaces: [ns] }],
            },
          );
          const delta = requestDelta(await minioRequests(minio), before);
          perSize.push(delta);
          const t = report.totals;
          console.log(
            `  ${kind} × ${size}: ${describeRequests(delta)} (pass: live ${t.live}, claimed ${t.claimed}, orphaned ${t.orphaned}, objects deleted ${t.objectsDeleted}, leases deleted ${t.leasesDeleted})`,
          );
        }
        const [small, large] = perSize as [Map<string, number>, Map<string, number>];
        const apis = [...new Set([...small.keys(), ...large.keys()])].sort();
        const marginal = apis.map(
          (api) => `${api} ${(((large.get(api) ?? 0) - (small.get(api) ?? 0)) / (sizes[1] - sizes[0])).toFixed(2)}`,
        );
        console.log(`  per ${kind} prefix: ${marginal.join(', ')}`);
      }
    } finally {
      await worker.stop('SIGKILL');
    }
  });
}

/**
 * A job whose worker is SIGKILLed mid-job; the collector on a Schedule; the time from the kill until its prefix is
 * empty.
 */
async function timeToReclaim(opts: Options, minio: S3Server, bucket: Bucket): Promise<void> {
  await withTemporal(minio, async ({ client, address }) => {
    const settings = resolveSettings({ timing: collectorTiming, heartbeatTimeoutMs: collectorHeartbeatTimeoutMs });
    const { timing } = settings;
    const collector = await spawnScaleWorker({
      temporalAddress: address,
      bucket,
      taskQueue: 'reclaim-gc',
      settings,
      name: 'collector',
    });
    const bound = timing.leaseExpiryMs + timing.stagingGraceMs + opts.gcEveryS * 1000;
    const jobs = await seedJobs(bucket.store, 'reclaim', opts.reclaimTrials);
    const namespaces = [...new Set(jobs.map((j) => j.namespaceId))];
    await ensureGcSchedule(client, {
      every: `${opts.gcEveryS}s`,
      taskQueue: 'reclaim-gc',
      scheduleId: 'reclaim-gc',
      pass: { namespaces },
    });
    console.log(
      `time to reclaim: expiry ${timing.leaseExpiryMs} ms + staging grace ${timing.stagingGraceMs} ms + schedule period ${opts.gcEveryS * 1000} ms = bound ${bound} ms, ${load()}`,
    );
    try {
      for (const [trial, job] of jobs.entries()) {
        const doomed = await spawnScaleWorker({
          temporalAddress: address,
          bucket,
          taskQueue: `reclaim-job-${trial}`,
          settings,
          name: `doomed-${trial}`,
        });
        await startCompaction(client, { ...job, taskQueue: `reclaim-job-${trial}` });
        const ns = namespaceId(job.namespaceId);
        const found = await waitForLease(bucket.store, ns);
        // Its output so far: one staged segment, written while the lease is held.
        await bucket.store.put(stagedSegmentKey(ns, found, newSegmentId(), 'seg'), new Uint8Array([1]));
        await sleep(3 * timing.leaseRefreshIntervalMs);
        const killedAt = performance.now();
        await doomed.stop('SIGKILL');
        const prefix = jobPrefix(ns, found);
        while ((await countKeys(bucket.store, prefix)) > 0) await sleep(100);
        const ms = performance.now() - killedAt;
        console.log(
          `  trial ${trial + 1}: worker SIGKILLed, prefix empty (lease and staged segment deleted) after ${ms.toFixed(0)} ms (bound ${bound} ms: ${ms <= bound ? 'met' : 'NOT met'})`,
        );
      }
    } finally {
      await client.schedule.getHandle('reclaim-gc').delete();
      await collector.stop('SIGKILL');
    }
  });
}

async function waitForLease(store: ObjectStore, ns: NamespaceId) {
  for (;;) {
    const page = await store.list({ prefix: `namespaces/${ns}/metadata/compactions/` });
    const lease = page.objects.map((o) => parseCompactionKey(o.key)).find((k) => k.kind === 'lease');
    if (lease && 'jobId' in lease) return lease.jobId;
    await sleep(100);
  }
}

async function main(): Promise<void> {
  const opts = program.parse().opts<Options>();
  printMachine();
  console.log(
    `workers run ${opts.built ? `the package's build (${opts.built === true ? 'lib' : opts.built})` : 'the sources under tsx'}${opts.workerNodeOptions?.length ? `, node options ${opts.workerNodeOptions.join(' ')}` : ''}`,
  );
  // MinIO's request counters, unauthenticated: the benchmark reads them without a bearer token.
  process.env.MINIO_PROMETHEUS_AUTH_TYPE = 'public';
  const minio = await startMinio();
  try {
    if (opts.phases.includes('scale')) {
      const bucket = await createBucket(minio, 'scale');
      const horizontalN = opts.horizontalLeases ?? Math.max(...opts.leases);
      const points: [number, number][] = [
        ...opts.leases.map((n) => [n, 1] as [number, number]),
        ...opts.workers.map((k) => [horizontalN, k] as [number, number]),
      ];
      console.log(
        `concurrency points (N × workers): ${points.map(([n, k]) => `${n}×${k}`).join(', ')}; ${GROUPS_PER_NAMESPACE} jobs per namespace`,
      );
      for (const [i, [n, k]] of points.entries()) await runPoint(opts, minio, bucket, n, k, i);
    }
    if (opts.phases.includes('cost')) await requestCost(opts, minio, await createBucket(minio, 'cost'));
    if (opts.phases.includes('actions')) await wholeJobActions(opts, minio, await createBucket(minio, 'actions'));
    if (opts.phases.includes('gc-cost')) await gcPassCost(minio, await createBucket(minio, 'gc-cost'));
    if (opts.phases.includes('reclaim')) await timeToReclaim(opts, minio, await createBucket(minio, 'reclaim'));
    if (opts.phases.includes('bare-floor')) await bareFloor(opts, minio, await createBucket(minio, 'floor'));
    console.log(`done, ${load()}`);
  } finally {
    await minio.stop();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
