/**
 * Compaction benchmark, on a real MinIO and Temporal dev server started here:
 *  1. the reference compactor's throughput next to a raw GET+PUT copy of the same bytes (ratio);
 *  2. Temporal history events of a short and a long job (they should be equal);
 *  3. S3 requests per lease refresh in steady state (target: one PUT, no GET).
 * Run: `eval "$(scripts/provision.sh)" && npx tsx bench/compaction.ts`.
 */
import { cpus, totalmem, platform, release } from 'node:os';
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';
import { Client, Connection } from '@temporalio/client';
import { DefaultLogger, NativeConnection, Runtime } from '@temporalio/worker';
import { startCompaction } from '../src/client';
import { compactGroup, NO_PROGRESS } from '../src/compactor';
import { resolveSettings, shrunkTiming } from '../src/config';
import { SEARCH_ATTRIBUTES, startMinio, startTemporalDevServer } from '../src/devservers';
import { namespaceId, newJobId, parseCompactionKey } from '../src/keys';
import { readRoot } from '../src/protocol';
import { createS3ObjectStore, type ObjectStore } from '../src/store';
import { createWorker } from '../src/worker';
import { interceptStore } from '../test/support/faults';
import { makeInputs, writeInputs } from '../test/support/records';

Runtime.install({ logger: new DefaultLogger('WARN') });

async function throughput(store: ObjectStore): Promise<void> {
  const ns = 'bench-throughput';
  const inputs = await writeInputs(store, ns, 'bindings', makeInputs(8, 25_000, 150_000));
  const { root } = await readRoot(store, namespaceId(ns));
  const keys = root.groups.bindings!;
  let bytesIn = 0;
  const copyStart = performance.now();
  await Promise.all(
    keys.map(async (key, i) => {
      const { body } = await store.get(key);
      bytesIn += body.length;
      await store.put(`bench/copy/${i}`, body);
    }),
  );
  const copyMs = performance.now() - copyStart;
  const job = { namespaceId: namespaceId(ns), jobId: newJobId() };
  const compactStart = performance.now();
  const progress = await compactGroup(store, job, inputs, 4 * 1024 * 1024, NO_PROGRESS, { onSegmentFinished: () => {}, onRecords: () => {} });
  const compactMs = performance.now() - compactStart;
  const mb = bytesIn / 1e6;
  console.log(`compactor: ${inputs.length} inputs, ${mb.toFixed(1)} MB compressed in, ${progress.recordsOut} records out in ${progress.segmentsFinished} segments`);
  console.log(`  reference compactor ${compactMs.toFixed(0)} ms: ${((progress.recordsOut / compactMs) * 1000).toFixed(0)} records/s, ${((mb / compactMs) * 1000).toFixed(1)} MB/s of input`);
  console.log(`  raw GET+PUT copy    ${copyMs.toFixed(0)} ms: ${((mb / copyMs) * 1000).toFixed(1)} MB/s`);
  console.log(`  ratio compactor/copy time: ${(compactMs / copyMs).toFixed(2)}`);
}

async function main(): Promise<void> {
  console.log(`machine: ${cpus().length} × ${cpus()[0]?.model}, ${(totalmem() / 2 ** 30).toFixed(0)} GiB, ${platform()} ${release()}, node ${process.version}`);
  const minio = await startMinio();
  const temporal = await startTemporalDevServer({ uiPort: 'none', searchAttributes: SEARCH_ATTRIBUTES });
  const s3 = new S3Client({
    endpoint: minio.endpoint,
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
  const store = createS3ObjectStore({ bucket: 'bench', client: s3 });
  try {
    await throughput(store);

    const refreshMs = 500;
    const settings = resolveSettings({ timing: shrunkTiming(refreshMs, 30_000), targetSegmentBytes: 64 * 1024, heartbeatTimeoutMs: 30_000 });
    const holdForMs = 20 * refreshMs;
    // The work waits before reading (inside the heartbeat timeout), so the lease is held in steady state for a known time.
    const slowWork = interceptStore(store, async (operation) => {
      if (operation === 'getStream') await new Promise((r) => setTimeout(r, holdForMs));
    });
    const connection = await NativeConnection.connect({ address: temporal.address });
    const worker = await createWorker({ store: slowWork, settings, connection, taskQueue: 'bench' });
    const client = new Client({ connection: await Connection.connect({ address: temporal.address }) });
    await worker.runUntil(async () => {
      for (const [label, segments, records] of [['short', 2, 1_000], ['long', 8, 20_000]] as const) {
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
  } finally {
    s3.destroy();
    await temporal.stop();
    await minio.stop();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
