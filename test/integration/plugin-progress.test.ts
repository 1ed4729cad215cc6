/**
 * A plug-in compactor's progress rides in Temporal heartbeat details, so the worker enforces its
 * limit where the compactor heartbeats: on the Temporal dev server and MinIO, a compactor that
 * heartbeats 100 KiB of progress fails its job once, with a non-retryable `ProgressRefused` naming
 * the size, the limit and the fix, and publishes nothing.
 */
import { ApplicationFailure, WorkflowFailedError, type Client } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  MAX_PROGRESS_BYTES,
  namespaceId,
  readRoot,
  rootKey,
  startCompaction,
  type Compactor,
  type ObjectStore,
} from '../../src/index';
import { binaryCompactor, sampleBinaryInputs, textRootCodec, writeBinaryInputs } from '../support/binary-format';
import { openTestStore, type TestStore } from '../support/stores';
import { connectClient, quickExpirySettings, startTestWorker, uniqueId, type RunningWorker } from '../support/temporal';

const group = 'inodes';

describe("a plug-in compactor's progress", () => {
  let fixture: TestStore;
  let store: ObjectStore;
  let worker: RunningWorker;
  let client: Client;
  let closeClient: () => Promise<void>;
  /** Attempts the compactor started, by namespace. */
  const attempts = new Map<string, number>();
  /** The `resume` each attempt was given, by namespace. */
  const resumes = new Map<string, unknown[]>();

  beforeAll(async () => {
    fixture = await openTestStore('minio');
    store = fixture.store;
    // The binary compactor, heartbeating what it has read as its progress (the data, not a position);
    // in namespaces named `bare-…`, a first attempt that records a position, then beats bare, then dies.
    const compactor: Compactor = {
      async compact(attempt) {
        const ns = attempt.job.namespaceId;
        const attemptNo = (attempts.get(ns) ?? 0) + 1;
        attempts.set(ns, attemptNo);
        resumes.set(ns, [...(resumes.get(ns) ?? []), attempt.resume]);
        if (!ns.startsWith('bare-')) attempt.heartbeat({ seen: 'x'.repeat(100 * 1024) });
        else if (attemptNo === 1) {
          attempt.heartbeat({ position: 1 });
          attempt.heartbeat();
          throw new Error('the first attempt dies after a bare heartbeat');
        }
        return (binaryCompactor as Compactor).compact({ ...attempt, resume: undefined });
      },
    };
    worker = await startTestWorker(store, quickExpirySettings, undefined, undefined, {
      compactor,
      rootCodec: textRootCodec,
    });
    ({ client, close: closeClient } = await connectClient());
  });
  afterAll(async () => {
    await worker?.stop();
    await closeClient?.();
    await store?.close();
  });

  it('a compactor that heartbeats 100 KiB of progress fails its job at its first attempt with ProgressRefused, publishing nothing', async () => {
    const ns = namespaceId(uniqueId('bulky').toLowerCase());
    const inputs = await writeBinaryInputs(store, ns, group, sampleBinaryInputs(2, 20));
    const rootBefore = await store.get(rootKey(ns));

    const handle = await startCompaction(client, { namespaceId: ns, group, taskQueue: worker.taskQueue });
    const err: unknown = await handle.result().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(WorkflowFailedError);
    const cause = (err as WorkflowFailedError).cause as ApplicationFailure;
    expect(cause).toBeInstanceOf(ApplicationFailure);
    expect(cause.type).toBe('ProgressRefused');
    expect(cause.nonRetryable).toBe(true);
    expect(cause.message).toContain(`over the limit of ${MAX_PROGRESS_BYTES}`);
    expect(cause.message).toMatch(/small position.*staged objects/);
    // Not retried: one attempt of the work, and the root as the writer left it.
    expect(attempts.get(ns)).toBe(1);
    expect((await store.get(rootKey(ns))).etag).toBe(rootBefore.etag);
    expect((await readRoot(store, ns, textRootCodec)).root.groups[group]).toEqual(inputs);
  });

  it('a bare heartbeat() keeps the progress last recorded: the retried attempt resumes from it', async () => {
    const ns = namespaceId(uniqueId('bare').toLowerCase());
    await writeBinaryInputs(store, ns, group, sampleBinaryInputs(2, 20));
    const result = await (
      await startCompaction(client, { namespaceId: ns, group, taskQueue: worker.taskQueue })
    ).result();
    expect(result.outcome).toBe('published');
    expect(resumes.get(ns)).toEqual([undefined, { position: 1 }]);
  });
});
