/**
 * Bring your own format (issue 20): what only a plug-in shows, on the Temporal dev server and MinIO.
 * The plug-in format of test/support/binary-format.ts runs through the same compaction, fencing,
 * publication and collector tests as the reference (`describe.each(TEST_FORMATS)`, support/formats.ts);
 * here, a compactor that writes outside its job's prefix, or names an output it does not own, is
 * refused by the writer it is handed, as is a write after its attempt returned or an output it never wrote, and a dead
 * job's prefix is reclaimed through the text root.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { ApplicationFailure, WorkflowFailedError } from '@temporalio/client';
import type { Client } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  gcPassResult,
  inputSegmentKey,
  namespaceId,
  newSegmentId,
  readRoot,
  rootKey,
  stagedOutputKey,
  startCompaction,
  type Compactor,
  type NamespaceId,
  type ObjectStore,
} from '../../src/index';
import { WriteAfterAttemptError } from '../../src/error-classes';
import { jobId, newJobId } from '../../src/testing';
import type { gcWorkflow } from '../../src/workflows/gc';
import { binaryCompactor, sampleBinaryInputs, textRootCodec, writeBinaryInputs } from '../support/binary-format';
import { openTestStore, type TestStore } from '../support/stores';
import { connectClient, quickExpirySettings, startTestWorker, uniqueId, type RunningWorker } from '../support/temporal';

const settings = quickExpirySettings;
const group = 'inodes';

describe('a plug-in format (binary segments, text root)', () => {
  let fixture: TestStore;
  let store: ObjectStore;
  let worker: RunningWorker;
  let client: Client;
  let closeClient: () => Promise<void>;

  const newNamespace = (prefix: string) => namespaceId(uniqueId(prefix).toLowerCase());
  const exists = async (key: string) => (await store.list({ prefix: key })).objects.some((o) => o.key === key);
  const compact = async (ns: NamespaceId, taskQueue = worker.taskQueue) =>
    (await startCompaction(client, { namespaceId: ns, group, taskQueue })).result();
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
    worker = await startTestWorker(store, settings, undefined, undefined, {
      compactor: binaryCompactor,
      rootCodec: textRootCodec,
    });
    ({ client, close: closeClient } = await connectClient());
  });
  afterAll(async () => {
    await worker?.stop();
    await closeClient?.();
    await store?.close();
  });

  it('the job-prefix reclaim reads references through the text root: once the job is dead its unpublished objects go, its published outputs stay', async () => {
    const ns = newNamespace('lpbprefix');
    await writeBinaryInputs(store, ns, group, sampleBinaryInputs(2, 50));
    const result = await compact(ns);
    expect(result.outcome).toBe('published');
    const job = { namespaceId: ns, jobId: jobId(result.jobId) };
    const strays = [
      stagedOutputKey(job, 'unpublished', 'lpb'),
      stagedOutputKey({ namespaceId: ns, jobId: newJobId() }, '0', 'lpb'),
    ];
    for (const key of strays) await store.put(key, Buffer.from('LPB1'));

    // Past the lease's expiry and the strays' staging grace: the job's lease is claimed and its prefix walked.
    await sleep(settings.timing.stagingGraceMs + 1000);
    const later = await pass(ns);
    expect(later.complete).toBe(true);
    for (const key of strays) expect(await exists(key), key).toBe(false);
    for (const key of result.outputs) expect(await exists(key), key).toBe(true);
    expect((await readRoot(store, ns, textRootCodec)).root.groups[group]).toEqual(result.outputs);
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
    const own = await startTestWorker(store, settings, undefined, undefined, {
      compactor: rogue,
      rootCodec: textRootCodec,
    });
    try {
      const rootBefore = await store.get(rootKey(ns));
      const err: unknown = await compact(ns, own.taskQueue).then(
        () => undefined,
        (e: unknown) => e,
      );
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
    const own = await startTestWorker(store, settings, undefined, undefined, {
      compactor: rogue,
      rootCodec: textRootCodec,
    });
    try {
      const err: unknown = await compact(ns, own.taskQueue).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(((err as WorkflowFailedError).cause as ApplicationFailure).type).toBe('OutsideJobPrefix');
      expect((await readRoot(store, ns, textRootCodec)).root.groups[group]).toEqual([input]);
    } finally {
      await own.stop();
    }
  });

  it('a compactor that returns an output it never wrote is refused before publication: OutputMissing, the root unchanged', async () => {
    const ns = newNamespace('lpbmissing');
    const [input] = await writeBinaryInputs(store, ns, group, sampleBinaryInputs(1, 10));
    const rogue: Compactor = {
      compact: async ({ job }) => ({
        outputs: [stagedOutputKey(job, 'never-written', 'lpb')],
        recordsOut: 0,
        bytesOut: 0,
      }),
    };
    const own = await startTestWorker(store, settings, undefined, undefined, {
      compactor: rogue,
      rootCodec: textRootCodec,
    });
    try {
      const err: unknown = await compact(ns, own.taskQueue).then(
        () => undefined,
        (e: unknown) => e,
      );
      const cause = (err as WorkflowFailedError).cause as ApplicationFailure;
      expect(cause.type).toBe('OutputMissing');
      expect(cause.nonRetryable).toBe(true);
      expect((await readRoot(store, ns, textRootCodec)).root.groups[group]).toEqual([input]);
    } finally {
      await own.stop();
    }
  });

  it('a write a compactor makes after its attempt returned is refused with WriteAfterAttempt and never lands', async () => {
    const ns = newNamespace('lpblate');
    await writeBinaryInputs(store, ns, group, sampleBinaryInputs(2, 10));
    let lateKey = '';
    let late: Promise<unknown> = Promise.resolve();
    const rogue: Compactor = {
      async compact({ job, store: staged }) {
        const output = stagedOutputKey(job, '0', 'lpb');
        await staged.put(output, Buffer.from('LPB1'));
        lateKey = stagedOutputKey(job, 'late', 'lpb');
        late = sleep(100)
          .then(() => staged.put(lateKey, Buffer.from('LPB1')))
          .then(
            () => undefined,
            (e: unknown) => e,
          );
        return { outputs: [output], recordsOut: 0, bytesOut: 0 };
      },
    };
    const own = await startTestWorker(store, settings, undefined, undefined, {
      compactor: rogue,
      rootCodec: textRootCodec,
    });
    try {
      const result = await compact(ns, own.taskQueue);
      expect(result.outcome).toBe('published');
      expect(await late).toBeInstanceOf(WriteAfterAttemptError);
      expect(await exists(lateKey)).toBe(false);
    } finally {
      await own.stop();
    }
  });

  it('a write the compactor did not await ends with its attempt: its output is in the store when it is published', async () => {
    const ns = newNamespace('lpbfloat');
    await writeBinaryInputs(store, ns, group, sampleBinaryInputs(2, 10));
    const rogue: Compactor = {
      async compact({ job, store: staged }) {
        const output = stagedOutputKey(job, '0', 'lpb');
        void staged.put(output, Buffer.alloc(4 * 1024 * 1024, 1));
        return { outputs: [output], recordsOut: 0, bytesOut: 0 };
      },
    };
    const own = await startTestWorker(store, settings, undefined, undefined, {
      compactor: rogue,
      rootCodec: textRootCodec,
    });
    try {
      const result = await compact(ns, own.taskQueue);
      expect(result.outcome).toBe('published');
      for (const key of result.outputs) expect((await store.head(key)).size).toBe(4 * 1024 * 1024);
    } finally {
      await own.stop();
    }
  });
});

const inputKeyOf = (ns: NamespaceId): string => inputSegmentKey(ns, newSegmentId(), 'lpb');
