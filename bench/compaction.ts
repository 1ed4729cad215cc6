/**
 * Compaction benchmark, on a real MinIO and Temporal dev server started here:
 *  1. the reference compactor's throughput next to a raw GET+PUT copy of the same bytes on the
 *     same store, side by side in one run, and next to reading and checking the inputs alone:
 *     records/s, MB/s of input, their ratio, CPU time, peak RSS of this process and the most
 *     sockets open to the store during each;
 *  2. Temporal history events of a short and a long job (they should be equal);
 *  3. S3 requests per lease refresh in steady state (target: one PUT, no GET);
 *  4. on request (`gzip-levels`), size and speed of the gzip levels the writer could use.
 * Run: `eval "$(scripts/provision.sh)" && npx tsx bench/compaction.ts` (see --help); the scale
 * point: `npx tsx bench/compaction.ts --phases throughput --shape metadata --inputs 1000 --bytes 1GB`.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { Agent } from 'node:http';
import { Session } from 'node:inspector';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, totalmem, platform, release, tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { promisify } from 'node:util';
import { constants, gunzipSync, gzipSync, zstdCompressSync, zstdDecompressSync } from 'node:zlib';
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';
import { NodeHttpHandler } from '@smithy/node-http-handler';
import { Client, Connection } from '@temporalio/client';
import { DefaultLogger, NativeConnection, Runtime } from '@temporalio/worker';
import { Command, InvalidArgumentError } from 'commander';
import { startCompaction } from '../src/client';
import { compactGroup, NO_PROGRESS } from '../src/compactor';
import { resolveSettings, shrunkTiming } from '../src/config';
import { SEARCH_ATTRIBUTES, startMinio, startTemporalDevServer } from '../src/devservers';
import { inputSegmentKey, namespaceId, newJobId, newSegmentId, parseCompactionKey } from '../src/keys';
import { readRoot } from '../src/protocol';
import { jsonRootCodec } from '../src/root';
import {
  encodeSegment,
  readSegmentBatches,
  SEGMENT_EXTENSION,
  SEGMENT_FORMAT_VERSIONS,
  type SegmentFormatVersion,
  type SegmentRecord,
} from '../src/segments';
import { createEmbeddedObjectStore, createS3ObjectStore, type ObjectStore } from '../src/store';
import { createWorker } from '../src/worker';
import { interceptStore } from '../test/support/faults';
import { makeInputs, writeInputs } from '../test/support/records';
import { whole } from './support/args';
import { pidsWithArgs, rssBytes, totalCpuSeconds } from './support/proc';

Runtime.install({ logger: new DefaultLogger('WARN') });

const size = (raw: string): number => {
  const match = /^(\d+(?:\.\d+)?)\s*(B|KB|MB|GB)?$/i.exec(raw.trim());
  if (!match) throw new InvalidArgumentError(`${raw} is not a size such as 200MB or 1GB`);
  return Math.round(Number(match[1]) * { B: 1, KB: 1e3, MB: 1e6, GB: 1e9 }[(match[2] ?? 'B').toUpperCase() as 'B']);
};
/**
 * Record shapes: `small` is the tests' (`makeInputs`: short values, about 10 compressed bytes a
 * record); `metadata` is an object store's listing (key of a file, value its size, time and a
 * random ETag: about 30 compressed bytes a record), so the copy moves more bytes per record.
 */
const SHAPES = {
  small: (k: number, s: number): string => `v${s}-${k}-${'x'.repeat(k % 40)}`,
  metadata: (k: number): string =>
    `{"size":${(k * 7919) % 104_857_600},"mtime":${1_764_800_000_000 + k},"etag":"${hex()}${hex()}","class":"STANDARD"}`,
} as const;
const hex = (): string =>
  Math.floor(Math.random() * 2 ** 52)
    .toString(16)
    .padStart(13, '0');
