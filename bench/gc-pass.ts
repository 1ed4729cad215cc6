/**
 * A collector pass against a bare scan, side by side in one run, on MinIO and a Temporal dev server
 * started here. Three namespaces a round are seeded alike with N job prefixes of the
 * benchmark's mix (a third orphans with one old staged segment, a third expired leases with one,
 * a third live leases). The bare scan runs the pass's own plan against the store from this process
 * (the same S3 requests with the same concurrency, no Temporal); the pass is gcWorkflow on an
 * in-process worker, which runs a page's commands in one activity. Prints the machine, the times, their ratios,
 * the history length of every run of the pass, and its workflow events and activities per 1,000 prefixes; for each
 * side, MinIO's count of its S3 requests by API and the CPU seconds of this process (the worker's too), MinIO and
 * the dev server.
 * The bare scan runs twice, on namespaces seeded alike, without and with deletion manifests (at
 * most one PUT of a manifest part per delete batch), and prints their ratio; with
 * `--rounds N` it runs N such pairs and N passes, the order flipped every round so drifting load from other work
 * on the machine weighs on every side alike, and prints the ratios of their sums, and of the CPU
 * seconds this process and MinIO spent on each scan. `--reversed-first` starts with the reversed order (the pass
 * first), so the two orders of a costly size can be run one round at a time.
 * Run: `eval "$(scripts/provision.sh)" && npx tsx bench/gc-pass.ts --prefixes 3000`.
 */
import { cpus, loadavg, platform, release, totalmem } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client, Connection } from '@temporalio/client';
import { NativeConnection } from '@temporalio/worker';
import { Command } from 'commander';
import { resolveSettings } from '../src/config';
import { SEARCH_ATTRIBUTES, startMinio, startTemporalDevServer } from '../src/devservers';
import {
  leaseKey,
  namespaceId,
  newJobId,
  newPassId,
  newSegmentId,
  stagedSegmentKey,
  type NamespaceId,
} from '../src/keys';
import { createLeaseState, encodeLease } from '../src/lease';
import { updateRoot } from '../src/protocol';
import { executeOnStore, REPORT_LIMIT, runNamespacePass, startNamespacePass, type PassRules } from '../src/collector';
import { jsonRootCodec } from '../src/root';
import type { ObjectStore } from '../src/store';
import { inBatches } from '../src/store/batches';
import { createWorker } from '../src/worker';
import type { GcReport } from '../src/workflows/gc';
import { createBucket } from './support/fleet';
import { wholeFrom } from './support/args';
import { describeRequests, minioRequests, requestDelta } from './support/minio-requests';
import { pidsWithArgs, totalCpuSeconds } from './support/proc';

const program = new Command('gc-pass')
  .option('--prefixes <n>', 'job prefixes per namespace', wholeFrom(3), 3000)
  .option('--rounds <n>', 'pairs of bare scans without and with manifests', wholeFrom(1), 1)
  .option('--no-pass', 'the bare scans only, no gcWorkflow pass (and no namespace seeded for it)')
  .option('--reversed-first', 'the first round in the reversed order: the pass, then with manifests, then without');

const settings = resolveSettings({
  timing: {
    leaseRefreshIntervalMs: 2000,
    operationDeadlineMs: 1000,
    publicationBudgetMs: 4000,
    clockSafetyMarginMs: 500,
  },
  heartbeatTimeoutMs: 5000,
});
const load = () =>
  `load ${loadavg()
    .map((l) => l.toFixed(2))
    .join(' ')}`;

async function seed(store: ObjectStore, ns: NamespaceId, n: number): Promise<void> {
  await updateRoot(store, ns, (root) => root, { codec: jsonRootCodec });
  await inBatches(
    Array.from({ length: n }, (_, i) => i),
    1,
    32,
    async ([i]) => {
      const job = newJobId();
      const kind = i! % 3;
      if (kind !== 0) {
        const heartbeat = kind === 1 ? Date.now() - 60_000 : Date.now() + 3_600_000;
        await store.put(
          leaseKey(ns, job),
          encodeLease(createLeaseState({ jobId: job, namespaceId: ns, ownerId: 'bench', nowMs: heartbeat })),
        );
      }
      if (kind !== 2)
        await store.put(stagedSegmentKey(ns, job, newSegmentId(), 'mseg'), new TextEncoder().encode('staged'));
    },
  );
}

