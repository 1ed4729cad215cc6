import { DefaultLogger, Runtime } from '@temporalio/worker';
import {
  compactionResult,
  connectClientFromEnv,
  ensureGcSchedule,
  jsonRootCodec,
  readGroupRecords,
  readGroupSnapshot,
  requireSearchAttributes,
  runGcPass,
  startCompaction,
  startWorkerFromEnv,
  writeInputSegment,
} from 'compaction-lease';
import { NoWorkerPollingError } from 'compaction-lease/errors';

// A service that runs Temporal workers of its own installs the process's one Runtime itself, first;
// the package's worker then shares it.
Runtime.install({ logger: new DefaultLogger('WARN') });

const client = await connectClientFromEnv();
// The Temporal namespace needs the package's search attributes, registered once by
// `npx compaction-lease temporal setup`
// (Temporal Cloud: the tcld command it names). Every start and every worker checks them; the service can too, at its
// start.
await requireSearchAttributes(client.connection, client.options.namespace);

// No worker polls the task queue yet (or the one that did has stopped): a start fails within seconds, naming the queue,
// and starts nothing.
try {
  await startCompaction(client, { namespaceId: 'tenant-7', group: 'inodes', workerTimeoutMs: 1_000 });
} catch (err) {
  if (!(err instanceof NoWorkerPollingError)) throw err;
  console.log(`before the worker: ${err.name} on task queue ${err.taskQueue}`);
}

// A worker configured by the environment, like `compaction-lease worker`: the store (COMPACTION_S3_BUCKET,
// else the SQLite file COMPACTION_EMBEDDED_STORE), Temporal (TEMPORAL_ADDRESS), COMPACTION_TASK_QUEUE.
const worker = await startWorkerFromEnv();

// The service writes input segments; each lists itself in the namespace root.
await writeInputSegment(worker.store, { namespaceId: 'tenant-7', group: 'inodes' }, [
  { key: 'inode/1', seq: 1, value: 'a' },
  { key: 'inode/2', seq: 2, value: 'b' },
]);
await writeInputSegment(worker.store, { namespaceId: 'tenant-7', group: 'inodes' }, [
  { key: 'inode/1', seq: 3, value: 'a2' },
  { key: 'inode/2', seq: 4, tombstone: true },
]);

const handle = await startCompaction(client, { namespaceId: 'tenant-7', group: 'inodes' }); // idempotent per group
// Its outcome. Meanwhile a run that waits for a worker says so (stderr, every 30 s), and one whose workflow task keeps
// failing ends the wait with the cause (WorkflowTaskFailingError).
const compaction = await compactionResult(handle);
console.log(`compaction ${compaction.outcome}: ${compaction.inputCount} inputs, ${compaction.recordsOut} records out`);

// Readers read the group's live segments at one root read (they stay readable for the reader grace
// less T from it), merged: the latest version of each key, deleted keys left out.
const snapshot = await readGroupSnapshot(worker.store, { namespaceId: 'tenant-7', group: 'inodes' }, jsonRootCodec);
for await (const record of readGroupRecords(worker.store, snapshot))
  console.log(`read ${record.key} = ${record.value} from ${snapshot.segments.length} segment`);

await ensureGcSchedule(client, { cron: '*/15 * * * *' }); // create or update the collector's schedule
const pass = await runGcPass(client); // one pass now; an incomplete one still returns its report
console.log(
  `collector pass ${pass.complete ? 'complete' : 'incomplete'}: ${pass.report.totals.namespaces} namespaces, ${pass.report.totals.objectsDeleted} objects deleted`,
);

await client.connection.close();
await worker.stop();