const program = new Command('compaction')
  .option('--phases <p,…>', 'throughput, jobs, gzip-levels', (raw) => raw.split(','), ['throughput', 'jobs'])
  .option('--inputs <n>', 'input segments of the throughput phase', whole, 8)
  .option('--records <n>', 'records per input (ignored with --bytes)', whole, 25_000)
  .option('--bytes <size>', 'compressed input bytes in all, e.g. 1GB: sets the records per input')
  .option('--shape <name>', `records: ${Object.keys(SHAPES).join(' or ')}`, 'small')
  .option('--store <name>', 'minio, or embedded (SQLite, a file under the OS temp folder)', 'minio')
  .option('--target-segment-bytes <n>', 'output segment size (uncompressed)', whole, 4 * 1024 * 1024)
  .option(
    '--max-fan-in <n>',
    'sources one merge reads at once (≥ --inputs: the single-level merge of all inputs)',
    whole,
    128,
  )
  .option('--copy-concurrency <n>', 'GET+PUT copies in flight in the baseline', whole, 8)
  .option(
    '--formats <v,…>',
    'segment formats of the throughput phase, each on inputs of its own format',
    (raw) => raw.split(',').map(Number),
    [1, 2],
  )
  .option('--cpu-profile <file>', 'write a CPU profile of the compaction alone (open in Chrome DevTools)')
  .option(
    '--read-window-bytes <n>',
    "bytes of one ranged GET of a streamed object (the store's default without it)",
    whole,
  )
  .option(
    '--threads <n,…>',
    'compactor pool sizes (COMPACTION_COMPACTOR_THREADS) to run the phases with, one after another, each in a process of its own',
    (raw) => raw.split(',').map(Number),
  )
  .option(
    '--latency-ms <n>',
    'hold every S3 request this long (a proxy in a child process) before MinIO sees it: a store across a network',
    whole,
  );
type Options = {
  phases: string[];
  formats: number[];
  inputs: number;
  records: number;
  bytes?: string;
  shape: string;
  store: string;
  targetSegmentBytes: number;
  maxFanIn: number;
  copyConcurrency: number;
  cpuProfile?: string;
  latencyMs?: number;
  readWindowBytes?: number;
  threads?: number[];
};

/** Concurrent jobs on one worker process in the throughput phase's second table: more than its threads. */
const CONCURRENT_JOBS = 4;

/**
 * Input `s` of a group: `records` keys drawn in ascending order from a key space shared by all
 * inputs (geometric gaps, so no set of keys is held), seqs rising from input to input, about one
 * record in seven a tombstone. Inputs are generated and stored a few at a time, so a 1 GB group
 * never sits in memory.
 */
function scaleInput(
  s: number,
  records: number,
  keySpace: number,
  shape: keyof typeof SHAPES,
  firstSeq: number,
): SegmentRecord[] {
  const out: SegmentRecord[] = [];
  const meanGap = keySpace / records;
  for (
    let k = Math.floor(Math.random() * meanGap);
    out.length < records;
    k += 1 + Math.floor(-Math.log(1 - Math.random()) * (meanGap - 1))
  ) {
    const key = `k${String(k).padStart(10, '0')}`;
    const seq = firstSeq + out.length;
    out.push((k + s) % 7 === 0 ? { key, seq, tombstone: true } : { key, seq, value: SHAPES[shape](k, s) });
  }
  return out;
}

/** Sockets of the S3 client's agent: in use by a request, and open (in use or idle, kept alive). */
function agentSockets(agent: Agent): { inUse: number; open: number } {
  const count = (pool: NodeJS.ReadOnlyDict<unknown[]>) =>
    Object.values(pool).reduce((sum, list) => sum + (list?.length ?? 0), 0);
  const inUse = count(agent.sockets);
  return { inUse, open: inUse + count(agent.freeSockets) };
}

/**
 * One phase's wall time, this process's CPU time (threads included), the store server's CPU time, peak RSS and sockets.
 */
interface Measured {
  readonly ms: number;
  readonly cpuMs: number;
  readonly serverCpuMs: number;
  readonly peakRss: number;
  readonly sockets: string;
}

/** The S3 server a phase runs against: its client's agent (sockets) and its processes (CPU). */
interface Server {
  readonly agent: Agent;
  readonly pids: readonly number[];
}

/**
 * Runs `work` measuring CPU time, peak RSS (the kernel's high-water mark, reset first) and the most sockets of the
 * server's agent, sampled every 50 ms.
 */
