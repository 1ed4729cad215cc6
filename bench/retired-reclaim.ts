/**
 * The reclaim of superseded segments at scale, on the embedded store (a SQLite file in a temporary
 * directory) with every request delayed by --latency-ms, an S3 request's order:
 * one namespace with N keys under `metadata/segments/` (R of them retired and due, the rest lost
 * writes) and M due retired outputs under job prefixes (100 per job). The store is seeded once and
 * copied for each run, so every code tree meets the same bucket; each tree runs in a process of its
 * own, so none inherits another's heap or RSS. Per tree it prints the time, the
 * longest gap between two progress calls (the activity heartbeats at each), LIST requests, keys
 * deleted before the listing of `metadata/segments/` ended, the most heap retained over the
 * baseline (after a full GC at every 10th progress call; that GC time is not counted in the
 * time) and the peak growth of RSS (sampled every 10 ms).
 * Run (this tree beside the one before the change, extracted out of the repo):
 *   mkdir -p /tmp/retired-before && git archive 3078ac8 src | tar -x -C /tmp/retired-before
 *   eval "$(scripts/provision.sh node)" && NODE_PATH=$PWD/node_modules \
 *     node --expose-gc --import tsx bench/retired-reclaim.ts --code src,/tmp/retired-before/src
 * Options: --keys N (default 100000), --retired R (default 1000), --outputs M (default 8000),
 *          --latency-ms L (default 5), --code DIR[,DIR…] (trees of src/, default this one's).
 */
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { cpus, loadavg, platform, release, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  inputSegmentKey,
  inputSegmentsPrefix,
  namespaceId,
  newJobId,
  newSegmentId,
  stagedSegmentKey,
} from '../src/keys';
import { readRoot, updateRoot } from '../src/protocol';
import type { RetiredReclaimOptions } from '../src/collector/rules';
import { jsonRootCodec } from '../src/root';
import { createEmbeddedObjectStore, type ObjectStore } from '../src/store';
import { inBatches } from '../src/store/batches';

function option(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && process.argv[i + 1] !== undefined ? (process.argv[i + 1] as string) : fallback;
}
const KEYS = Number(option('keys', '100000'));
const RETIRED = Number(option('retired', '1000'));
const OUTPUTS = Number(option('outputs', '8000'));
const LATENCY_MS = Number(option('latency-ms', '5'));
const TREES = option('code', 'src').split(',');
const OUTPUTS_PER_JOB = 100;

const ns = namespaceId('bench-retired');
const gc = (globalThis as { gc?: () => void }).gc;
const mib = (bytes: number) => `${(bytes / 2 ** 20).toFixed(1)} MiB`;

/** The store this bench seeds: due retired inputs and outputs in the root, every other input a lost write. */
async function seed(path: string): Promise<void> {
  const store = createEmbeddedObjectStore({ path });
  const inputs = Array.from({ length: KEYS }, () => inputSegmentKey(ns, newSegmentId(), 'mseg'));
  const outputs = Array.from({ length: Math.ceil(OUTPUTS / OUTPUTS_PER_JOB) }, () => newJobId())
    .flatMap((job) => Array.from({ length: OUTPUTS_PER_JOB }, () => stagedSegmentKey(ns, job, newSegmentId(), 'mseg')))
    .slice(0, OUTPUTS);
  const body = new Uint8Array(100).fill(0x61);
  await inBatches([...inputs, ...outputs], 500, 4, (batch) => Promise.all(batch.map((k) => store.put(k, body))));
  const retired = [...inputs.slice(0, RETIRED), ...outputs].map((key) => ({ key, retired_at_ms: 1 }));
  await updateRoot(store, ns, (root) => ({ ...root, retired }), { codec: jsonRootCodec });
  await store.close();
}

interface Measure {
  lists: number;
  deletedBeforeListingEnded: number;
  segmentsListed: boolean;
}

/** `store` with every request delayed by LATENCY_MS, and the counts the bench prints. */
function measuredStore(store: ObjectStore, m: Measure): ObjectStore {
  const delayed =
    <A extends unknown[], R>(fn: (...args: A) => Promise<R>) =>
    async (...args: A): Promise<R> => {
      await sleep(LATENCY_MS);
      return fn(...args);
    };
  return Object.assign(Object.create(store) as ObjectStore, {
    get: delayed(store.get.bind(store)),
    putIfMatch: delayed(store.putIfMatch.bind(store)),
    list: delayed(async (request: Parameters<ObjectStore['list']>[0]) => {
      m.lists++;
      const page = await store.list(request);
      if (request.prefix === inputSegmentsPrefix(ns) && page.nextCursor === undefined) m.segmentsListed = true;
      return page;
    }),
    deleteMany: delayed(async (keys: readonly string[]) => {
      if (!m.segmentsListed) m.deletedBeforeListingEnded += keys.length;
      return store.deleteMany(keys);
    }),
  });
}

