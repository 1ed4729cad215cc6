/**
 * Collector benchmark, on a real MinIO and Temporal dev server started here:
 *  1. reclaim throughput: `s5cmd rm` and the package's `reclaimPrefix` (root re-read before every
 *     delete batch, age and key checks) each on one of two identical prefixes of N small staged
 *     segments under dead, lease-less jobs; objects/s, the ratio, and the CPU seconds MinIO and each
 *     tool spent per 10,000 objects (read from /proc, not claimed). `--tune` then tries the knobs
 *     that exist without code changes (ReclaimOptions.keysPerFlush, the S3 store's deleteConcurrency);
 *  2. a GC pass (gcWorkflow on a worker) over M job prefixes in one namespace: every 10th with a live
 *     lease and one object, two in 10 with an expired lease and two objects, the rest lease-less
 *     orphans of one object: the pass's duration and the longest history (events) of any of its runs,
 *     following every continue-as-new chain of the parent and of each namespace child.
 * Run: `eval "$(scripts/provision.sh)" && eval "$(scripts/provision-s5cmd.sh)" && npx tsx bench/reclaim.ts`
 * Options: --objects N (default 100000), --repeat R (pairs of prefixes, default 2: s5cmd first in odd
 *          runs, reclaimPrefix first in even ones), --prefixes M[,M2…] (default 100000),
 *          --prefixes-per-page P, --prefix-concurrency C (gcWorkflow's options, default its own), --tune,
 *          --skip-reclaim, --skip-gc, --disk (MinIO data on disk rather than in /dev/shm).
 */
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { Agent } from 'node:http';
import { cpus, loadavg, platform, release, totalmem } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';
import { NodeHttpHandler } from '@smithy/node-http-handler';
import { Client, Connection } from '@temporalio/client';
import type { temporal } from '@temporalio/proto';
import { DefaultLogger, NativeConnection, Runtime } from '@temporalio/worker';
import { resolveSettings, shrunkTiming } from '../src/config';
import { createLeaseState, encodeLease } from '../src/lease';
import { SEARCH_ATTRIBUTES, startMinio, startTemporalDevServer } from '../src/devservers';
import {
  compactionsPrefix,
  jobPrefix,
  leaseKey,
  namespaceId,
  newJobId,
  newPassId,
  newSegmentId,
  stagedSegmentKey,
  type NamespaceId,
} from '../src/keys';
import { reclaimPrefix, type ReclaimTally } from '../src/collector/walk';
import { jsonRootCodec } from '../src/root';
import { createS3ObjectStore, type ObjectStore } from '../src/store';
import { inBatches } from '../src/store/batches';
import { createWorker } from '../src/worker';
import type { GcReport } from '../src/workflows/gc';
import { makeInputs, writeInputs } from '../test/support/records';
import { exitedChildrenCpuSeconds, pidsWithArgs, totalCpuSeconds } from './support/proc';

Runtime.install({ logger: new DefaultLogger('WARN') });

const BUCKET = 'bench';
const OBJECT_BYTES = 100;
const WRITES_IN_FLIGHT = 64;
const STAGING_GRACE_MS = 1000;
/** The workflow's default (src/workflows/gc.ts DEFAULTS.keysPerFlush) and the S3 store's default deleteConcurrency. */
const DEFAULT_KEYS_PER_FLUSH = 4000;
const DEFAULT_DELETE_CONCURRENCY = 4;

function flag(name: string): boolean {
  return process.argv.includes(`--${name}`);
}
function option(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && process.argv[i + 1] !== undefined ? (process.argv[i + 1] as string) : fallback;
}
const wholeNumbers = (raw: string, name: string): number[] =>
  raw.split(',').map((s) => {
    const n = Number(s);
    if (!Number.isInteger(n) || n < 1) throw new Error(`--${name} takes positive whole numbers, not ${s}`);
    return n;
  });

const s5cmdBin = (): string =>
  process.env.S5CMD_BIN ??
  join(
    process.env.COMPACTION_LEASE_CACHE ?? join(process.env.HOME ?? '', '.cache', 'compaction-lease'),
    's5cmd-bin',
    's5cmd',
  );