async function measured<T>(server: Server | undefined, work: () => Promise<T>): Promise<Measured & { result: T }> {
  writeFileSync('/proc/self/clear_refs', '5');
  const most = { inUse: 0, open: 0 };
  const sample = () => {
    if (server === undefined) return;
    const now = agentSockets(server.agent);
    most.inUse = Math.max(most.inUse, now.inUse);
    most.open = Math.max(most.open, now.open);
  };
  const timer = setInterval(sample, 50);
  const started = performance.now();
  const cpu = process.cpuUsage();
  const serverCpu = totalCpuSeconds(server?.pids ?? []);
  try {
    const result = await work();
    const ms = performance.now() - started;
    const { user, system } = process.cpuUsage(cpu);
    const peakKb = /^VmHWM:\s+(\d+) kB/m.exec(readFileSync('/proc/self/status', 'utf8'))?.[1];
    const serverCpuMs = (totalCpuSeconds(server?.pids ?? []) - serverCpu) * 1000;
    const sockets = server === undefined ? 'none (embedded store)' : `≤ ${most.inUse} in use, ≤ ${most.open} open`;
    return {
      result,
      ms,
      cpuMs: (user + system) / 1000,
      serverCpuMs,
      peakRss: Math.max(Number(peakKb ?? 0) * 1024, rssBytes(process.pid)),
      sockets,
    };
  } finally {
    clearInterval(timer);
  }
}

/**
 * Runs `work` under the V8 CPU profiler and writes the profile to `file`: generating the inputs and the copy stay out
 * of it.
 */
async function profiled<T>(file: string | undefined, work: () => Promise<T>): Promise<T> {
  if (file === undefined) return work();
  const session = new Session();
  session.connect();
  const post = promisify(session.post.bind(session)) as (
    method: string,
    params?: object,
  ) => Promise<{ profile?: object }>;
  await post('Profiler.enable');
  await post('Profiler.start');
  try {
    return await work();
  } finally {
    writeFileSync(file, JSON.stringify((await post('Profiler.stop')).profile));
    session.disconnect();
  }
}

/**
 * Compression ratio and speed of gzip levels, and of zstd levels in v2's blocks, on one segment of each shape (the
 * writers' levels are chosen from this).
 */
function gzipLevels(): void {
  for (const shape of Object.keys(SHAPES) as (keyof typeof SHAPES)[]) {
    const raw = gunzipSync(encodeSegment(scaleInput(0, 50_000, 100_000, shape, 0), 1));
    for (const level of [1, 3, 6]) {
      const rounds = 5;
      let compressed = Buffer.alloc(0);
      const started = performance.now();
      for (let i = 0; i < rounds; i++) compressed = gzipSync(raw, { level });
      const compressMs = (performance.now() - started) / rounds;
      const unzipStarted = performance.now();
      for (let i = 0; i < rounds; i++) gunzipSync(compressed);
      const decompressMs = (performance.now() - unzipStarted) / rounds;
      console.log(
        `gzip level ${level}, ${shape} records: ${(raw.length / 1e6).toFixed(1)} MB → ${(compressed.length / 1e6).toFixed(2)} MB (${(raw.length / compressed.length).toFixed(1)}×), ` +
          `compress ${(raw.length / 1e3 / compressMs).toFixed(0)} MB/s, decompress ${(raw.length / 1e3 / decompressMs).toFixed(0)} MB/s`,
      );
    }
    // Segment format v2's codec, in 128 KiB blocks as its writer compresses them (of these JSON lines: the same
    // records, not v2's binary encoding of them).
    const blocks = Array.from({ length: Math.ceil(raw.length / 131_072) }, (_, i) =>
      raw.subarray(i * 131_072, (i + 1) * 131_072),
    );
    for (const level of [1, 3]) {
      const options = { params: { [constants.ZSTD_c_compressionLevel]: level } };
      const rounds = 5;
      let compressed: Buffer[] = [];
      const started = performance.now();
      for (let i = 0; i < rounds; i++) compressed = blocks.map((b) => zstdCompressSync(b, options));
      const compressMs = (performance.now() - started) / rounds;
      const unzipStarted = performance.now();
      for (let i = 0; i < rounds; i++) for (const c of compressed) zstdDecompressSync(c);
      const decompressMs = (performance.now() - unzipStarted) / rounds;
      const bytes = compressed.reduce((sum, c) => sum + c.length, 0);
      console.log(
        `zstd level ${level} in 128 KiB blocks, ${shape} records: ${(raw.length / 1e6).toFixed(1)} MB → ${(bytes / 1e6).toFixed(2)} MB (${(raw.length / bytes).toFixed(1)}×), ` +
          `compress ${(raw.length / 1e3 / compressMs).toFixed(0)} MB/s, decompress ${(raw.length / 1e3 / decompressMs).toFixed(0)} MB/s`,
      );
    }
  }
}

