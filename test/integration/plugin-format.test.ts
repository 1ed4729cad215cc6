/**
 * Bring your own format (issue 20): a second segment format and root codec, written only against
 * the public API (test/support/binary-format.ts), run through the real compaction workflow, its
 * fencing and publication, and the collector's gcWorkflow, on the Temporal dev server and MinIO.
 * A compactor that writes outside its job's prefix is refused by the writer it is handed.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { ApplicationFailure, WorkflowFailedError } from '@temporalio/client';
import type { Client } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  claimLeaseState,
  decodeLease,
  encodeLease,
  gcPassResult,
  inputSegmentKey,
  jobId,
  leaseKey,
  namespaceId,
  newJobId,
  newSegmentId,
  readRoot,
  rootKey,
  stagedOutputKey,
  startCompaction,
  type CompactionAttempt,
  type Compactor,
  type NamespaceId,
  type ObjectStore,
} from '../../src/index';
import type { gcWorkflow } from '../../src/workflows/gc';
import { binaryCompactor, readBinaryGroup, sampleBinaryInputs, textRootCodec, writeBinaryInputs } from '../support/binary-format';
import { openTestStore, type TestStore } from '../support/stores';
import { connectClient, expectReplays, quickExpirySettings, startTestWorker, uniqueId, type RunningWorker } from '../support/temporal';

const settings = quickExpirySettings;
const group = 'inodes';

describe('a plug-in format (binary segments, text root)', () => {
  let fixture: TestStore;
  let store: ObjectStore;
  let worker: RunningWorker;
  let client: Client;
  let closeClient: () => Promise<void>;
  /** What the next job's compactor does before the binary compactor runs; the fencing test sets it. */
  let beforeCompact: ((attempt: CompactionAttempt<unknown>) => Promise<void>) | undefined;

  const newNamespace = (prefix: string) => namespaceId(uniqueId(prefix).toLowerCase());
  const exists = async (key: string) => (await store.list({ prefix: key })).objects.some((o) => o.key === key);
  const compact = async (ns: NamespaceId, taskQueue = worker.taskQueue) => (await startCompaction(client, { namespaceId: ns, group, taskQueue })).result();
  const pass = async (ns: NamespaceId) => {
    const handle = await client.workflow.start<typeof gcWorkflow>('gcWorkflow', {
      workflowId: uniqueId('gc-plugin'),
      taskQueue: worker.taskQueue,
      args: [{ namespaces: [ns], dryRun: false }],
    });
    return gcPassResult(handle);
  };

  beforeAll(async () => {
    fixture = await openTestStore('minio');
    store = fixture.store;
    const inner: Compactor = binaryCompactor;
    const hooked: Compactor = {
      async compact(attempt) {
        const hook = beforeCompact;
        beforeCompact = undefined;
        await hook?.(attempt);
        return inner.compact(attempt);
      },
    };
    worker = await startTestWorker(store, settings, undefined, undefined, { compactor: hooked, rootCodec: textRootCodec });
    ({ client, close: closeClient } = await connectClient());
  });
  afterAll(async () => {
    await worker?.stop();
    await closeClient?.();
    await store?.close();
  });

  it('a compaction publishes the merge of its binary inputs in the text root and retires the inputs there', async () => {
    const ns = newNamespace('lpb');
    const sets = sampleBinaryInputs(3, 200);
    const inputKeys = await writeBinaryInputs(store, ns, group, sets);
    const before = await readBinaryGroup(store, inputKeys);

    const result = await compact(ns);
    expect(result.outcome).toBe('published');
    expect(result.outputs.length).toBeGreaterThan(1);
    expect(result.outputs.every((k) => k.endsWith('.lpb'))).toBe(true);
    expect((await store.get(rootKey(ns))).body.subarray(0, 8).toString()).toBe('lproot 1');
    const { root } = await readRoot(store, ns, textRootCodec);
    expect(root.groups[group]).toEqual(result.outputs);
    expect(root.retired?.map((r) => r.key).sort()).toEqual([...inputKeys].sort());
    expect(await readBinaryGroup(store, result.outputs)).toEqual(before);
    expect(result.recordsOut).toBe(before.length);
  });

  it('a job whose lease a collector claims mid-compaction is fenced; its successor publishes the same merge', async () => {
    const ns = newNamespace('lpbfence');
    const inputKeys = await writeBinaryInputs(store, ns, group, sampleBinaryInputs(2, 100));
    const expected = await readBinaryGroup(store, inputKeys);
    beforeCompact = async ({ job, heartbeat }) => {
      const key = leaseKey(job.namespaceId, job.jobId);
      const { body, etag } = await store.get(key);
      const lease = decodeLease(body, job);
      await store.putIfMatch(key, encodeLease(claimLeaseState(lease)), etag);
      // The keeper's next refresh meets `reaping`; the workflow cancels this attempt, which a heartbeat throws.
      for (;;) {
        await sleep(100);
        heartbeat();
      }
    };
    const result = await compact(ns);
    expect(result.outcome).toBe('published');
    expect(result.fencedJobIds).toHaveLength(1);
    expect(result.outputs.some((k) => k.includes(result.fencedJobIds[0]!))).toBe(false);
    expect(await readBinaryGroup(store, result.outputs)).toEqual(expected);
  });

  it('the collector reads the text root: a retired input stays for the reader grace, then goes with its record', async () => {
    const ns = newNamespace('lpbgc');
    const inputKeys = await writeBinaryInputs(store, ns, group, sampleBinaryInputs(2, 50));
    const result = await compact(ns);
    expect(result.outcome).toBe('published');
    const retiredAt = Math.max(...((await readRoot(store, ns, textRootCodec)).root.retired ?? []).map((r) => r.retired_at_ms));

    const during = await pass(ns);
    expect(during.report.totals).toMatchObject({ retiredDeleted: 0, retainedInGrace: inputKeys.length });
    for (const key of inputKeys) expect(await exists(key), key).toBe(true);

    await sleep(Math.max(0, retiredAt + settings.timing.readerGraceMs - Date.now()) + 200);
    const after = await pass(ns);
    expect(after.complete).toBe(true);
    expect(after.report.totals).toMatchObject({ retiredDeleted: inputKeys.length, retiredRecordsDropped: inputKeys.length });
    for (const key of inputKeys) expect(await exists(key), key).toBe(false);
    const { root } = await readRoot(store, ns, textRootCodec);
    expect(root.retired).toEqual([]);
    expect(root.groups[group]).toEqual(result.outputs);
    for (const key of result.outputs) expect(await exists(key), key).toBe(true);
  });

  it("the job-prefix reclaim reads references through the text root: once the job is dead its unpublished objects go, its published outputs stay", async () => {
    const ns = newNamespace('lpbprefix');
    await writeBinaryInputs(store, ns, group, sampleBinaryInputs(2, 50));
    const result = await compact(ns);
    expect(result.outcome).toBe('published');
    const job = { namespaceId: ns, jobId: jobId(result.jobId) };
    const strays = [stagedOutputKey(job, 'unpublished', 'lpb'), stagedOutputKey({ namespaceId: ns, jobId: newJobId() }, '0', 'lpb')];
    for (const key of strays) await store.put(key, Buffer.from('LPB1'));

    // Past the lease's expiry and the strays' staging grace: the job's lease is claimed and its prefix walked.
    await sleep(settings.timing.stagingGraceMs + 1000);
    const later = await pass(ns);
    expect(later.complete).toBe(true);
    for (const key of strays) expect(await exists(key), key).toBe(false);
    for (const key of result.outputs) expect(await exists(key), key).toBe(true);
    expect((await readRoot(store, ns, textRootCodec)).root.groups[group]).toEqual(result.outputs);
  });

  it('a root the text codec cannot read deletes nothing and is reported as corrupt', async () => {
    const ns = newNamespace('lpbcorrupt');
    const inputKeys = await writeBinaryInputs(store, ns, group, sampleBinaryInputs(1, 10));
    await store.put(rootKey(ns), Buffer.from('{"kind":"metadata_root"}'));
    const result = await pass(ns);
    expect(result.complete).toBe(false);
    expect(result.report.rootProblems).toEqual([expect.objectContaining({ namespaceId: ns, problem: 'corrupt' })]);
    for (const key of inputKeys) expect(await exists(key), key).toBe(true);
  });

  it('a compactor that writes outside its job prefix is refused by its writer: OutsideJobPrefix, nothing written, the root unchanged', async () => {
    const ns = newNamespace('lpbout');
    await writeBinaryInputs(store, ns, group, sampleBinaryInputs(1, 10));
    const stray = inputKeyOf(ns);
    const rogue: Compactor = {
      async compact({ store: staged }) {
        await staged.put(stray, Buffer.from('LPB1'));
        return { outputs: [stray], recordsOut: 0, bytesOut: 0 };
      },
    };
    const own = await startTestWorker(store, settings, undefined, undefined, { compactor: rogue, rootCodec: textRootCodec });
    try {
      const rootBefore = await store.get(rootKey(ns));
      const err: unknown = await compact(ns, own.taskQueue).then(() => undefined, (e: unknown) => e);
      expect(err).toBeInstanceOf(WorkflowFailedError);
      const cause = (err as WorkflowFailedError).cause as ApplicationFailure;
      expect(cause).toBeInstanceOf(ApplicationFailure);
      expect(cause.type).toBe('OutsideJobPrefix');
      expect(cause.nonRetryable).toBe(true);
      expect(cause.message).toContain(stray);
      expect(await exists(stray)).toBe(false);
      expect((await store.get(rootKey(ns))).etag).toBe(rootBefore.etag);
    } finally {
      await own.stop();
    }
  });

  it('a compactor that returns an output it does not own is refused before publication', async () => {
    const ns = newNamespace('lpbclaim');
    const [input] = await writeBinaryInputs(store, ns, group, sampleBinaryInputs(1, 10));
    const rogue: Compactor = { compact: async () => ({ outputs: [input!], recordsOut: 0, bytesOut: 0 }) };
    const own = await startTestWorker(store, settings, undefined, undefined, { compactor: rogue, rootCodec: textRootCodec });
    try {
      const err: unknown = await compact(ns, own.taskQueue).then(() => undefined, (e: unknown) => e);
      expect(((err as WorkflowFailedError).cause as ApplicationFailure).type).toBe('OutsideJobPrefix');
      expect((await readRoot(store, ns, textRootCodec)).root.groups[group]).toEqual([input]);
    } finally {
      await own.stop();
    }
  });

  it('the recorded history of a plug-in compaction replays', async () => {
    const ns = newNamespace('lpbreplay');
    await writeBinaryInputs(store, ns, group, sampleBinaryInputs(2, 20));
    const handle = await startCompaction(client, { namespaceId: ns, group, taskQueue: worker.taskQueue });
    expect((await handle.result()).outcome).toBe('published');
    await expectReplays(client, handle.workflowId);
  });
});

const inputKeyOf = (ns: NamespaceId): string => inputSegmentKey(ns, newSegmentId(), 'lpb');
