/**
 * Storage over compaction cycles, on a real MinIO and Temporal dev server started here. Two
 * namespaces are fed the same way: each cycle a writer adds input segments that update a fixed key
 * space (so the live data stays the same size), a compaction replaces the group's
 * segments, and a collector pass runs. Namespace `bounded` is served by a worker at the default
 * reader grace (expiry + T); namespace `unbounded` by one whose reader grace is a year, so nothing a
 * compaction supersedes is ever reclaimed there. Each cycle prints, per namespace, the objects and
 * bytes under `metadata/segments/` (inputs) and `metadata/compactions/` (outputs and leases), the
 * live bytes (segments the root names) and what the reader grace holds.
 * Run: `eval "$(scripts/provision.sh)" && npx tsx bench/storage.ts` (see --help).
 */
import { cpus, loadavg, platform, release, totalmem } from 'node:os';
import { Connection, Client } from '@temporalio/client';
import { DefaultLogger, NativeConnection, Runtime } from '@temporalio/worker';
import { Command } from 'commander';
import { gcPassResult, startCompaction } from '../src/client';
import { resolveSettings, type CompactionSettings } from '../src/config';
import { SEARCH_ATTRIBUTES, startMinio, startTemporalDevServer } from '../src/devservers';
import { compactionsPrefix, inputSegmentsPrefix, namespaceId, type NamespaceId } from '../src/keys';
import { readRoot } from '../src/protocol';
import { jsonRootCodec, referencedKeys } from '../src/root';
import type { SegmentRecord } from '../src/segments';
import type { ObjectInfo, ObjectStore } from '../src/store';
import { createWorker } from '../src/worker';
import { writeInputSegment } from '../src/writer';
import type { gcWorkflow } from '../src/workflows/gc';
import { createBucket } from './support/fleet';
import { whole } from './support/args';

Runtime.install({ logger: new DefaultLogger('WARN') });

const program = new Command('storage')
  .option('--cycles <n>', 'compaction cycles', whole, 50)
  .option('--inputs <n>', 'input segments the writer adds per cycle', whole, 4)
  .option('--records <n>', 'records per input segment', whole, 500)
  .option('--key-space <n>', 'distinct keys the writer updates (the live data)', whole, 2000);

/** Short timings so the reader grace passes within a few cycles; every invariant of spec section 4 kept. */
const timing = {
  leaseRefreshIntervalMs: 400,
  operationDeadlineMs: 200,
  publicationBudgetMs: 400,
  clockSafetyMarginMs: 400,
  leaseExpiryMs: 6600,
};
const boundedSettings = resolveSettings({ timing, heartbeatTimeoutMs: 5000 });
const YEAR_MS = 365 * 24 * 3600 * 1000;
const unboundedSettings = resolveSettings({ timing: { ...timing, readerGraceMs: YEAR_MS }, heartbeatTimeoutMs: 5000 });
const GROUP = 'bindings';
const load = () =>
  `load ${loadavg()
    .map((l) => l.toFixed(2))
    .join(' ')}`;

interface Footprint {
  readonly inputs: { objects: number; bytes: number };
  readonly compactions: { objects: number; bytes: number };
  readonly liveBytes: number;
  readonly inGrace: number;
  /** Bytes of the segments the root lists as retired (held for readers of older roots). */
  readonly graceBytes: number;
}

async function listAll(store: ObjectStore, prefix: string): Promise<ObjectInfo[]> {
  const all: ObjectInfo[] = [];
  for (let cursor: string | undefined, first = true; first || cursor !== undefined; first = false) {
    const page = await store.list({ prefix, ...(cursor === undefined ? {} : { cursor }) });
    all.push(...page.objects);
    cursor = page.nextCursor;
  }
  return all;
}

async function footprint(store: ObjectStore, ns: NamespaceId): Promise<Footprint> {
  const [inputs, compactions, { root }] = await Promise.all([
    listAll(store, inputSegmentsPrefix(ns)),
    listAll(store, compactionsPrefix(ns)),
    readRoot(store, ns, jsonRootCodec),
  ]);
  const sum = (objects: ObjectInfo[]) => ({ objects: objects.length, bytes: objects.reduce((n, o) => n + o.size, 0) });
  const live = referencedKeys(root);
  const retired = new Set(root.retired?.map((r) => r.key));
  const bytesOf = (keys: ReadonlySet<string>) =>
    [...inputs, ...compactions].filter((o) => keys.has(o.key)).reduce((n, o) => n + o.size, 0);
  return {
    inputs: sum(inputs),
    compactions: sum(compactions),
    liveBytes: bytesOf(live),
    inGrace: retired.size,
    graceBytes: bytesOf(retired),
  };
}

interface Served {
  readonly ns: NamespaceId;
  readonly taskQueue: string;
  readonly settings: CompactionSettings;
}