async function runLimited(count: number, concurrency: number, task: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(concurrency, count) }, async () => {
      while (next < count) await task(next++);
    }),
  );
}

/**
 * The group's input keys: the tests' writer for the default point (kept comparable with earlier runs), else generated
 * input by input.
 */
async function writeGroup(
  store: ObjectStore,
  opts: Options,
  version: SegmentFormatVersion,
): Promise<{ keys: readonly string[]; records: number }> {
  const ns = `bench-throughput-v${version}`;
  if (opts.bytes === undefined && opts.shape === 'small') {
    await writeInputs(store, ns, 'bindings', makeInputs(opts.inputs, opts.records, opts.records * 6), [version]);
    return {
      keys: (await readRoot(store, namespaceId(ns), jsonRootCodec)).root.groups.bindings!,
      records: opts.inputs * opts.records,
    };
  }
  const shape = opts.shape as keyof typeof SHAPES;
  if (!(shape in SHAPES)) throw new InvalidArgumentError(`unknown shape ${opts.shape}`);
  let records = opts.records;
  if (opts.bytes !== undefined) {
    const sample = encodeSegment(scaleInput(0, 10_000, 20_000, shape, 0), version).length / 10_000;
    records = Math.ceil(size(opts.bytes) / opts.inputs / sample);
  }
  // Each key is in about two inputs, so the merge has overlaps to resolve at any fan-in.
  const keySpace = Math.ceil((records * opts.inputs) / 2);
  const keys = Array.from({ length: opts.inputs }, () =>
    inputSegmentKey(namespaceId(ns), newSegmentId(), SEGMENT_EXTENSION),
  );
  await runLimited(opts.inputs, 4, (s) =>
    store
      .put(keys[s]!, encodeSegment(scaleInput(s, records, keySpace, shape, s * records), version))
      .then(() => undefined),
  );
  return { keys, records: records * opts.inputs };
}

async function throughput(store: ObjectStore, opts: Options, server: Server | undefined): Promise<void> {
  for (const version of opts.formats) {
    if (!(SEGMENT_FORMAT_VERSIONS as readonly number[]).includes(version))
      throw new InvalidArgumentError(`unknown segment format ${version}`);
    await throughputOf(store, opts, server, version as SegmentFormatVersion);
  }
}

