/**
 * Payloads bounded whatever the bucket holds (issue 28, item 5), through a real gcWorkflow on the
 * Temporal dev server and MinIO: a namespace of 100 corrupt leases of ~64 KiB each (their unknown
 * member names fill them), one whose root names an 8 MB key, and a plain one. The pass finishes
 * with its report under 256 KiB, every quoted key and reason cut to a bound with a digest, and no
 * event in the history of any of its runs (activity inputs and results, child and continue-as-new
 * inputs, results, failures) over 256 KiB.
 */
import type { Client } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gcPassResult } from '../../src/client';
import { MESSAGE_LIMIT, QUOTE_LIMIT } from '../../src/errors';
import {
  leaseKey,
  namespaceId,
  newJobId,
  newSegmentId,
  rootKey,
  stagedSegmentKey,
  type NamespaceId,
} from '../../src/keys';
import { readRoot, updateRoot } from '../../src/protocol';
import { jsonRootCodec } from '../../src/root';
import type { ObjectStore } from '../../src/store';
import { inBatches } from '../../src/store/batches';
import type { gcWorkflow } from '../../src/workflows/gc';
import { openTestStore, type TestStore } from '../support/stores';
import { connectClient, quickExpirySettings, startTestWorker, uniqueId, type RunningWorker } from '../support/temporal';

const BOUND = 256 * 1024;
const bytes = (s: string) => new TextEncoder().encode(s);

/**
 * A lease-sized object just under the read limit whose envelope carries 64 unknown members of 1,000 characters each.
 */
const corruptLease = (): Uint8Array => {
  const members = Array.from({ length: 64 }, (_, i) => `"${String(i).padStart(4, '0')}${'m'.repeat(996)}":0`).join(',');
  return bytes(`{"format_version":1,"kind":"compaction_lease",${members}}`);
};

describe('payloads of a pass over a hostile bucket', () => {
  let fixture: TestStore;
  let store: ObjectStore;
  let worker: RunningWorker;
  let client: Client;
  let closeClient: () => Promise<void>;
  const newNamespace = (prefix: string) => namespaceId(uniqueId(prefix).toLowerCase());

  beforeAll(async () => {
    fixture = await openTestStore('minio');
    store = fixture.store;
    worker = await startTestWorker(store, quickExpirySettings);
    ({ client, close: closeClient } = await connectClient());
  });
  afterAll(async () => {
    await worker?.stop();
    await closeClient?.();
    await store?.close();
  });

  /** The size of every event of every run of `workflowId`, latest first, following the continue-as-new chain back. */
  async function eventSizes(workflowId: string): Promise<number[]> {
    const sizes: number[] = [];
    for (let runId: string | undefined; ;) {
      const events = (await client.workflow.getHandle(workflowId, runId).fetchHistory()).events ?? [];
      for (const event of events) sizes.push(temporal.api.history.v1.HistoryEvent.encode(event).finish().length);
      runId = events[0]?.workflowExecutionStartedEventAttributes?.continuedExecutionRunId ?? undefined;
      if (!runId) return sizes;
    }
  }

  it('100 corrupt leases of 64 KiB and a root naming an 8 MB key: the pass finishes, its report and every event of its history under 256 KiB', async () => {
    const leases = newNamespace('hostileleases');
    await updateRoot(store, leases, (root) => root, { codec: jsonRootCodec });
    const lease = corruptLease();
    expect(lease.length).toBeGreaterThan(60 * 1024);
    await inBatches(
      Array.from({ length: 100 }, () => newJobId()),
      1,
      16,
      ([job]) => store.put(leaseKey(leases, job!), lease),
    );

    const bigKey = newNamespace('hostileroot');
    await updateRoot(store, bigKey, (root) => root, { codec: jsonRootCodec });
    const { root } = await readRoot(store, bigKey, jsonRootCodec);
    await store.put(
      rootKey(bigKey),
      jsonRootCodec.encode({ ...root, groups: { g: [`k${'x'.repeat(8 * 1024 * 1024)}`] } }),
    );
    await store.put(stagedSegmentKey(bigKey, newJobId(), newSegmentId(), 'mseg'), bytes('staged'));

    const plain: NamespaceId = newNamespace('plain');
    await updateRoot(store, plain, (r) => r, { codec: jsonRootCodec });
    await store.put(stagedSegmentKey(plain, newJobId(), newSegmentId(), 'mseg'), bytes('staged'));

    const workflowId = uniqueId('gc-payloads');
    const handle = await client.workflow.start<typeof gcWorkflow>('gcWorkflow', {
      workflowId,
      taskQueue: worker.taskQueue,
      args: [{ namespaces: [leases, bigKey, plain], dryRun: false }],
    });
    const { complete, report } = await gcPassResult(handle);
    expect(complete).toBe(false);
    expect(JSON.stringify(report).length).toBeLessThan(BOUND);
    expect(report.totals.corrupt).toBe(100);
    expect(report.corruptLeases.length).toBeGreaterThan(0);
    for (const { key, reason } of report.corruptLeases) {
      expect(key.length).toBeLessThanOrEqual(QUOTE_LIMIT);
      expect(reason.length).toBeLessThan(MESSAGE_LIMIT + 100);
      expect(reason).toMatch(/characters, digest [0-9a-f]{14}\)/);
    }
    const problem = report.rootProblems.find((p) => p.namespaceId === bigKey);
    expect(problem).toMatchObject({ problem: 'corrupt' });
    expect(problem!.reason.length).toBeLessThan(MESSAGE_LIMIT + 100);
    expect(problem!.reason).toMatch(/8388609 characters, digest [0-9a-f]{14}\)/);

    for (const id of [workflowId, `${workflowId}/${leases}`, `${workflowId}/${bigKey}`, `${workflowId}/${plain}`]) {
      const sizes = await eventSizes(id);
      expect(sizes.length, id).toBeGreaterThan(0);
      expect(Math.max(...sizes), id).toBeLessThan(BOUND);
    }
  });
});