const minioBin = (): string =>
  process.env.MINIO_BIN ??
  join(
    process.env.COMPACTION_LEASE_CACHE ?? join(process.env.HOME ?? '', '.cache', 'compaction-lease'),
    'minio-bin',
    'minio',
  );
const firstLine = (cmd: string, args: string[]): string => {
  try {
    return execFileSync(cmd, args, { encoding: 'utf8' }).split('\n')[0]?.trim() ?? '';
  } catch {
    return 'unknown';
  }
};
const goModuleVersion = (bin: string): string => {
  try {
    const out = execFileSync('go', ['version', '-m', bin], { encoding: 'utf8' });
    return /^\s*mod\s+\S+\s+(\S+)/m.exec(out)?.[1] ?? 'unknown';
  } catch {
    return 'unknown';
  }
};

function printMachine(): void {
  const cpu = cpus();
  console.log(
    `machine: ${cpu.length} × ${cpu[0]?.model}, ${(totalmem() / 2 ** 30).toFixed(0)} GiB, ${platform()} ${release()}, node ${process.version}, ${load()}`,
  );
  console.log(`minio: ${firstLine(minioBin(), ['--version'])} (module ${goModuleVersion(minioBin())})`);
  if (existsSync(s5cmdBin())) console.log(`s5cmd: ${firstLine(s5cmdBin(), ['version'])}`);
}

/** Other work on the machine skews every number: the 1-minute load average is printed beside each. */
const load = (): string => `load ${loadavg()[0]?.toFixed(2)}`;

const rate = (objects: number, ms: number): string => `${((objects / ms) * 1000).toFixed(0)} objects/s`;

/** Writes `count` keys of OBJECT_BYTES each, WRITES_IN_FLIGHT at a time. */
async function writeObjects(store: ObjectStore, keys: readonly string[]): Promise<void> {
  const body = new Uint8Array(OBJECT_BYTES).fill(0x61);
  await inBatches(keys, 1, WRITES_IN_FLIGHT, (batch) => Promise.all(batch.map((k) => store.put(k, body))));
}

async function countUnder(store: ObjectStore, prefix: string): Promise<number> {
  let n = 0;
  for (let after: string | undefined; ;) {
    const page = await store.list({ prefix, startAfter: after });
    n += page.objects.length;
    after = page.objects.at(-1)?.key ?? after;
    if (page.nextCursor === undefined) return n;
  }
}

/** A dead, lease-less job prefix of `count` staged segments. */
async function stageDeadJob(
  store: ObjectStore,
  ns: NamespaceId,
  count: number,
): Promise<{ ns: NamespaceId; job: ReturnType<typeof newJobId>; prefix: string }> {
  const job = newJobId();
  await writeObjects(
    store,
    Array.from({ length: count }, () => stagedSegmentKey(ns, job, newSegmentId(), 'seg')),
  );
  return { ns, job, prefix: jobPrefix(ns, job) };
}

function runS5cmd(endpoint: string, accessKey: string, secretKey: string, prefix: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(s5cmdBin(), ['--endpoint-url', endpoint, 'rm', `s3://${BUCKET}/${prefix}*`], {
      env: { ...process.env, AWS_ACCESS_KEY_ID: accessKey, AWS_SECRET_ACCESS_KEY: secretKey, AWS_REGION: 'us-east-1' },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('exit', (code) =>
      code === 0 ? resolve() : reject(new Error(`s5cmd exited ${code}: ${stderr.slice(0, 2000)}`)),
    );
  });
}

/**
 * What one tool's run cost: wall time, and CPU seconds of MinIO and of the tool itself (read from /proc, not claimed).
 */
interface RunCost {
  readonly ms: number;
  readonly minioCpu: number;
  readonly toolCpu: number;
  readonly load: string;
}

async function measure(
  minioPids: readonly number[],
  toolCpu: () => number,
  run: () => Promise<void>,
): Promise<RunCost> {
  const minioCpu = (): number => totalCpuSeconds(minioPids);
  const before = { minio: minioCpu(), tool: toolCpu(), at: performance.now() };
  await run();
  return {
    ms: performance.now() - before.at,
    minioCpu: minioCpu() - before.minio,
    toolCpu: toolCpu() - before.tool,
    load: load(),
  };
}