type Reclaim = (
  ...args: unknown[]
) => Promise<{ tally?: { retiredDeleted: number; lostWritesDeleted: number; retiredRecordsDropped: number } }>;

async function run(tree: string, seeded: string, dir: string): Promise<void> {
  const path = join(dir, `run-${Math.random().toString(36).slice(2)}.sqlite`);
  copyFileSync(seeded, path);
  const store = createEmbeddedObjectStore({ path });
  // Each tree's own module, its imports resolved in its own tree.
  const { reclaimRetiredSegments } = (await import(resolve(tree, 'protocol/retired-reclaim.ts'))) as {
    reclaimRetiredSegments: Reclaim;
  };
  const m: Measure = { lists: 0, deletedBeforeListingEnded: 0, segmentsListed: false };
  const options: RetiredReclaimOptions = {
    nowMs: Date.now() + 600_000,
    readerGraceMs: 1000,
    lostWriteGraceMs: 60_000,
    keysPerFlush: 4000,
    reportLimit: 100,
  };
  gc?.();
  const base = process.memoryUsage();
  const peak = { heap: base.heapUsed, rss: base.rss };
  const sampler = setInterval(() => {
    const now = process.memoryUsage();
    peak.heap = Math.max(peak.heap, now.heapUsed);
    peak.rss = Math.max(peak.rss, now.rss);
  }, 10);
  let last = performance.now();
  let longestGap = 0;
  let calls = 0;
  let retained = 0;
  let gcMs = 0;
  const onProgress = () => {
    const now = performance.now();
    longestGap = Math.max(longestGap, now - last);
    if (gc && ++calls % 10 === 0) {
      gc();
      retained = Math.max(retained, process.memoryUsage().heapUsed - base.heapUsed);
      gcMs += performance.now() - now;
    }
    last = performance.now();
  };
  const start = performance.now();
  const store_ = measuredStore(store, m);
  const outcome = await reclaimRetiredSegments(store_, ns, options, { codec: jsonRootCodec, onProgress });
  onProgress();
  const ms = performance.now() - start - gcMs;
  clearInterval(sampler);
  const left = (await store.list({ prefix: inputSegmentsPrefix(ns), maxKeys: 1 })).objects.length;
  const records = (await readRoot(store, ns, jsonRootCodec)).root.retired?.length ?? 0;
  await store.close();
  rmSync(path, { force: true });
  const t = outcome.tally;
  console.log(
    `${tree}: ${(ms / 1000).toFixed(1)} s, longest gap between progress calls ${(longestGap / 1000).toFixed(1)} s, ${m.lists} LISTs, ` +
      `${m.deletedBeforeListingEnded} deleted before the listing of metadata/segments/ ended; heap retained +${mib(retained)} (peak +${mib(peak.heap - base.heapUsed)} with garbage), RSS +${mib(peak.rss - base.rss)}; ` +
      `retired deleted ${t?.retiredDeleted}, lost writes ${t?.lostWritesDeleted}, records dropped ${t?.retiredRecordsDropped}; left: ${left ? 'some keys' : 'no key'}, ${records} records`,
  );
}

async function main(): Promise<void> {
  const cpu = cpus();
  console.log(
    `machine: ${cpu.length} × ${cpu[0]?.model}, ${platform()} ${release()}, node ${process.version}, load ${loadavg()[0]?.toFixed(2)}${gc ? '' : ' (no --expose-gc: baselines are rougher)'}`,
  );
  console.log(
    `bucket: ${KEYS} keys under metadata/segments/ (${RETIRED} retired and due, ${KEYS - RETIRED} lost writes), ${OUTPUTS} due retired outputs under ${Math.ceil(OUTPUTS / OUTPUTS_PER_JOB)} job prefixes; ${LATENCY_MS} ms per request`,
  );
  const dir = mkdtempSync(join(tmpdir(), 'retired-reclaim-'));
  try {
    const seeded = join(dir, 'seeded.sqlite');
    const start = performance.now();
    await seed(seeded);
    console.log(`seeded in ${((performance.now() - start) / 1000).toFixed(1)} s`);
    for (const tree of TREES) {
      execFileSync(
        process.execPath,
        [...process.execArgv, __filename, ...process.argv.slice(2), '--run', tree, '--seeded', seeded, '--dir', dir],
        { stdio: 'inherit' },
      );
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const one = process.argv.includes('--run');
void (one ? run(option('run', ''), option('seeded', ''), option('dir', '')) : main()).catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