async function main(): Promise<void> {
  const { prefixes, rounds, pass, reversedFirst } = program
    .parse()
    .opts<{ prefixes: number; rounds: number; pass: boolean; reversedFirst?: boolean }>();
  const cpu = cpus();
  console.log(
    `machine: ${cpu.length} × ${cpu[0]?.model}, ${(totalmem() / 2 ** 30).toFixed(0)} GiB, ${platform()} ${release()}, node ${process.version}, ${load()}`,
  );
  process.env.MINIO_PROMETHEUS_AUTH_TYPE = 'public';
  const minio = await startMinio();
  const temporal = pass
    ? await startTemporalDevServer({ uiPort: 'none', searchAttributes: SEARCH_ATTRIBUTES })
    : undefined;
  try {
    const { store } = await createBucket(minio, 'gc-pass');
    const minioPids = pidsWithArgs('--address', new URL(minio.endpoint).host);
    const temporalPids = temporal ? pidsWithArgs('start-dev', '--port', temporal.address.split(':').at(-1)!) : [];
    const cpuSeconds = () => {
      const own = process.cpuUsage();
      return {
        own: (own.user + own.system) / 1e6,
        minio: totalCpuSeconds(minioPids),
        temporal: totalCpuSeconds(temporalPids),
      };
    };
    /** MinIO's count of the S3 requests since `before`, by API: the pass and the scans should make the same. */
    const requestsSince = async (before: Map<string, number>): Promise<string> => {
      const delta = requestDelta(await minioRequests(minio), before);
      return `S3 requests ${[...delta.values()].reduce((a, b) => a + b, 0)} (${describeRequests(delta)})`;
    };
    const pairs = Array.from({ length: rounds }, (_, i) => ({
      bare: namespaceId(`bare-${i}`),
      manifested: namespaceId(`manifested-${i}`),
      viaTemporal: temporal ? namespaceId(`pass-${i}`) : undefined,
    }));
    const seeded = pairs.flatMap((p) => [p.bare, p.manifested, ...(p.viaTemporal ? [p.viaTemporal] : [])]);
    for (const ns of seeded) await seed(store, ns, prefixes);
    // Every staged segment older than the staging grace, so both sides delete the same objects.
    await sleep(settings.timing.stagingGraceMs + 1000);
    console.log(`seeded ${seeded.length} × ${prefixes} job prefixes (orphaned, expired, live in thirds), ${load()}`);

    const rules: PassRules = {
      nowMs: Date.now(),
      leaseRefreshIntervalMs: settings.timing.leaseRefreshIntervalMs,
      leaseExpiryMs: settings.timing.leaseExpiryMs,
      stagingGraceMs: settings.timing.stagingGraceMs,
      readerGraceMs: settings.timing.readerGraceMs,
      lostWriteGraceMs: settings.timing.lostWriteGraceMs,
      dryRun: false,
      prefixesPerPage: 100,
      prefixConcurrency: 8,
      keysPerFlush: 4000,
      reportLimit: REPORT_LIMIT,
      passId: newPassId(Date.now()),
      manifests: false,
    };
    /**
     * CPU seconds of the scans, this process and MinIO together: less swayed by other work on the machine than their
     * time.
     */
    const scanCpu = { without: 0, with: 0 };
    /** The pass's plan on the store from this process, no Temporal; `manifests` unset, it writes them. */
    const bareScan = async (ns: NamespaceId, scanRules: PassRules, label: string): Promise<number> => {
      let parts = 0;
      const onManifestPart = () => void parts++;
      const requestsBefore = await minioRequests(minio);
      const [started, cpuBefore] = [performance.now(), cpuSeconds()];
      const scan = await runNamespacePass(
        startNamespacePass(ns, scanRules),
        (command, progress) =>
          executeOnStore({ store, namespaceId: ns, rules: scanRules, codec: jsonRootCodec }, command, {
            ...progress,
            onManifestPart,
          }),
        async () => {},
      );
      const [ms, cpuAfter] = [performance.now() - started, cpuSeconds()];
      const requests = await requestsSince(requestsBefore);
      console.log(
        `bare scan ${label}: ${(ms / 1000).toFixed(1)} s, ${(prefixes / (ms / 1000)).toFixed(0)} prefixes/s, ` +
          `${requests}, ` +
          `CPU s: this process ${(cpuAfter.own - cpuBefore.own).toFixed(1)}, MinIO ${(cpuAfter.minio - cpuBefore.minio).toFixed(1)}; ` +
          `claimed ${scan.totals.claimed}, orphaned ${scan.totals.orphaned}, live ${scan.totals.live}, deleted ${scan.totals.objectsDeleted} and ${scan.totals.leasesDeleted} leases, ` +
          `manifests ${scan.manifests.length} (${parts} parts), ${load()}`,
      );
      scanCpu[scanRules.manifests === false ? 'without' : 'with'] +=
        cpuAfter.own - cpuBefore.own + cpuAfter.minio - cpuBefore.minio;
      return ms;
    };
    const connection = temporal && (await NativeConnection.connect({ address: temporal.address }));
    const worker =
      connection && (await createWorker({ store, settings, connection, taskQueue: 'gc-pass', log: () => {} }));
    const running = worker?.run();
    const client = temporal && new Client({ connection: await Connection.connect({ address: temporal.address }) });
    /** One gcWorkflow pass over `ns`: its time, and the events and activities of all its runs. */
    const viaTemporal = async (ns: NamespaceId, round: number): Promise<number> => {
      const workflowId = `gc-pass-bench-${round}`;
      const requestsBefore = await minioRequests(minio);
      const [started, cpuBefore] = [performance.now(), cpuSeconds()];
      const report = await client!.workflow.execute<(input: { namespaces: string[] }) => Promise<GcReport>>(
        'gcWorkflow',
        { taskQueue: 'gc-pass', workflowId, args: [{ namespaces: [ns] }] },
      );
      const [passMs, cpuAfter] = [performance.now() - started, cpuSeconds()];
      const requests = await requestsSince(requestsBefore);
      // Every run of the pass, continued-as-new ones included: each history must stay under 10,000 events.
      const histories: number[] = [];
      let activities = 0;
      for await (const run of client!.workflow.list({ query: `WorkflowId STARTS_WITH "${workflowId}"` })) {
        const events = (await client!.workflow.getHandle(run.workflowId, run.runId).fetchHistory()).events ?? [];
        histories.push(events.length);
        activities += events.filter((e) => e.activityTaskScheduledEventAttributes).length;
      }
      const events = histories.reduce((a, b) => a + b, 0);
      const perThousand = (n: number) => ((n * 1000) / prefixes).toFixed(1);
      console.log(
        `gcWorkflow pass: ${(passMs / 1000).toFixed(1)} s, ${(prefixes / (passMs / 1000)).toFixed(0)} prefixes/s, ` +
          `${requests}; ` +
          `CPU s: this process (worker) ${(cpuAfter.own - cpuBefore.own).toFixed(1)}, MinIO ${(cpuAfter.minio - cpuBefore.minio).toFixed(1)}, ` +
          `Temporal ${(cpuAfter.temporal - cpuBefore.temporal).toFixed(1)}; ` +
          `claimed ${report.totals.claimed}, orphaned ${report.totals.orphaned}, live ${report.totals.live}, deleted ${report.totals.objectsDeleted}, ${load()}`,
      );
      console.log(
        `  histories of its ${histories.length} runs (events): ${histories.sort((a, b) => b - a).join(', ')}; ` +
          `per 1,000 prefixes: ${perThousand(events)} workflow events, ${perThousand(activities)} activities`,
      );
      return passMs;
    };
    try {
      let [bareMs, manifestedMs, passMs] = [0, 0, 0];
      for (const [round, pair] of pairs.entries()) {
        const without = () => bareScan(pair.bare, rules, 'without manifests').then((ms) => (bareMs += ms));
        const withManifests = () =>
          bareScan(
            pair.manifested,
            { ...rules, passId: newPassId(rules.nowMs), manifests: true },
            'with manifests',
          ).then((ms) => (manifestedMs += ms));
        const pass = pair.viaTemporal && (() => viaTemporal(pair.viaTemporal!, round).then((ms) => (passMs += ms)));
        const order = [without, withManifests, ...(pass ? [pass] : [])];
        const reversed = (round % 2 === 1) !== (reversedFirst ?? false);
        for (const run of reversed ? order.reverse() : order) await run();
      }
      const sums = rounds > 1 ? ` (sums of ${rounds} rounds)` : '';
      console.log(
        `ratio with/without manifests${sums}: ${(manifestedMs / bareMs).toFixed(2)}; ` +
          `CPU seconds of this process and MinIO: ${scanCpu.with.toFixed(1)} against ${scanCpu.without.toFixed(1)}, ratio ${(scanCpu.with / scanCpu.without).toFixed(2)}`,
      );
      // The pass writes manifests: its own requests are those of the bare scan with manifests.
      if (temporal)
        console.log(
          `ratio pass/bare${sums}: ${(passMs / manifestedMs).toFixed(2)} against the bare scan with manifests, ` +
            `${(passMs / bareMs).toFixed(2)} against the one without`,
        );
    } finally {
      worker?.shutdown();
      await running;
      await connection?.close();
    }
  } finally {
    await temporal?.stop();
    await minio.stop();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