/** This process's own CPU seconds: the benchmark does nothing else while `reclaimPrefix` runs. */
const ownCpuSeconds = (): number => {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1e6;
};

const describeCost = (cost: RunCost, objects: number): string =>
  `${(cost.ms / 1000).toFixed(2)} s: ${rate(objects, cost.ms)}; CPU s per 10,000 objects: MinIO ${((cost.minioCpu / objects) * 1e4).toFixed(2)}, ` +
  `the tool ${((cost.toolCpu / objects) * 1e4).toFixed(2)} (${cost.load})`;

async function timeReclaim(
  store: ObjectStore,
  target: { ns: NamespaceId; job: ReturnType<typeof newJobId> },
  keysPerFlush: number,
  minioPids: readonly number[],
): Promise<RunCost & { tally: ReclaimTally }> {
  let tally: ReclaimTally | undefined;
  const cost = await measure(minioPids, ownCpuSeconds, async () => {
    tally = await reclaimPrefix(
      store,
      { namespaceId: target.ns, jobId: target.job },
      {
        nowMs: Date.now(),
        stagingGraceMs: STAGING_GRACE_MS,
        readerGraceMs: STAGING_GRACE_MS,
        keysPerFlush,
        reportLimit: 100,
        passId: newPassId(Date.now()),
        leaseRefreshIntervalMs: STAGING_GRACE_MS,
      },
      { codec: jsonRootCodec },
    );
  });
  return { ...cost, tally: tally as ReclaimTally };
}

function s3Client(
  minio: { endpoint: string; region: string; accessKey: string; secretKey: string },
  maxSockets: number,
): S3Client {
  return new S3Client({
    endpoint: minio.endpoint,
    region: minio.region,
    forcePathStyle: true,
    credentials: { accessKeyId: minio.accessKey, secretAccessKey: minio.secretKey },
    requestHandler: new NodeHttpHandler({ httpAgent: new Agent({ keepAlive: true, maxSockets }) }),
  });
}

