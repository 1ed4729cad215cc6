/**
 * A group whose key list alone is past Temporal's 2 MiB payload limit, compacted end to end on
 * MinIO: its inputs travel in the job's input list under the job prefix, so no payload in the
 * workflow's history carries them (issue 28, item 7). One record per input keeps the bytes small.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCompaction } from '../../src/client';
import { familyGroup, inputSegmentKey, namespaceId, newSegmentId } from '../../src/keys';
import { readRoot, updateRoot } from '../../src/protocol';
import { addSegments, jsonRootCodec } from '../../src/root';
import { encodeSegment, SEGMENT_EXTENSION } from '../../src/segments';
import { inBatches } from '../../src/store/batches';
import { openTestStore, type TestStore } from '../support/stores';
import { connectClient, startTestWorker, testSettings, uniqueId, type RunningWorker } from '../support/temporal';

const INPUTS = 30_000;
/** Temporal's limit is 2 MiB per payload; the bound every payload of the job stays under is far lower. */
const PAYLOAD_BOUND = 256 * 1024;

/** Every payload's size in a history event, wherever it sits (inputs, results, details, failures). */
function payloadSizes(value: unknown, sizes: number[] = []): number[] {
  if (value === null || typeof value !== 'object') return sizes;
  if (value instanceof Uint8Array) return sizes;
  const record = value as Record<string, unknown>;
  if (record.data instanceof Uint8Array && 'metadata' in record) sizes.push(record.data.byteLength);
  for (const child of Object.values(record)) payloadSizes(child, sizes);
  return sizes;
}

describe(`a group of ${INPUTS.toLocaleString('en')} inputs, over 2 MiB of keys`, () => {
  let fixture: TestStore;
  let worker: RunningWorker;
  beforeAll(async () => {
    fixture = await openTestStore('minio');
    // A 30 s refresh: the short calls (readGroup's 30,000 HEADs among them) get 4 operation deadlines + 10 s.
    worker = await startTestWorker(
      fixture.store,
      testSettings(30_000, { targetSegmentBytes: 4 * 1024 * 1024, heartbeatTimeoutMs: 20_000 }),
    );
  });
  afterAll(async () => {
    await worker?.stop();
    await fixture?.store.close();
  });

  it('publishes, its inputs in the input list, and no payload of its history reaches 256 KiB', async () => {
    const started = performance.now();
    const ns = namespaceId(uniqueId('inputlist').toLowerCase());
    const group = familyGroup('bindings');
    const keys = Array.from({ length: INPUTS }, () => inputSegmentKey(ns, newSegmentId(), SEGMENT_EXTENSION));
    const keyBytes = keys.reduce((n, k) => n + Buffer.byteLength(k), 0);
    expect(keyBytes).toBeGreaterThan(2 * 1024 * 1024);
    await inBatches(
      keys.map((key, i) => ({ key, i })),
      1,
      64,
      async (batch) => {
        for (const { key, i } of batch)
          await fixture.store.put(
            key,
            encodeSegment([{ key: `k${String(i).padStart(6, '0')}`, seq: i + 1, value: 'v' }]),
          );
      },
    );
    await updateRoot(fixture.store, ns, (root) => addSegments(root, group, keys), { codec: jsonRootCodec });
    const seeded = performance.now();

    const { client, close } = await connectClient();
    try {
      const handle = await startCompaction(client, { namespaceId: ns, group, taskQueue: worker.taskQueue });
      const result = await handle.result();
      expect(result).toMatchObject({ outcome: 'published', inputCount: INPUTS, recordsOut: INPUTS });
      expect((await readRoot(fixture.store, ns, jsonRootCodec)).root.groups[group]).toEqual(result.outputs);
      const list = JSON.parse(Buffer.from((await fixture.store.get(result.inputList)).body).toString('utf8')) as {
        job_id: string;
        inputs: [string, string][];
      };
      expect(list.job_id).toBe(result.jobId);
      expect(list.inputs.map(([key]) => key)).toEqual(keys);

      const history = await handle.fetchHistory();
      const sizes = (history.events ?? []).flatMap((event) => payloadSizes(event));
      const largest = Math.max(...sizes);
      console.log(
        `[compaction-input-list] ${INPUTS} inputs, ${keyBytes} bytes of keys: seeded in ${((seeded - started) / 1000).toFixed(1)} s, ` +
          `compacted in ${((performance.now() - seeded) / 1000).toFixed(1)} s; ${sizes.length} payloads in the history, the largest ${largest} bytes`,
      );
      expect(largest).toBeLessThan(PAYLOAD_BOUND);
    } finally {
      await close();
    }
  }, 900_000);
});
