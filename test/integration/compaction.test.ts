/** The compaction workflow end to end, on both test formats (support/formats.ts), one worker each. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCompaction } from '../../src/client';
import { jobId, leaseKey, namespaceId } from '../../src/keys';
import { decodeLease } from '../../src/lease';
import { readRoot } from '../../src/protocol';
import { TEST_FORMATS } from '../support/formats';
import { openTestStore, type TestStore } from '../support/stores';
import {
  connectClient,
  expectReplays,
  startTestWorker,
  testSettings,
  uniqueId,
  type RunningWorker,
} from '../support/temporal';
import type { Client } from '@temporalio/client';

describe.each(TEST_FORMATS)('compaction workflow, $name format', (format) => {
  let fixture: TestStore;
  let worker: RunningWorker;
  let client: Client;
  let closeClient: () => Promise<void>;
  const settings = testSettings(1000);

  beforeAll(async () => {
    fixture = await openTestStore('minio');
    worker = await startTestWorker(fixture.store, settings, undefined, undefined, format.plugins);
    ({ client, close: closeClient } = await connectClient());
  });
  afterAll(async () => {
    await worker?.stop();
    await closeClient?.();
    await fixture?.store.close();
  });

  it('publishes the merge of the inputs, references only the outputs, and leaves the lease active and unwritten', async () => {
    const ns = uniqueId('ns').toLowerCase();
    const inputs = await format.writeInputs(fixture.store, ns, 'bindings', 4, 400);
    const handle = await startCompaction(client, { namespaceId: ns, group: 'bindings', taskQueue: worker.taskQueue });
    const result = await handle.result();

    expect(result.outcome).toBe('published');
    expect(result.outputs.length).toBeGreaterThan(1);
    expect(result.outputs.every((k) => k.endsWith(`.${format.extension}`))).toBe(true);
    const { root } = await readRoot(fixture.store, namespaceId(ns), format.plugins.rootCodec);
    expect(root.groups.bindings).toEqual(result.outputs);
    expect(result.outputs.some((k) => inputs.keys.includes(k))).toBe(false);
    expect(await format.readRecords(fixture.store, result.outputs)).toEqual(inputs.merge);
    expect(result.recordsOut).toBe(inputs.merge.length);
    // The reference writes the format its setting names (v2 starts "MSEG", v1 is gzip), whatever its inputs were.
    if (format.segmentFormat !== undefined)
      for (const k of result.outputs)
        expect((await fixture.store.get(k)).body[0]).toBe(format.segmentFormat === 2 ? 0x4d : 0x1f);

    const key = leaseKey(namespaceId(ns), jobId(result.jobId));
    const lease = await fixture.store.get(key);
    expect(decodeLease(lease.body, { namespaceId: namespaceId(ns), jobId: jobId(result.jobId) }).status).toBe('active');
    await new Promise((r) => setTimeout(r, 2 * settings.timing.leaseRefreshIntervalMs));
    expect((await fixture.store.get(key)).etag).toBe(lease.etag);
    await expectReplays(client, handle.workflowId);
  });

  it('starting the same group twice while it runs gives one workflow run', async () => {
    const ns = uniqueId('twice').toLowerCase();
    await format.writeInputs(fixture.store, ns, 'bindings', 2, 100);
    const first = await startCompaction(client, { namespaceId: ns, group: 'bindings', taskQueue: worker.taskQueue });
    const second = await startCompaction(client, { namespaceId: ns, group: 'bindings', taskQueue: worker.taskQueue });
    expect(second.firstExecutionRunId).toBe(first.firstExecutionRunId);
    expect((await first.result()).outcome).toBe('published');
  });
});