async function main(): Promise<void> {
  const options = program.parse().opts<{ cycles: number; inputs: number; records: number; keySpace: number }>();
  const cpu = cpus();
  console.log(
    `machine: ${cpu.length} × ${cpu[0]?.model}, ${(totalmem() / 2 ** 30).toFixed(0)} GiB, ${platform()} ${release()}, node ${process.version}, ${load()}`,
  );
  console.log(
    `${options.cycles} cycles of ${options.inputs} input segments × ${options.records} records over ${options.keySpace} keys; ` +
      `expiry ${boundedSettings.timing.leaseExpiryMs} ms, T ${boundedSettings.timing.gcMinGraceMs} ms, reader grace ${boundedSettings.timing.readerGraceMs} ms (bounded) and a year (unbounded)`,
  );
  const minio = await startMinio();
  const temporal = await startTemporalDevServer({ uiPort: 'none', searchAttributes: SEARCH_ATTRIBUTES });
  const stops: (() => Promise<void>)[] = [];
  try {
    const { store } = await createBucket(minio, 'storage');
    const served: Served[] = [
      { ns: namespaceId('bounded'), taskQueue: 'storage-bounded', settings: boundedSettings },
      { ns: namespaceId('unbounded'), taskQueue: 'storage-unbounded', settings: unboundedSettings },
    ];
    for (const { taskQueue, settings } of served) {
      const connection = await NativeConnection.connect({ address: temporal.address });
      const worker = await createWorker({ store, settings, connection, taskQueue, log: () => {} });
      const running = worker.run();
      stops.push(async () => {
        worker.shutdown();
        await running;
        await connection.close();
      });
    }
    const connection = await Connection.connect({ address: temporal.address });
    stops.push(() => connection.close());
    const client = new Client({ connection });

    let seq = 0;
    const cycleInputs = (): SegmentRecord[][] =>
      Array.from({ length: options.inputs }, () => {
        const keys = new Set<number>();
        while (keys.size < Math.min(options.records, options.keySpace))
          keys.add(Math.floor(Math.random() * options.keySpace));
        return [...keys].map((k) => ({
          key: `k${String(k).padStart(8, '0')}`,
          seq: seq++,
          value: `v${seq}-${'x'.repeat(40)}`,
        }));
      });

    const kib = (n: number) => (n / 1024).toFixed(0).padStart(6);
    console.log(
      'cycle │ bounded: inputs obj/KiB, compactions obj/KiB, live KiB, retired in grace │ unbounded: inputs obj/KiB, compactions obj/KiB, live KiB, retired │ s',
    );
    const rows: { bounded: Footprint; unbounded: Footprint }[] = [];
    for (let cycle = 1; cycle <= options.cycles; cycle++) {
      const started = performance.now();
      const inputs = cycleInputs();
      const prints: Footprint[] = [];
      for (const { ns, taskQueue } of served) {
        for (const records of inputs) await writeInputSegment(store, { namespaceId: ns, group: GROUP }, records);
        const outcome = (await (await startCompaction(client, { namespaceId: ns, group: GROUP, taskQueue })).result())
          .outcome;
        if (outcome !== 'published') throw new Error(`cycle ${cycle}: compaction of ${ns} ended ${outcome}`);
        const handle = await client.workflow.start<typeof gcWorkflow>('gcWorkflow', {
          workflowId: `storage-gc-${ns}-${cycle}`,
          taskQueue,
          args: [{ namespaces: [ns] }],
        });
        const { complete } = await gcPassResult(handle);
        if (!complete) throw new Error(`cycle ${cycle}: the collector pass over ${ns} was incomplete`);
        prints.push(await footprint(store, ns));
      }
      const [bounded, unbounded] = prints as [Footprint, Footprint];
      rows.push({ bounded, unbounded });
      const cells = (f: Footprint) =>
        `${String(f.inputs.objects).padStart(4)}/${kib(f.inputs.bytes)}, ${String(f.compactions.objects).padStart(4)}/${kib(f.compactions.bytes)}, ${kib(f.liveBytes)}, ${String(f.inGrace).padStart(4)}`;
      console.log(
        `${String(cycle).padStart(5)} │ ${cells(bounded)} │ ${cells(unbounded)} │ ${((performance.now() - started) / 1000).toFixed(1)}`,
      );
    }
    const total = (f: Footprint) => ({
      objects: f.inputs.objects + f.compactions.objects,
      bytes: f.inputs.bytes + f.compactions.bytes,
    });
    const half = rows[Math.floor(rows.length / 2)]!;
    const last = rows.at(-1)!;
    for (const side of ['bounded', 'unbounded'] as const) {
      const [mid, end] = [total(half[side]), total(last[side])];
      const secondHalf = rows.slice(Math.floor(rows.length / 2)).map((r) => r[side]);
      const maxBytes = Math.max(...secondHalf.map((f) => total(f).bytes));
      const maxBeyondGrace = Math.max(...secondHalf.map((f) => total(f).bytes - f.liveBytes - f.graceBytes));
      console.log(
        `${side}: cycle ${Math.floor(rows.length / 2) + 1} → ${rows.length}: objects ${mid.objects} → ${end.objects}, KiB ${kib(mid.bytes).trim()} → ${kib(end.bytes).trim()} ` +
          `(live ${kib(last[side].liveBytes).trim()}, held by the reader grace ${kib(last[side].graceBytes).trim()}; the second half's largest footprint is ${(maxBytes / last[side].liveBytes).toFixed(1)}× live, ` +
          `at most ${kib(maxBeyondGrace).trim()} KiB beyond live + grace)`,
      );
    }
    console.log(`done, ${load()}`);
  } finally {
    for (const stop of stops.reverse()) await stop().catch(() => {});
    await temporal.stop();
    await minio.stop();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
