/**
 * Writes the golden files of test/golden from the current code: the lease files, which the unit tests
 * hold the codec to byte for byte, and the compaction workflow's histories (a publication, a failure on
 * a corrupt input), recorded on a dev server of its own and replayed by bad-input.test.ts. Run it
 * again in the commit that changes the compaction workflow's steps (docs/operations.md, upgrades).
 *
 *   npx tsx scripts/write-golden.ts
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { historyToJSON } from '@temporalio/common/lib/proto-utils';
import { DefaultLogger, NativeConnection, Runtime } from '@temporalio/worker';
import { startCompaction } from '../src/client';
import { resolveSettings, shrunkTiming } from '../src/config';
import { SEARCH_ATTRIBUTES, startTemporalDevServer } from '../src/devservers';
import { jobId, namespaceId } from '../src/keys';
import { claimLeaseState, createLeaseState, encodeLease, refreshLeaseState } from '../src/lease';
import { createEmbeddedObjectStore, type ObjectStore } from '../src/store';
import { createWorker } from '../src/worker';
import { makeInputs, writeInputs } from '../test/support/records';

const dir = join(__dirname, '..', 'test', 'golden');

function writeLeases(): void {
  const active = refreshLeaseState(
    createLeaseState({ jobId: jobId('cmp_0123456789abcdef0123456789abcdef'), namespaceId: namespaceId('demo'), ownerId: 'worker-7@host', nowMs: 1000 }),
    3000,
  );
  writeFileSync(join(dir, 'lease-active.json'), encodeLease(active));
  writeFileSync(join(dir, 'lease-reaping.json'), encodeLease(claimLeaseState(active)));
}

/** Each history's group: its inputs as the metadata service wrote them, then damaged where the case says. */
const COMPACTION_HISTORIES: readonly { file: string; namespace: string; damage?: (store: ObjectStore, inputs: readonly string[]) => Promise<void> }[] = [
  { file: 'compaction-published-history.json', namespace: 'golden-published' },
  {
    file: 'compaction-corrupt-input-history.json',
    namespace: 'golden-corrupt',
    damage: (store, inputs) => store.put(inputs[1]!, new TextEncoder().encode('not a segment\n')).then(() => undefined),
  },
];

async function writeCompactionHistories(): Promise<void> {
  Runtime.install({ logger: new DefaultLogger('WARN') });
  const temporal = await startTemporalDevServer({ uiPort: 'none', searchAttributes: SEARCH_ATTRIBUTES });
  const store = createEmbeddedObjectStore({ path: ':memory:' });
  const connection = await Connection.connect({ address: temporal.address });
  const client = new Client({ connection });
  const taskQueue = 'golden';
  const worker = await createWorker({
    store,
    settings: resolveSettings({ timing: shrunkTiming(1000, 5000), targetSegmentBytes: 4096, heartbeatTimeoutMs: 5000 }),
    connection: await NativeConnection.connect({ address: temporal.address }),
    taskQueue,
    role: 'all',
    storeCheck: 'skip',
    log: () => {},
  });
  const running = worker.run();
  try {
    for (const { file, namespace, damage } of COMPACTION_HISTORIES) {
      const inputs = await writeInputs(store, namespace, 'inodes', makeInputs(3, 50));
      await damage?.(store, inputs);
      const handle = await startCompaction(client, { namespaceId: namespace, group: 'inodes', taskQueue });
      await handle.result().catch(() => undefined);
      writeFileSync(join(dir, file), `${historyToJSON(await handle.fetchHistory())}\n`);
      console.log(`wrote ${file}`);
    }
  } finally {
    worker.shutdown();
    await running;
    await connection.close();
    await store.close();
    await temporal.stop();
  }
}

writeLeases();
void writeCompactionHistories().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