async function reclaimBench(
  minio: Awaited<ReturnType<typeof startMinio>>,
  objects: number,
  repeat: number,
  tune: boolean,
): Promise<void> {
  // Writes get their own client with room for every write in flight; the collector's store uses the SDK's default
  // sockets.
  const writerClient = s3Client(minio, WRITES_IN_FLIGHT * 2);
  const writer = createS3ObjectStore({ bucket: BUCKET, client: writerClient });
  const collectorClient = new S3Client({
    endpoint: minio.endpoint,
    region: minio.region,
    forcePathStyle: true,
    credentials: { accessKeyId: minio.accessKey, secretAccessKey: minio.secretKey },
  });
  const ns = namespaceId('bench-reclaim');
  // A real root, so every flush re-reads and parses one (it references only input segments, none of the staged ones).
  await writeInputs(writer, ns, 'bindings', makeInputs(4, 50, 150));

  console.log(
    `reclaim: ${repeat} runs, each on 2 prefixes × ${objects} objects of ${OBJECT_BYTES} bytes, no lease, staging grace ${STAGING_GRACE_MS} ms`,
  );
  const store = createS3ObjectStore({ bucket: BUCKET, client: collectorClient });
  const minioPids = pidsWithArgs('--address', new URL(minio.endpoint).host);
  const ratios: number[] = [];
  let s5Ms = 0;
  for (let run = 1; run <= repeat; run++) {
    const writeStart = performance.now();
    const [forS5cmd, forPackage] = [await stageDeadJob(writer, ns, objects), await stageDeadJob(writer, ns, objects)];
    const writeMs = performance.now() - writeStart;
    console.log(
      `  run ${run}: written in ${(writeMs / 1000).toFixed(1)} s (${rate(2 * objects, writeMs)}, ${WRITES_IN_FLIGHT} PUTs in flight)`,
    );
    await sleep(STAGING_GRACE_MS + 500);
    const timeS5cmd = () =>
      measure(minioPids, exitedChildrenCpuSeconds, () =>
        runS5cmd(minio.endpoint, minio.accessKey, minio.secretKey, forS5cmd.prefix),
      );
    const s5cmdFirst = run % 2 === 1;
    const s5 = s5cmdFirst ? await timeS5cmd() : undefined;
    const own = await timeReclaim(store, forPackage, DEFAULT_KEYS_PER_FLUSH, minioPids);
    const s5run = s5 ?? (await timeS5cmd());
    s5Ms = s5run.ms;
    const left = [await countUnder(writer, forS5cmd.prefix), await countUnder(writer, forPackage.prefix)];
    console.log(`    order: ${s5cmdFirst ? 's5cmd first' : 'reclaimPrefix first'}`);
    console.log(`    s5cmd rm            ${describeCost(s5run, objects)}`);
    console.log(
      `    reclaimPrefix       ${describeCost(own, own.tally.objectsDeleted)} ` +
        `(keysPerFlush ${DEFAULT_KEYS_PER_FLUSH}, deleteConcurrency ${DEFAULT_DELETE_CONCURRENCY}; deleted ${own.tally.objectsDeleted}, retained young ${own.tally.retainedYoung}, unrecognised ${own.tally.retainedUnrecognised})`,
    );
    ratios.push(s5run.ms / own.ms);
    console.log(`    ratio reclaimPrefix/s5cmd throughput: ${(s5run.ms / own.ms).toFixed(2)}`);
    console.log(`    left afterwards: s5cmd prefix ${left[0]}, reclaimPrefix prefix ${left[1]} objects`);
    if (left[0] !== 0 || left[1] !== 0 || own.tally.objectsDeleted !== objects)
      throw new Error('a prefix was not emptied');
  }
  const sorted = [...ratios].sort((a, b) => a - b);
  const median =
    sorted.length % 2
      ? (sorted[(sorted.length - 1) / 2] as number)
      : ((sorted[sorted.length / 2 - 1] as number) + (sorted[sorted.length / 2] as number)) / 2;
  console.log(`  ratios: ${ratios.map((r) => r.toFixed(2)).join(', ')}; median ${median.toFixed(2)}`);

  if (tune) {
    console.log(`tuning reclaimPrefix (one fresh prefix of ${objects} objects per setting):`);
    const settings: [number, number][] = [
      [4000, 16],
      [1000, 4],
      [16000, 32],
    ];
    let best: { kpf: number; dc: number; ms: number } | undefined;
    for (const [kpf, dc] of settings) {
      const target = await stageDeadJob(writer, ns, objects);
      await sleep(STAGING_GRACE_MS + 500);
      const client = s3Client(minio, Math.max(50, dc * 2));
      const tuned = createS3ObjectStore({ bucket: BUCKET, client, deleteConcurrency: dc });
      const { ms, tally } = await timeReclaim(tuned, target, kpf, minioPids);
      client.destroy();
      const remaining = await countUnder(writer, target.prefix);
      console.log(
        `  keysPerFlush ${String(kpf).padStart(5)}, deleteConcurrency ${String(dc).padStart(2)}: ${(ms / 1000).toFixed(2)} s, ${rate(tally.objectsDeleted, ms)}, left ${remaining} (${load()})`,
      );
      if (!best || ms < best.ms) best = { kpf, dc, ms };
    }
    if (best)
      console.log(
        `  best: keysPerFlush ${best.kpf}, deleteConcurrency ${best.dc}: ${rate(objects, best.ms)} (${(s5Ms / best.ms).toFixed(2)} × the s5cmd run above)`,
      );
  }
  writerClient.destroy();
  collectorClient.destroy();
}

/**
 * Every run of a workflow from its first run id, following continue-as-new; returns [runId, events] per run, and the
 * children it started.
 */
async function followChain(
  client: Client,
  workflowId: string,
  firstRunId: string,
): Promise<{ runs: { runId: string; events: number }[]; children: { workflowId: string; runId: string }[] }> {
  const runs: { runId: string; events: number }[] = [];
  const children: { workflowId: string; runId: string }[] = [];
  for (let runId: string | undefined = firstRunId; runId;) {
    const history = await client.workflow.getHandle(workflowId, runId).fetchHistory();
    const events = (history.events ?? []) as temporal.api.history.v1.IHistoryEvent[];
    runs.push({ runId, events: events.length });
    for (const e of events) {
      const started = e.childWorkflowExecutionStartedEventAttributes?.workflowExecution;
      if (started?.workflowId && started.runId) children.push({ workflowId: started.workflowId, runId: started.runId });
    }
    runId = events.at(-1)?.workflowExecutionContinuedAsNewEventAttributes?.newExecutionRunId ?? undefined;
  }
  return { runs, children };
}

