/**
 * Inputs are pinned: the ETags `readGroup` saw travel with the job, and every read of an input is
 * held to them. An input rewritten in the middle of a job (after outputs were written from its old
 * bytes, before the retried attempt resumes from them) ends the job with a non-retryable
 * InputChanged naming it, publishes nothing, and the next job starts over on what is there now:
 * never a mix of two versions. Through a real `compactionWorkflow` on the dev server, over MinIO
 * and the embedded store.
 */
import type { Client } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCompaction } from '../../src/client';
import { familyGroup, namespaceId, parseCompactionKey } from '../../src/keys';
import { readRoot } from '../../src/protocol';
import { groupSegments, jsonRootCodec } from '../../src/root';
import { readSegment, type SegmentRecord } from '../../src/segments';
import { wrapStore } from '../support/faults';
import { makeInputs, readRecords, referenceMerge, writeInputs } from '../support/records';
import { openTestStore, type StoreKind, type TestStore } from '../support/stores';
import { connectClient, expectReplays, failureOf, startTestWorker, testSettings, uniqueId } from '../support/temporal';

const settings = testSettings(1000);

describe.each(['minio', 'embedded'] as StoreKind[])('inputs pinned (%s)', (kind) => {
  let fixture: TestStore;
  let client: Client;
  let closeClient: () => Promise<void>;
  beforeAll(async () => {
    fixture = await openTestStore(kind);
    ({ client, close: closeClient } = await connectClient());
  });
  afterAll(async () => {
    await closeClient?.();
    await fixture?.store.close();
  });

  const recordsOf = async (key: string): Promise<SegmentRecord[]> => {
    const out: SegmentRecord[] = [];
    for await (const r of readSegment(key, (await fixture.store.getStream(key)).body)) out.push(r);
    return out;
  };

  it('an input rewritten between two attempts ends the job with InputChanged naming it and publishes nothing; the next job merges what is there now', async () => {
    const ns = uniqueId('pinned').toLowerCase();
    const inputs = await writeInputs(fixture.store, ns, 'inodes', makeInputs(3, 300));
    const rewritten = inputs[0]!;
    let outputsWritten = 0;
    let failed = false;
    // After two outputs made of the old bytes, the input is rewritten and the attempt dies: the retry would resume
    // after them.
    const store = wrapStore(fixture.store, async (operation, args, call) => {
      const result = await call();
      if (
        operation === 'put' &&
        parseCompactionKey(args[0] as string).kind === 'staged_segment' &&
        ++outputsWritten === 2 &&
        !failed
      ) {
        failed = true;
        await fixture.store.put(rewritten, (await fixture.store.get(inputs[1]!)).body);
        throw new Error('worker lost after two outputs');
      }
      return result;
    });
    const running = await startTestWorker(store, settings);
    try {
      const handle = await startCompaction(client, { namespaceId: ns, group: 'inodes', taskQueue: running.taskQueue });
      const cause = await failureOf(handle.result());
      expect(cause.type).toBe('InputChanged');
      expect(cause.message).toContain(rewritten);
      expect(failed).toBe(true);
      const { root } = await readRoot(fixture.store, namespaceId(ns), jsonRootCodec);
      expect([...groupSegments(root, familyGroup('inodes'))]).toEqual(inputs);
      await expectReplays(client, handle.workflowId);

      const next = await startCompaction(client, { namespaceId: ns, group: 'inodes', taskQueue: running.taskQueue });
      const result = await next.result();
      expect(result.outcome).toBe('published');
      const now = await Promise.all(inputs.map(recordsOf));
      expect(await readRecords(fixture.store, result.outputs)).toEqual(referenceMerge(now));
    } finally {
      await running.stop();
    }
  });
});
