/**
 * Roots stay readable (issue 28, item 1), on MinIO: no writer of this package writes a root past
 * MAX_ROOT_BYTES, the size every reader accepts, and each refusal names the namespace, the size and
 * the fix. A root already past it (written by an older version or a foreign writer) still has its due
 * retired segments reclaimed and their records dropped by the real gcWorkflow on the Temporal dev
 * server, which is what brings it back under; its job prefixes wait for a root every reader can read.
 */
import type { Client } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runGcPass, type GcPassResult } from '../../src/client';
import { createJobLease, publishCompaction, readRoot, updateRoot } from '../../src/protocol';
import {
  familyGroup,
  inputSegmentKey,
  inputSegmentsPrefix,
  leaseKey,
  namespaceId,
  newJobId,
  newSegmentId,
  rootKey,
  stagedSegmentKey,
  type NamespaceId,
} from '../../src/keys';
import {
  addSegments,
  encodeRoot,
  jsonRootCodec,
  MAX_ROOT_BYTES,
  RootTooLargeError,
  type RootState,
} from '../../src/root';
import type { ObjectStore } from '../../src/store';
import { inBatches } from '../../src/store/batches';
import { createLeaseState, encodeLease } from '../../src/lease';
import { openTestStore, type TestStore } from '../support/stores';
import { connectClient, quickExpirySettings, startTestWorker, uniqueId, type RunningWorker } from '../support/temporal';
import { writeRoot } from '../support/roots';

const settings = quickExpirySettings;
const group = familyGroup('bindings');
const newNamespace = () => namespaceId(uniqueId('root-size').toLowerCase());
const inputKeys = (ns: NamespaceId, n: number) =>
  Array.from({ length: n }, () => inputSegmentKey(ns, newSegmentId(), 'mseg'));

/** A root of `ns` whose group names as many input segments as fit in `bytes` (nothing retired). */
function rootOfAbout(ns: NamespaceId, bytes: number): RootState {
  const sample = inputKeys(ns, 1000);
  const base = encodeRoot({ namespace_id: ns, generation: 1, groups: { [group]: [] } }).length;
  const perKey =
    (encodeRoot({ namespace_id: ns, generation: 1, groups: { [group]: sample } }).length - base) / sample.length;
  return {
    namespace_id: ns,
    generation: 1,
    groups: { [group]: inputKeys(ns, Math.floor((bytes - base) / perKey)) },
    retired: [],
  };
}