/** The throughput phase for one segment format: inputs written in it, the compactor writing it. */
async function throughputOf(
  store: ObjectStore,
  opts: Options,
  server: Server | undefined,
  version: SegmentFormatVersion,
): Promise<void> {
  const { keys, records: recordsIn } = await writeGroup(store, opts, version);
  const mib = (bytes: number) => `${(bytes / 2 ** 20).toFixed(0)} MiB`;
  const copy = await measured(server, async () => {
    let bytes = 0;
    await runLimited(keys.length, opts.copyConcurrency, async (i) => {
      const { body } = await store.get(keys[i]!);
      bytes += body.length;
      await store.put(`bench/copy/${i}`, body);
    });
    return bytes;
  });
  // Reading and checking every input, without merging or writing: what any reader of this format pays.
  const read = await measured(server, () =>
    runLimited(keys.length, opts.copyConcurrency, async (i) => {
      for await (const batch of readSegmentBatches(keys[i]!, (await store.getStream(keys[i]!)).body)) void batch;
    }),
  );
  const job = { namespaceId: namespaceId('bench-throughput'), jobId: newJobId() };
  const compaction = await measured(server, () =>
    profiled(opts.cpuProfile && `${opts.cpuProfile.replace(/\.cpuprofile$/, '')}-v${version}.cpuprofile`, () =>
      compactGroup({
        store,
        job,
        inputs: keys,
        limits: { ...opts, segmentFormat: version },
        resume: NO_PROGRESS,
        hooks: { onSegmentFinished: () => {}, onRecords: () => {} },
      }),
    ),
  );
  const mb = copy.result / 1e6;
  const progress = compaction.result;
  const compactMbs = (mb / compaction.ms) * 1000;
  const copyMbs = (mb / copy.ms) * 1000;
  console.log(
    `segment format v${version}: ${keys.length} inputs (${opts.shape} records), ${mb.toFixed(1)} MB compressed in, ${recordsIn} records in, ${progress.recordsOut} out ` +
      `(${(progress.bytesOut / 1e6).toFixed(1)} MB uncompressed) in ${progress.segmentsFinished} segments, max fan-in ${opts.maxFanIn} (${progress.runs?.parts.length ?? 0} intermediate runs), on ${opts.store}${opts.latencyMs === undefined ? '' : ` behind ${opts.latencyMs} ms a request`}, ${loadavg()
        .map((l) => l.toFixed(2))
        .join(' ')} loadavg`,
  );
  const phase = (label: string, run: Measured, what: string) =>
    console.log(
      `  ${label.padEnd(26)} ${run.ms.toFixed(0).padStart(6)} ms, CPU ${(run.cpuMs / 1000).toFixed(1)} s${server ? ` + MinIO ${(run.serverCpuMs / 1000).toFixed(2)} s` : ''}: ${what}; peak RSS ${mib(run.peakRss)}, sockets ${run.sockets}`,
    );
  const perSecond = (n: number, run: Measured) => ((n / run.ms) * 1000).toFixed(0);
  phase(
    'reference compactor',
    compaction,
    `${perSecond(recordsIn, compaction)} records/s in (${perSecond(progress.recordsOut, compaction)} out), ${((recordsIn / compaction.cpuMs) * 1000).toFixed(0)} records per CPU-second, ${compactMbs.toFixed(1)} MB/s of input`,
  );
  phase('raw GET+PUT copy', copy, `${copyMbs.toFixed(1)} MB/s (${opts.copyConcurrency} in flight)`);
  phase(
    'read and check inputs only',
    read,
    `${perSecond(recordsIn, read)} records/s, ${((mb / read.ms) * 1000).toFixed(1)} MB/s (${opts.copyConcurrency} in flight)`,
  );
  console.log(`  ratio of throughput compactor/copy: ${(compactMbs / copyMbs).toFixed(2)} (target ≥ 0.5)`);
  const jobs = await measured(server, () =>
    Promise.all(
      Array.from({ length: CONCURRENT_JOBS }, () =>
        compactGroup({
          store,
          job: { namespaceId: namespaceId('bench-throughput'), jobId: newJobId() },
          inputs: keys,
          limits: { ...opts, segmentFormat: version },
          resume: NO_PROGRESS,
          hooks: { onSegmentFinished: () => {}, onRecords: () => {} },
        }),
      ),
    ),
  );
  phase(
    `${CONCURRENT_JOBS} jobs at once (same inputs)`,
    jobs,
    `${(jobs.cpuMs / jobs.ms).toFixed(2)} cores busy, ${((CONCURRENT_JOBS * recordsIn * 1000) / jobs.cpuMs).toFixed(0)} records per CPU-second, ${((CONCURRENT_JOBS * mb * 1000) / jobs.ms).toFixed(1)} MB/s of input in all`,
  );
}

