/**
 * An existing v1 namespace moves to segment format v2 (issue 31): a worker set to write v2
 * (`segmentFormat: 2`, COMPACTION_SEGMENT_FORMAT) compacts a group of v1 segments into v2 outputs
 * through the workflow on the Temporal dev server and MinIO, and a reader of the group sees the same
 * records, by scan and by point lookup, before, while and after the job runs.
 */
import type { Client } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCompaction } from '../../src/client';
import { lookupRecord, readGroupRecords, readGroupSnapshot, type LiveRecord } from '../../src/reader';
import { jsonRootCodec } from '../../src/root';
import { makeInputs, referenceMerge, writeInputs } from '../support/records';
import { openTestStore, type TestStore } from '../support/stores';
import { connectClient, startTestWorker, testSettings, uniqueId, type RunningWorker } from '../support/temporal';

describe('a v1 namespace compacted by a worker that writes segment format v2', () => {
  let fixture: TestStore;
  let worker: RunningWorker;
  let client: Client;
  let closeClient: () => Promise<void>;

  beforeAll(async () => {
    fixture = await openTestStore('minio');
    worker = await startTestWorker(fixture.store, testSettings(1000, { segmentFormat: 2 }));
    ({ client, close: closeClient } = await connectClient());
  });
  afterAll(async () => {
    await worker?.stop();
    await closeClient?.();
    await fixture?.store.close();
  });

  it('publishes v2 outputs, and the group reads the same by scan and lookup before, during and after', async () => {
    const ns = uniqueId('migrate').toLowerCase();
    const inputs = makeInputs(5, 600);
    const keys = await writeInputs(fixture.store, ns, 'bindings', inputs, [1]);
    for (const key of keys) expect((await fixture.store.get(key)).body[0]).toBe(0x1f);
    const expected = referenceMerge(inputs);
    const probes = [...expected.filter((_, i) => i % 50 === 0).map((r) => r.key), 'k-absent'];
    const view = async () => {
      const snapshot = await readGroupSnapshot(fixture.store, ns, 'bindings', jsonRootCodec);
      const records: LiveRecord[] = [];
      for await (const record of readGroupRecords(fixture.store, snapshot)) records.push(record);
      const found = await Promise.all(probes.map((key) => lookupRecord(fixture.store, snapshot, key)));
      return { segments: snapshot.segments, records, found };
    };
    const before = await view();
    expect(before.records).toEqual(expected);
    const expectedFound = probes.map((key) => expected.find((r) => r.key === key));
    expect(before.found).toEqual(expectedFound);

    const handle = await startCompaction(client, { namespaceId: ns, group: 'bindings', taskQueue: worker.taskQueue });
    let running = true;
    const result = handle.result().finally(() => (running = false));
    let readsDuring = 0;
    while (running) {
      const during = await view();
      expect(during.records).toEqual(expected);
      expect(during.found).toEqual(expectedFound);
      readsDuring++;
    }
    const { outcome, outputs } = await result;
    expect(outcome).toBe('published');
    expect(readsDuring).toBeGreaterThan(0);

    const after = await view();
    expect(after.segments).toEqual(outputs);
    for (const key of outputs) expect((await fixture.store.get(key)).body.subarray(0, 8)).toEqual(Buffer.from([0x4d, 0x53, 0x45, 0x47, 0, 0, 0, 2]));
    expect(after.records).toEqual(expected);
    expect(after.found).toEqual(expectedFound);
  });
});