/** Every 10th prefix is a live job, the next two dead jobs whose leases expired, the rest orphans. */
const kindOf = (i: number): 'live' | 'expired' | 'orphan' =>
  i % 10 === 0 ? 'live' : i % 10 <= 2 ? 'expired' : 'orphan';

async function gcBench(
  minio: Awaited<ReturnType<typeof startMinio>>,
  counts: number[],
  options: { prefixesPerPage?: number; prefixConcurrency?: number },
): Promise<void> {
  const temporalServer = await startTemporalDevServer({ uiPort: 'none', searchAttributes: SEARCH_ATTRIBUTES });
  const writerClient = s3Client(minio, WRITES_IN_FLIGHT * 2);
  const writer = createS3ObjectStore({ bucket: BUCKET, client: writerClient });
  const workerStore = createS3ObjectStore({
    bucket: BUCKET,
    clientConfig: {
      endpoint: minio.endpoint,
      region: minio.region,
      forcePathStyle: true,
      credentials: { accessKeyId: minio.accessKey, secretAccessKey: minio.secretKey },
    },
  });
  const settings = resolveSettings({ timing: shrunkTiming(500, 5000), heartbeatTimeoutMs: 5000 });
  const connection = await NativeConnection.connect({ address: temporalServer.address });
  const worker = await createWorker({ store: workerStore, settings, connection, taskQueue: 'bench-gc' });
  const clientConnection = await Connection.connect({ address: temporalServer.address });
  const client = new Client({ connection: clientConnection });
  console.log(
    `gc pass: shrunk timing (staging grace ${settings.timing.stagingGraceMs} ms), one namespace, gcWorkflow defaults but ` +
      `prefixesPerPage ${options.prefixesPerPage ?? '100 (default)'}, prefixConcurrency ${options.prefixConcurrency ?? '8 (default)'}`,
  );
  try {
    await worker.runUntil(async () => {
      for (const count of counts) {
        const ns = namespaceId(`bench-gc-${count}-${Date.now().toString(36)}`);
        const writeStart = performance.now();
        const body = new Uint8Array(OBJECT_BYTES).fill(0x62);
        const jobs = Array.from({ length: count }, (_, i) => ({ job: newJobId(), kind: kindOf(i) }));
        const objectsOf = (kind: string) => (kind === 'expired' ? 2 : 1);
        const stagedKeys = jobs.flatMap(({ job, kind }) =>
          Array.from({ length: objectsOf(kind) }, () => stagedSegmentKey(ns, job, newSegmentId(), 'seg')),
        );
        await inBatches(stagedKeys, 1, WRITES_IN_FLIGHT, (batch) =>
          Promise.all(batch.map((key) => writer.put(key, body))),
        );
        // A live job refreshes throughout the pass: its heartbeat is set an hour ahead. An expired one last refreshed
        // an hour ago.
        const leaseAt = { live: Date.now() + 3_600_000, expired: Date.now() - 3_600_000 };
        const leased = jobs.filter(
          (j): j is { job: (typeof jobs)[number]['job']; kind: 'live' | 'expired' } => j.kind !== 'orphan',
        );
        await inBatches(leased, 1, WRITES_IN_FLIGHT, (batch) =>
          Promise.all(
            batch.map(({ job, kind }) =>
              writer.put(
                leaseKey(ns, job),
                encodeLease(createLeaseState({ jobId: job, namespaceId: ns, ownerId: 'bench', nowMs: leaseAt[kind] })),
              ),
            ),
          ),
        );
        const expected = {
          live: jobs.filter((j) => j.kind === 'live').length,
          expired: jobs.filter((j) => j.kind === 'expired').length,
        };
        const writeMs = performance.now() - writeStart;
        await sleep(settings.timing.stagingGraceMs + 500);
        const workflowId = `bench-gc-pass-${ns}`;
        const started = performance.now();
        const handle = await client.workflow.start('gcWorkflow', {
          taskQueue: 'bench-gc',
          workflowId,
          args: [{ namespaces: [ns], ...options }],
        });
        const report = (await handle.result()) as GcReport;
        const passMs = performance.now() - started;

        const parent = await followChain(client, workflowId, handle.firstExecutionRunId);
        const all: { workflowId: string; runId: string; events: number }[] = parent.runs.map((r) => ({
          workflowId,
          ...r,
        }));
        for (const child of parent.children) {
          const chain = await followChain(client, child.workflowId, child.runId);
          all.push(...chain.runs.map((r) => ({ workflowId: child.workflowId, ...r })));
        }
        const longest = all.reduce((a, b) => (b.events > a.events ? b : a));
        const left = await countUnder(writer, compactionsPrefix(ns));
        const t = report.totals;
        console.log(
          `  ${count} prefixes (written in ${(writeMs / 1000).toFixed(1)} s): pass ${(passMs / 1000).toFixed(1)} s (${((count / passMs) * 1000).toFixed(1)} prefixes/s; ${load()} at the end)`,
        );
        console.log(
          `    report: seen ${t.prefixesSeen}, orphaned ${t.orphaned}, live ${t.live}, claimed ${t.claimed}, objects deleted ${t.objectsDeleted}; ${left} objects left under the compactions prefix`,
        );
        console.log(
          `    runs: ${all.length} (${parent.runs.length} of the pass, ${all.length - parent.runs.length} of namespace children); ` +
            `max history ${longest.events} events (${longest.workflowId === workflowId ? 'pass' : 'namespace child'} run ${all.indexOf(longest) + 1}); ` +
            `events per run: ${all.map((r) => r.events).join(', ')}`,
        );
        console.log(`    every history < 10,000 events: ${all.every((r) => r.events < 10_000) ? 'yes' : 'NO'}`);
        const expectedDeleted = count - expected.live + expected.expired;
        if (
          t.live !== expected.live ||
          t.claimed !== expected.expired ||
          t.objectsDeleted !== expectedDeleted ||
          left !== 2 * expected.live
        ) {
          throw new Error(
            `the pass did not do what the seed implies: ${expected.live} live, ${expected.expired} claimed, ${expectedDeleted} objects deleted, ${2 * expected.live} objects left`,
          );
        }
      }
    });
  } finally {
    await clientConnection.close();
    await connection.close();
    writerClient.destroy();
    await workerStore.close();
    await temporalServer.stop();
  }
}