async function main(): Promise<void> {
  const opts = program.parse().opts<Options>();
  // Each pool size in a process of its own: a process has one pool, sized when it starts.
  if (opts.threads !== undefined && process.env.COMPACTION_COMPACTOR_THREADS === undefined) {
    for (const threads of opts.threads) {
      console.log(`COMPACTION_COMPACTOR_THREADS=${threads}`);
      spawnSync(process.execPath, [...process.execArgv, ...process.argv.slice(1)], {
        stdio: 'inherit',
        env: { ...process.env, COMPACTION_COMPACTOR_THREADS: String(threads) },
      });
    }
    return;
  }
  console.log(
    `machine: ${cpus().length} × ${cpus()[0]?.model}, ${(totalmem() / 2 ** 30).toFixed(0)} GiB, ${platform()} ${release()}, node ${process.version}`,
  );
  const minio = await startMinio();
  // The SDK's default pool (keep-alive, 50 sockets), made here so the benchmark can count its sockets.
  const agent = new Agent({ keepAlive: true, maxSockets: 50 });
  const proxy = opts.latencyMs === undefined ? undefined : await startLatencyProxy(minio.endpoint, opts.latencyMs);
  const s3 = new S3Client({
    requestHandler: new NodeHttpHandler({ httpAgent: agent }),
    endpoint: proxy?.endpoint ?? minio.endpoint,
    region: minio.region,
    forcePathStyle: true,
    credentials: { accessKeyId: minio.accessKey, secretAccessKey: minio.secretKey },
  });
  await s3.send(new CreateBucketCommand({ Bucket: 'bench' }));
  const requests = { leasePut: 0, leaseGet: 0 };
  s3.middlewareStack.add(
    (next, context) => async (args) => {
      const input = args.input as { Key?: string };
      if (input.Key && parseCompactionKey(input.Key).kind === 'lease') {
        if (context.commandName === 'PutObjectCommand') requests.leasePut++;
        if (context.commandName === 'GetObjectCommand') requests.leaseGet++;
      }
      return next(args);
    },
    { step: 'initialize', name: 'countLeaseRequests' },
  );
  const store = createS3ObjectStore({ bucket: 'bench', client: s3, readWindowBytes: opts.readWindowBytes });
  const temporal = opts.phases.includes('jobs')
    ? await startTemporalDevServer({ uiPort: 'none', searchAttributes: SEARCH_ATTRIBUTES })
    : undefined;
  const scratch = mkdtempSync(join(tmpdir(), 'bench-compaction-'));
  try {
    if (opts.phases.includes('throughput')) {
      if (opts.store === 'embedded')
        await throughput(createEmbeddedObjectStore({ path: join(scratch, 'store.sqlite') }), opts, undefined);
      else await throughput(store, opts, { agent, pids: pidsWithArgs('--address', new URL(minio.endpoint).host) });
    }
    if (temporal) await jobs(store, temporal.address, requests);
    if (opts.phases.includes('gzip-levels')) gzipLevels();
  } finally {
    s3.destroy();
    proxy?.child.kill();
    rmSync(scratch, { recursive: true, force: true });
    await temporal?.stop();
    await minio.stop();
  }
}

/** The latency proxy (bench/support/latency-proxy.ts) in a child process, once it serves. */
async function startLatencyProxy(target: string, delayMs: number): Promise<{ endpoint: string; child: ChildProcess }> {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', join(__dirname, 'support', 'latency-proxy.ts'), target, String(delayMs)],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const [line] = (await once(createInterface({ input: child.stdout! }), 'line')) as [string];
  return { endpoint: line, child };
}

/**
 * Phases 2 and 3: a short and a long job through the workflow, their history length and the lease requests each made.
 */
async function jobs(
  store: ObjectStore,
  address: string,
  requests: { leasePut: number; leaseGet: number },
): Promise<void> {
  const refreshMs = 500;
  const settings = resolveSettings({
    timing: shrunkTiming(refreshMs, 30_000),
    targetSegmentBytes: 64 * 1024,
    heartbeatTimeoutMs: 30_000,
  });
  const holdForMs = 20 * refreshMs;
  // The work waits before reading (inside the heartbeat timeout), so the lease is held in steady state for a known
  // time.
  const slowWork = interceptStore(store, async (operation) => {
    if (operation === 'getStream') await new Promise((r) => setTimeout(r, holdForMs));
  });
  const connection = await NativeConnection.connect({ address: address });
  const worker = await createWorker({ store: slowWork, settings, connection, taskQueue: 'bench' });
  const client = new Client({ connection: await Connection.connect({ address: address }) });
  await worker.runUntil(async () => {
    for (const [label, segments, records] of [
      ['short', 2, 1_000],
      ['long', 8, 20_000],
    ] as const) {
      const ns = `bench-${label}`;
      await writeInputs(store, ns, 'bindings', makeInputs(segments, records, records * 3));
      const before = { ...requests };
      const started = performance.now();
      const handle = await startCompaction(client, { namespaceId: ns, group: 'bindings', taskQueue: 'bench' });
      const result = await handle.result();
      const elapsed = performance.now() - started;
      const events = (await handle.fetchHistory()).events?.length ?? 0;
      const puts = requests.leasePut - before.leasePut;
      const gets = requests.leaseGet - before.leaseGet;
      console.log(
        `${label} job: ${result.recordsOut} records, ${result.outputs.length} segments, ${(elapsed / 1000).toFixed(1)} s, ${events} history events; ` +
          `lease requests: ${puts} PUT, ${gets} GET over ${(elapsed / refreshMs).toFixed(1)} refresh intervals (1 create + 1 refresh per interval + 1 at publication expected)`,
      );
    }
  });
  await client.connection.close();
  await connection.close();
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
