/**
 * An existing v1 namespace moves to segment format v2 (issue 31): a worker set to write v2
 * (`segmentFormat: 2`, COMPACTION_SEGMENT_FORMAT) compacts a group of v1 segments into v2 outputs
 * through the workflow on the Temporal dev server and MinIO, and a reader of the group sees the same
 * records, by scan and by point lookup, before, while and after the job runs.
 */
import { describe, expect, it } from 'vitest';
import { startCompaction } from '../../src/client';
import { lookupRecord, readGroupRecords, readGroupSnapshot, type LiveRecord } from '../../src/reader';
import { jsonRootCodec } from '../../src/root';
import { makeInputs, referenceMerge, writeInputs } from '../support/records';
import { startTestWorker, storeAndClient, testSettings, uniqueId } from '../support/temporal';

describe('a v1 namespace compacted by a worker that writes segment format v2', () => {
  const servers = storeAndClient('minio');

  it('publishes v2 outputs, and the group reads the same by scan and lookup before, during and after', async () => {
    const { store } = servers.fixture;
    const ns = uniqueId('migrate').toLowerCase();
    const inputs = makeInputs(5, 600);
    const keys = await writeInputs(store, ns, 'bindings', inputs, [1]);
    for (const key of keys) expect((await store.get(key)).body[0]).toBe(0x1f);
    const expected = referenceMerge(inputs);
    const probes = [...expected.filter((_, i) => i % 50 === 0).map((r) => r.key), 'k-absent'];
    const view = async () => {
      const snapshot = await readGroupSnapshot(store, { namespaceId: ns, group: 'bindings' }, jsonRootCodec);
      const records: LiveRecord[] = [];
      for await (const record of readGroupRecords(store, snapshot)) records.push(record);
      const found = await Promise.all(probes.map((key) => lookupRecord(store, snapshot, key)));
      return { segments: snapshot.segments, records, found };
    };
    const before = await view();
    expect(before.records).toEqual(expected);
    const expectedFound = probes.map((key) => expected.find((r) => r.key === key));
    expect(before.found).toEqual(expectedFound);

    const worker = await startTestWorker(store, testSettings(1000, { segmentFormat: 2 }));
    let running = true;
    let readsDuring = 0;
    let published: { outcome: string; outputs: readonly string[] };
    try {
      const handle = await startCompaction(servers.client, {
        namespaceId: ns,
        group: 'bindings',
        taskQueue: worker.taskQueue,
      });
      const result = handle.result().finally(() => (running = false));
      while (running) {
        const during = await view();
        expect(during.records).toEqual(expected);
        expect(during.found).toEqual(expectedFound);
        readsDuring++;
      }
      published = await result;
    } finally {
      await worker.stop();
    }
    const { outcome, outputs } = published;
    expect(outcome).toBe('published');
    expect(readsDuring).toBeGreaterThan(0);

    const after = await view();
    expect(after.segments).toEqual(outputs);
    for (const key of outputs)
      expect((await store.get(key)).body.subarray(0, 8)).toEqual(Buffer.from([0x4d, 0x53, 0x45, 0x47, 0, 0, 0, 2]));
    expect(after.records).toEqual(expected);
    expect(after.found).toEqual(expectedFound);
  });
});