describe('a root past the size readers accept', () => {
  let direct: TestStore;
  let store: ObjectStore;
  let worker: RunningWorker;
  let client: Client;
  let closeClient: () => Promise<void>;

  beforeAll(async () => {
    direct = await openTestStore('minio');
    store = direct.store;
    worker = await startTestWorker(store, settings);
    ({ client, close: closeClient } = await connectClient());
  }, 120_000);
  afterAll(async () => {
    await worker?.stop();
    await closeClient?.();
    await store?.close();
  });

  it('the writer refuses to write it, naming the namespace, the size and the fix, and the root is unchanged', async () => {
    const ns = newNamespace();
    await writeRoot(store, ns, (root) => addSegments(root, group, inputKeys(ns, 1)));
    const before = await store.get(rootKey(ns));
    const grow = updateRoot(store, ns, (root) => addSegments(root, group, inputKeys(ns, 200_000)), {
      codec: jsonRootCodec,
    });
    const refused = await grow.catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(RootTooLargeError);
    expect((refused as Error).message).toMatch(
      new RegExp(
        `^the root of namespace ${ns} would be \\d+ bytes, more than readers accept \\(${MAX_ROOT_BYTES}\\), so it is not written: `,
      ),
    );
    expect((refused as Error).message).toMatch(/keep its schedule running/);
    expect((await store.get(rootKey(ns))).etag).toBe(before.etag);
  }, 60_000);

  it('publication refuses to write it: the job publishes nothing and the root is unchanged', async () => {
    const ns = newNamespace();
    const root = rootOfAbout(ns, MAX_ROOT_BYTES - 20_000);
    await store.put(rootKey(ns), encodeRoot(root));
    const before = await store.get(rootKey(ns));
    const jobId = newJobId();
    await createJobLease(store, { namespaceId: ns, jobId, ownerId: 'w', startedAtMs: Date.now() });
    const inputs = root.groups[group]!.slice(0, 2);
    // Retiring two inputs and naming 1,000 outputs in their place passes the limit.
    const outputs = Array.from({ length: 1000 }, () => stagedSegmentKey(ns, jobId, newSegmentId(), 'mseg'));
    const clock = { leaseClockMs: () => Date.now(), elapsedMs: () => performance.now() };
    const publication = publishCompaction(
      store,
      { namespaceId: ns, jobId, group, inputs, outputs },
      { budgetMs: 60_000, maxRootRaces: 3, raceBackoff: { firstMs: 10, maxMs: 100 }, clock, codec: jsonRootCodec },
    );
    const refused = await publication.catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(RootTooLargeError);
    expect((refused as Error).message).toContain(`the root of namespace ${ns} would be `);
    expect((await store.get(rootKey(ns))).etag).toBe(before.etag);
  }, 60_000);

  describe('one an older version or a foreign writer wrote', () => {
    const ns = newNamespace();
    const job = newJobId();
    let due: string[];
    let sizeBefore: number;
    let result: GcPassResult;

    beforeAll(async () => {
      // Just under the limit with nothing retired, past it with the records of 1,000 due retired segments.
      const base = rootOfAbout(ns, MAX_ROOT_BYTES - 60_000);
      due = inputKeys(ns, 1000);
      // Seen retired (stamped visible) long ago by an earlier pass.
      const bytes = encodeRoot({ ...base, retired: due.map((key) => ({ key, retired_at_ms: 1, visible_at_ms: 1 })) });
      sizeBefore = bytes.length;
      expect(sizeBefore).toBeGreaterThan(MAX_ROOT_BYTES);
      await store.put(rootKey(ns), bytes);
      await inBatches(due, 1, 32, ([key]) => store.put(key!, new Uint8Array(8)));
      // An expired job with old staged output: it waits, since its walk needs a root readers accept.
      await store.put(
        leaseKey(ns, job),
        encodeLease(createLeaseState({ jobId: job, namespaceId: ns, ownerId: 'dead', nowMs: 1 })),
      );
      await store.put(stagedSegmentKey(ns, job, newSegmentId(), 'mseg'), new Uint8Array(8));
      // Every reader refuses it.
      await expect(readRoot(store, ns, jsonRootCodec)).rejects.toThrow(`limit of ${MAX_ROOT_BYTES}`);
      result = await runGcPass(client, {
        taskQueue: worker.taskQueue,
        namespaces: [ns],
        workflowId: uniqueId('gc-root-size'),
      });
    }, 240_000);

    it('its due retired segments are deleted and their records dropped, which brings it back under the limit', async () => {
      expect(result.report.totals).toMatchObject({ retiredDeleted: due.length, retiredRecordsDropped: due.length });
      expect((await store.list({ prefix: inputSegmentsPrefix(ns) })).objects).toEqual([]);
      const { root, bytes } = await readRoot(store, ns, jsonRootCodec);
      expect(root.retired).toEqual([]);
      expect(bytes).toBeLessThanOrEqual(MAX_ROOT_BYTES);
      expect(bytes).toBeLessThan(sizeBefore);
    });

    it('the pass reports the root as oversize and incomplete, and its job prefixes wait untouched', async () => {
      expect(result.complete).toBe(false);
      expect(result.report.rootProblems).toEqual([
        {
          namespaceId: ns,
          key: rootKey(ns),
          problem: 'oversize',
          reason: expect.stringContaining(`the root of namespace ${ns} is ${sizeBefore} bytes`) as string,
        },
      ]);
      expect(result.report.totals).toMatchObject({ claimed: 0, leasesDeleted: 0 });
      expect((await store.list({ prefix: `namespaces/${ns}/metadata/compactions/` })).objects).toHaveLength(2);
    });
  });
});
