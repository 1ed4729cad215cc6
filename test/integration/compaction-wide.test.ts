/**
 * A group wider than the S3 client's socket pool, compacted by a real worker process on MinIO. The
 * old compactor opened every input before reading any: with 51 inputs the 51st waited for a socket,
 * the deadline destroyed the unread bodies, and their 'error' events killed the worker process. The
 * crash guard (crash-guard.ts) fails the test if any uncaught exception or unhandled rejection
 * happens in the worker.
 */
import type { ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCompaction } from '../../src/client';
import { familyGroup, inputSegmentKey, namespaceId, newSegmentId } from '../../src/keys';
import { updateRoot } from '../../src/protocol/root-io';
import { addSegments, jsonRootCodec } from '../../src/root';
import { encodeSegment, SEGMENT_EXTENSION } from '../../src/segments';
import { makeInputs, readRecords, referenceMerge } from '../support/records';
import { openTestStore, type TestStore } from '../support/stores';
import { connectClient, testSettings, uniqueId } from '../support/temporal';
import { SPAWNED_WORKER_TIMEOUT_MS, spawnWorkerProcess } from '../support/worker-env';
import { environmentFor } from '../support/worker-process';

const exited = (child: ChildProcess) => new Promise((resolve) => child.once('exit', resolve));

describe('a compaction of more inputs than the socket pool', () => {
  let fixture: TestStore;
  let worker: ChildProcess;
  let workerExit: Promise<unknown>;
  const taskQueue = uniqueId('wide-tq');
  beforeAll(async () => {
    fixture = await openTestStore('minio');
    // A 5 s operation deadline: the old compactor's 51st input, waiting for a socket that never frees, meets it
    // soon; starting a 1,000-input merge blocks the event loop for most of a second on a shared CI machine.
    const settings = testSettings(10_000, { targetSegmentBytes: 64 * 1024, heartbeatTimeoutMs: 5000 });
    worker = spawnWorkerProcess(environmentFor(fixture, taskQueue, settings));
    workerExit = exited(worker);
  });
  afterAll(async () => {
    if (worker && worker.exitCode === null && worker.signalCode === null) {
      worker.kill('SIGKILL');
      await workerExit;
    }
    await fixture?.store.close();
  });

  it.each([51, 1000])('%i inputs publish their merge, and the worker process lives on', async (count) => {
    const ns = uniqueId('wide').toLowerCase();
    const inputs = makeInputs(count, 3, 2000).map((records) => records.sort((a, b) => (a.key < b.key ? -1 : 1)));
    const keys = inputs.map(() => inputSegmentKey(namespaceId(ns), newSegmentId(), SEGMENT_EXTENSION));
    for (let i = 0; i < count; i += 50)
      await Promise.all(keys.slice(i, i + 50).map((key, j) => fixture.store.put(key, encodeSegment(inputs[i + j]!))));
    await updateRoot(fixture.store, namespaceId(ns), (root) => addSegments(root, familyGroup('bindings'), keys), {
      codec: jsonRootCodec,
    });
    const { client, close } = await connectClient();
    const handle = await startCompaction(client, {
      namespaceId: ns,
      group: 'bindings',
      taskQueue,
      workerTimeoutMs: SPAWNED_WORKER_TIMEOUT_MS,
    });
    const died = workerExit.then((code) =>
      Promise.reject(new Error(`the worker process exited (${String(code)}) during the compaction`)),
    );
    const result = await Promise.race([handle.result(), died]);
    await close();
    expect(result.outcome).toBe('published');
    expect(await readRecords(fixture.store, result.outputs)).toEqual(referenceMerge(inputs));
    expect(worker.exitCode).toBeNull();
  });
});