async function main(): Promise<void> {
  const objects = wholeNumbers(option('objects', '100000'), 'objects')[0] as number;
  const prefixes = wholeNumbers(option('prefixes', '100000'), 'prefixes');
  printMachine();
  console.log(`command: npx tsx bench/reclaim.ts ${process.argv.slice(2).join(' ')}`.trim());
  // MinIO fsyncs every write; on this VM's disk that caps PUTs at a few hundred per second, so by
  // default its data lives in RAM (/dev/shm). `--disk` keeps it in the OS temp directory instead.
  const ram = !flag('disk') && existsSync('/dev/shm');
  const dataDir = ram ? mkdtempSync('/dev/shm/compaction-lease-bench-') : undefined;
  console.log(`minio data: ${ram ? `tmpfs ${dataDir}` : 'disk (OS temp directory)'}`);
  const minio = await startMinio(dataDir === undefined ? {} : { dataDir });
  try {
    const admin = s3Client(minio, 8);
    await admin.send(new CreateBucketCommand({ Bucket: BUCKET }));
    admin.destroy();
    if (!flag('skip-reclaim'))
      await reclaimBench(minio, objects, wholeNumbers(option('repeat', '2'), 'repeat')[0] as number, flag('tune'));
    const optional = (name: string) => (option(name, '') === '' ? undefined : wholeNumbers(option(name, ''), name)[0]);
    const gcOptions = {
      prefixesPerPage: optional('prefixes-per-page'),
      prefixConcurrency: optional('prefix-concurrency'),
    };
    if (!flag('skip-gc'))
      await gcBench(minio, prefixes, Object.fromEntries(Object.entries(gcOptions).filter(([, v]) => v !== undefined)));
  } finally {
    await minio.stop();
    if (dataDir !== undefined) rmSync(dataDir, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
