/**
 * Writes every golden file of test/golden from today's code (`npm run golden`): the lease files the
 * codec is held to byte for byte, and the workflow histories the replay tests hold the workflows to
 * (gc.test.ts, bad-input.test.ts). The histories are recorded on a Temporal dev server and an
 * embedded store of their own, so the command needs nothing running. A workflow change re-records
 * them in the same commit; the upgrade then drains (docs/operations.md).
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { historyToJSON } from '@temporalio/common/lib/proto-utils';
import { NativeConnection } from '@temporalio/worker';
import { setTimeout as sleep } from 'node:timers/promises';
import { startCompaction } from '../src/client';
import { SEARCH_ATTRIBUTES, startTemporalDevServer } from '../src/devservers';
import { jobId, leaseKey, namespaceId, newJobId, newSegmentId, stagedSegmentKey } from '../src/keys';
import { claimLeaseState, createLeaseState, encodeLease, refreshLeaseState } from '../src/lease';
import { updateRoot } from '../src/protocol';
import { jsonRootCodec } from '../src/root';
import { createEmbeddedObjectStore, type ObjectStore } from '../src/store';
import { createWorker } from '../src/worker';
import { installRuntime } from '../src/worker/runtime';
import { writeInputSegment } from '../src/writer';
import type { GcInput } from '../src/workflows/gc';
import { quickExpirySettings } from '../test/support/quick-expiry';

const dir = join(__dirname, '..', 'test', 'golden');
/** The pass that claims the golden `reaping` lease (test/unit/lease.test.ts names the same). */
const GOLDEN_PASS_ID = 'gc_0000000004000_0123456789abcdef';

/** The history files, and the ids of the runs they record. */
const GOLDEN_HISTORIES = {
  gcPass: { file: 'gc-pass-history.json', workflowId: 'gc-golden' },
  gcNamespace: { file: 'gc-namespace-history.json', workflowId: 'gc-golden/golden-gc' },
  compactionPublished: { file: 'compaction-published-history.json', namespace: 'golden-published' },
  compactionCorruptInput: { file: 'compaction-corrupt-input-history.json', namespace: 'golden-corrupt' },
} as const;
const GROUP = 'inodes';

function writeLeases(): void {
  const active = refreshLeaseState(
    createLeaseState({
      jobId: jobId('cmp_0123456789abcdef0123456789abcdef'),
      namespaceId: namespaceId('demo'),
      ownerId: 'worker-7@host',
      nowMs: 1000,
    }),
    3000,
  );
  writeFileSync(join(dir, 'lease-active.json'), encodeLease(active));
  writeFileSync(join(dir, 'lease-reaping.json'), encodeLease(claimLeaseState(active, GOLDEN_PASS_ID, 4000)));
}

/** The timings of the collector tests: a staging grace of 7.6 s to wait out. */
const settings = quickExpirySettings;

const records = (from: number) =>
  Array.from({ length: 50 }, (_, i) => ({
    key: `inode/${String(from + i).padStart(4, '0')}`,
    seq: from + i,
    value: `v${from + i}`,
  }));

/**
 * A collector pass over one namespace, pages of 2, 2 at a time: two expired leases, a live one and two orphans, under
 * an empty root.
 */
async function recordGcPass(client: Client, store: ObjectStore, taskQueue: string): Promise<void> {
  const ns = namespaceId('golden-gc');
  await updateRoot(store, ns, (root) => root, { codec: jsonRootCodec });
  const jobs = Array.from({ length: 5 }, () => newJobId()).sort();
  for (const job of jobs)
    await store.put(stagedSegmentKey(ns, job, newSegmentId(), 'seg'), new TextEncoder().encode(`staged by ${job}`));
  await sleep(settings.timing.stagingGraceMs + 500);
  const lease = (job: (typeof jobs)[number], heartbeatAtMs: number) =>
    store.put(
      leaseKey(ns, job),
      encodeLease(createLeaseState({ jobId: job, namespaceId: ns, ownerId: 'golden-job', nowMs: heartbeatAtMs })),
    );
  const expiredAt = Date.now() - settings.timing.leaseExpiryMs - 1000;
  await lease(jobs[0]!, expiredAt);
  await lease(jobs[2]!, Date.now());
  await lease(jobs[3]!, expiredAt);
  const input: GcInput = { namespaces: [ns], prefixesPerPage: 2, prefixConcurrency: 2 };
  await client.workflow.execute('gcWorkflow', {
    taskQueue,
    workflowId: GOLDEN_HISTORIES.gcPass.workflowId,
    args: [input],
  });
  await save(client, GOLDEN_HISTORIES.gcPass);
  await save(client, GOLDEN_HISTORIES.gcNamespace);
}

/** A compaction of three input segments that publishes, and one whose third input is truncated (SegmentCorrupt). */
async function recordCompactions(client: Client, store: ObjectStore, taskQueue: string): Promise<void> {
  for (const { namespace, corrupt } of [
    { ...GOLDEN_HISTORIES.compactionPublished, corrupt: false },
    { ...GOLDEN_HISTORIES.compactionCorruptInput, corrupt: true },
  ]) {
    const keys: string[] = [];
    for (const from of [0, 25, 60])
      keys.push(
        await writeInputSegment(store, { namespaceId: namespace, group: GROUP }, records(from), {
          writerBudgetMs: 60_000,
        }),
      );
    if (corrupt) {
      const { body } = await store.get(keys[2]!);
      await store.put(keys[2]!, body.subarray(0, Math.floor(body.length / 2)));
    }
    const handle = await startCompaction(client, {
      namespaceId: namespace,
      group: GROUP,
      taskQueue,
      workerTimeoutMs: false,
    });
    await handle.result().catch((err: unknown) => {
      if (!corrupt) throw err;
    });
    await save(client, {
      file: corrupt ? GOLDEN_HISTORIES.compactionCorruptInput.file : GOLDEN_HISTORIES.compactionPublished.file,
      workflowId: handle.workflowId,
    });
  }
}

async function save(client: Client, { file, workflowId }: { file: string; workflowId: string }): Promise<void> {
  const history = await client.workflow.getHandle(workflowId).fetchHistory();
  // Stack traces name this machine's paths, and replay never reads them.
  const json: unknown = JSON.parse(historyToJSON(history));
  writeFileSync(
    join(dir, file),
    `${JSON.stringify(json, (key, value: unknown) => (key === 'stackTrace' ? undefined : value), 1)}\n`,
  );
  console.log(`recorded ${file} (${history.events?.length ?? 0} events)`);
}

async function recordHistories(): Promise<void> {
  // The corrupt-input run fails on purpose: the worker's warning about it is noise here.
  installRuntime({ ...process.env, COMPACTION_LOG_LEVEL: process.env.COMPACTION_LOG_LEVEL || 'ERROR' });
  const server = await startTemporalDevServer({ uiPort: 'none', searchAttributes: SEARCH_ATTRIBUTES });
  const store = createEmbeddedObjectStore({ path: ':memory:' });
  const taskQueue = 'golden';
  try {
    const connection = await NativeConnection.connect({ address: server.address });
    const worker = await createWorker({
      store,
      settings,
      connection,
      taskQueue,
      role: 'all',
      storeCheck: 'skip',
      log: () => {},
    });
    const clientConnection = await Connection.connect({ address: server.address });
    const client = new Client({ connection: clientConnection });
    await worker.runUntil(async () => {
      await recordGcPass(client, store, taskQueue);
      await recordCompactions(client, store, taskQueue);
    });
    await clientConnection.close();
    await connection.close();
  } finally {
    await store.close();
    await server.stop();
  }
}

writeLeases();
recordHistories().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
