/**
 * A publication whose root CAS landed but whose answer did not reach the job, through a real
 * `compactionWorkflow` on Temporal and MinIO with the S3 fault proxy in front of the worker's store:
 * the job reports what the root holds, and with no outputs it never assumes a publication.
 */
import { S3Client } from '@aws-sdk/client-s3';
import type { Client } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCompaction } from '../../src/client';
import { namespaceId, parseCompactionKey, rootKey } from '../../src/keys';
import { readRoot } from '../../src/protocol';
import { jsonRootCodec } from '../../src/root';
import type { SegmentRecord } from '../../src/segments';
import { createS3ObjectStore } from '../../src/store';
import { makeInputs, writeInputs } from '../support/records';
import {
  s3Requests,
  startS3FaultProxy,
  type S3Exchange,
  type S3FaultProxy,
  type S3Request,
} from '../support/s3-fault-proxy';
import { openTestStore, s3ClientConfig, type TestStore } from '../support/stores';
import { connectClient, expectReplays, startTestWorker, testSettings, uniqueId } from '../support/temporal';

const settings = testSettings(1000);
const GROUP = 'inodes';

describe('a publication that landed unseen', () => {
  let fixture: TestStore;
  let proxy: S3FaultProxy;
  let client: Client;
  let closeClient: () => Promise<void>;
  beforeAll(async () => {
    fixture = await openTestStore('minio');
    proxy = await startS3FaultProxy(fixture.endpoint!.endpoint);
    ({ client, close: closeClient } = await connectClient());
  });
  afterAll(async () => {
    await closeClient?.();
    await fixture?.store.close();
    await proxy?.stop();
  });

  const rootCas = (ns: string) => (r: S3Request) => s3Requests.compareAndSwap(r) && r.key === rootKey(namespaceId(ns));
  const rootRead = (ns: string) => (r: S3Request) => s3Requests.getObject(r) && r.key === rootKey(namespaceId(ns));
  const leaseWrite = (r: S3Request) => s3Requests.put(r) && parseCompactionKey(r.key).kind === 'lease';

  /**
   * Compacts the group of a fresh namespace on a worker whose store goes through the proxy; `arm` scripts the faults
   * once the inputs exist.
   */
  async function compact(inputs: SegmentRecord[][], arm: (ns: string) => void, workerSettings = settings) {
    const ns = uniqueId('landed').toLowerCase();
    const written = await writeInputs(fixture.store, ns, GROUP, inputs);
    const exchanges: S3Exchange[] = [];
    const stopObserving = proxy.observe((exchange) => exchanges.push(exchange));
    arm(ns);
    // A client of its own: the SDK's retry quota is per client, and an earlier test's failures would spend this one's.
    const faulty = createS3ObjectStore({
      bucket: fixture.bucket!,
      client: new S3Client({ ...s3ClientConfig(fixture.endpoint!), endpoint: proxy.endpoint }),
    });
    const running = await startTestWorker(faulty, workerSettings);
    try {
      const handle = await startCompaction(client, { namespaceId: ns, group: GROUP, taskQueue: running.taskQueue });
      const result = await handle.result();
      await expectReplays(client, handle.workflowId);
      const { root } = await readRoot(fixture.store, namespaceId(ns), jsonRootCodec);
      return { ns, inputs: written, result, root, exchanges, handle };
    } finally {
      stopObserving();
      await running.stop();
      await faulty.close();
    }
  }

  /** The exchanges after the first root CAS the server applied (status 200). */
  const afterLanding = (exchanges: readonly S3Exchange[], ns: string) => {
    const landed = exchanges.findIndex((e) => rootCas(ns)(e.request) && e.status === 200);
    expect(landed).toBeGreaterThanOrEqual(0);
    return exchanges.slice(landed + 1);
  };

  it('a root CAS answered 412 by the SDK retry of its own landed write is published, and the lease is not written after it', async () => {
    const { ns, result, root, exchanges } = await compact(makeInputs(2, 100), (ns) =>
      proxy.script('lostResponse', rootCas(ns)),
    );
    expect(result.outputs.length).toBeGreaterThan(0);
    const later = afterLanding(exchanges, ns);
    // The SDK retried the same If-Match and met its own write.
    expect(later.find((e) => rootCas(ns)(e.request))?.status).toBe(412);
    expect(result.outcome).toBe('published');
    expect(root.groups[GROUP]).toEqual(result.outputs);
    expect(result.detail).toBe(`root generation ${root.generation}`);
    expect(later.filter((e) => leaseWrite(e.request))).toEqual([]);
  });

  it('the last allowed root race whose CAS landed unseen is published, not superseded', async () => {
    const oneRace = testSettings(1000, { maxRootRaces: 1 });
    const { ns, result, root, exchanges } = await compact(
      makeInputs(2, 100),
      (ns) => proxy.script('lostResponse', rootCas(ns)),
      oneRace,
    );
    expect(afterLanding(exchanges, ns).find((e) => rootCas(ns)(e.request))?.status).toBe(412);
    expect(result.outcome).toBe('published');
    expect(root.groups[GROUP]).toEqual(result.outputs);
  });

  it('a root CAS with an unknown outcome whose re-read fails is published by the retried activity', async () => {
    const { ns, result, root, exchanges, handle } = await compact(makeInputs(2, 100), (ns) => {
      // Every SDK attempt of the CAS loses its answer; once the first landed, the next three reads of the root fail
      // (every SDK attempt).
      proxy.script('lostResponse', rootCas(ns), 3);
      let armed = false;
      const stop = proxy.observe((e) => {
        if (armed || !rootCas(ns)(e.request) || e.status !== 200) return;
        armed = true;
        proxy.script('error500', rootRead(ns), 3);
        stop();
      });
    });
    const later = afterLanding(exchanges, ns);
    expect(later.filter((e) => rootRead(ns)(e.request) && e.status === 200).length).toBeGreaterThan(0);
    // The publish activity failed on the re-read and ran again.
    const history = await handle.fetchHistory();
    const publishScheduled = history.events!.find(
      (e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'publish',
    );
    const publishStarted = history.events!.find(
      (e) => String(e.activityTaskStartedEventAttributes?.scheduledEventId) === String(publishScheduled?.eventId),
    );
    expect(publishStarted?.activityTaskStartedEventAttributes?.attempt).toBeGreaterThanOrEqual(2);
    expect(result.outcome).toBe('published');
    expect(root.groups[GROUP]).toEqual(result.outputs);
    expect(later.filter((e) => leaseWrite(e.request))).toEqual([]);
  });

  /** A group whose records are all tombstones: its compaction has no output segments. */
  const tombstones = (): SegmentRecord[][] => [
    [
      { key: 'k1', seq: 1, tombstone: true },
      { key: 'k2', seq: 2, tombstone: true },
    ],
    [{ key: 'k1', seq: 3, tombstone: true }],
  ];

  it('with no outputs, a root CAS whose outcome is unknown and which did not land is not reported published', async () => {
    const { inputs, result, root, exchanges, ns } = await compact(tombstones(), (ns) =>
      proxy.script('error500', rootCas(ns), 1000),
    );
    expect(result.outputs).toEqual([]);
    expect(exchanges.filter((e) => rootCas(ns)(e.request))).toEqual([]);
    expect(root.groups[GROUP]).toEqual(inputs);
    expect(result.outcome).toBe('superseded');
  });

  it('with no outputs, a root CAS whose outcome is unknown and which landed is published: the root is the one it sent', async () => {
    const { result, root, ns, exchanges } = await compact(tombstones(), (ns) =>
      proxy.script('lostResponse', rootCas(ns), 3),
    );
    expect(result.outputs).toEqual([]);
    expect(exchanges.filter((e) => rootCas(ns)(e.request)).map((e) => e.status)).toEqual([200, 412, 412]);
    expect(result.outcome).toBe('published');
    expect(root.groups[GROUP]).toEqual([]);
  });
});
