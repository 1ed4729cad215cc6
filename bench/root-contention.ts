/**
 * Root contention: N groups of one namespace whose publications all start at once, on a MinIO
 * started here. Each group holds two (empty) input segments and one job with a live lease; every job
 * then runs the real `publishCompaction` at the worker's default settings, all at the same moment,
 * through one store (the worker's default socket pool). Prints the machine and its load, then per N
 * and run: published / superseded, lost races of the superseded, S3 requests by API (MinIO's own
 * count) and wall time from the start to the last outcome.
 * Run: `eval "$(scripts/provision.sh)" && npx tsx bench/root-contention.ts --groups 50,200`
 */
import { execFileSync } from 'node:child_process';
import { cpus, loadavg } from 'node:os';
import { Command } from 'commander';
import { resolveSettings, type CompactionSettings } from '../src/config';
import { startMinio, type S3Server } from '../src/devservers';
import { familyGroup, namespaceId, newJobId, newSegmentId, stagedSegmentKey } from '../src/keys';
import {
  createJobLease,
  publicationLimits,
  publishCompaction,
  readRoot,
  type PublicationOutcome,
} from '../src/protocol';
import { groupSegments, jsonRootCodec } from '../src/root';
import { SEGMENT_EXTENSION } from '../src/segments';
import { createS3ObjectStore, type ObjectStore } from '../src/store';
import { whole } from './support/args';
import { createBucket, seedJobs } from './support/fleet';
import { describeRequests, minioRequests, requestDelta } from './support/minio-requests';

const list = (raw: string): number[] => raw.split(',').map(whole);
const program = new Command('root-contention')
  .option('--groups <n,…>', 'groups of the one namespace, each publishing once', list, [50, 200])
  .option('--runs <n>', 'runs of each N, each on a namespace of its own', whole, 3)
  .option('--max-root-races <n>', "maxRootRaces (default: the setting's)", whole)
  .option('--backoff-ms <ms>', "rootRaceBackoffMs (default: the setting's)", whole)
  .option('--backoff-max-ms <ms>', "rootRaceBackoffMaxMs (default: the setting's)", whole);

interface Options {
  groups: number[];
  runs: number;
  maxRootRaces?: number;
  backoffMs?: number;
  backoffMaxMs?: number;
}

const load = (): string =>
  `load ${loadavg()
    .map((l) => l.toFixed(2))
    .join(' ')}`;

/** One run: N jobs of namespace `ns` leased, then published at once. */
async function run(
  minio: S3Server,
  store: ObjectStore,
  settings: CompactionSettings,
  n: number,
  name: string,
): Promise<void> {
  const jobs = await seedJobs(store, name, n, { inputsPerGroup: 2, groupsPerNamespace: n });
  const ns = namespaceId(jobs[0]!.namespaceId);
  const { root } = await readRoot(store, ns, jsonRootCodec);
  const requests = await Promise.all(
    jobs.map(async (j) => {
      const job = { namespaceId: ns, jobId: newJobId() };
      const group = familyGroup(j.group);
      await createJobLease(store, { ...job, ownerId: 'bench', startedAtMs: Date.now() });
      const output = stagedSegmentKey(ns, job.jobId, newSegmentId(), SEGMENT_EXTENSION);
      return { ...job, group, inputs: groupSegments(root, group), outputs: [output] };
    }),
  );
  const before = await minioRequests(minio);
  const loadBefore = load();
  const startedAt = performance.now();
  const outcomes = await Promise.all(
    requests.map((request) =>
      publishCompaction(store, request, {
        ...publicationLimits(settings),
        clock: { leaseClockMs: Date.now, elapsedMs: () => performance.now() - startedAt },
        codec: jsonRootCodec,
      }),
    ),
  );
  const wallMs = performance.now() - startedAt;
  const delta = requestDelta(await minioRequests(minio), before);
  const count = (kind: PublicationOutcome['outcome']) => outcomes.filter((o) => o.outcome === kind).length;
  const s3 = [...delta.values()].reduce((a, b) => a + b, 0);
  console.log(
    `N ${n} (${name}): published ${count('published')}/${n}, superseded ${count('superseded')}, other ${n - count('published') - count('superseded')}; ` +
      `wall ${(wallMs / 1000).toFixed(2)} s; S3 requests ${s3} (${(s3 / n).toFixed(1)} per job: ${describeRequests(delta)}); ${loadBefore} → ${load()}`,
  );
}

async function main(): Promise<void> {
  const opts = program.parse().opts<Options>();
  const settings = resolveSettings({
    ...(opts.maxRootRaces && { maxRootRaces: opts.maxRootRaces }),
    ...(opts.backoffMs && { rootRaceBackoffMs: opts.backoffMs }),
    ...(opts.backoffMaxMs && { rootRaceBackoffMaxMs: opts.backoffMaxMs }),
  });
  console.log(
    `machine: ${execFileSync('uname', ['-srmo'], { encoding: 'utf8' }).trim()}, nproc ${cpus().length} (${cpus()[0]?.model}), node ${process.version}, ${load()}`,
  );
  console.log(
    `settings: maxRootRaces ${settings.maxRootRaces}, rootRaceBackoffMs ${settings.rootRaceBackoffMs}, rootRaceBackoffMaxMs ${settings.rootRaceBackoffMaxMs}`,
  );
  // MinIO's request counters, unauthenticated: the benchmark reads them without a bearer token.
  process.env.MINIO_PROMETHEUS_AUTH_TYPE = 'public';
  const minio = await startMinio();
  try {
    const { name: bucket } = await createBucket(minio, 'contention');
    // The worker's store: its own client and default socket pool, as one worker publishing them all.
    const store = createS3ObjectStore({
      bucket,
      clientConfig: {
        endpoint: minio.endpoint,
        region: minio.region,
        forcePathStyle: true,
        credentials: { accessKeyId: minio.accessKey, secretAccessKey: minio.secretKey },
      },
    });
    for (const n of opts.groups)
      for (let r = 1; r <= opts.runs; r++) await run(minio, store, settings, n, `c${n}r${r}`);
  } finally {
    await minio.stop();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
