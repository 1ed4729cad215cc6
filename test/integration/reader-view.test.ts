/**
 * A compaction is invisible to readers (issue 33, item 1), through the real workflow on the
 * Temporal dev server and MinIO, on both test formats: random groups with tombstones, segments
 * registered while the job runs holding older and newer versions of its keys, the work's attempt
 * killed and retried from its heartbeat details. The reader's view of the group just before the
 * publication is the view after it. (The thousands of cases, and registrations racing the root
 * CAS, run on the embedded store: test/unit/reader-view.test.ts.)
 */
import type { Client } from '@temporalio/client';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCompaction } from '../../src/client';
import type { Compactor } from '../../src/compactor';
import { familyGroup, namespaceId } from '../../src/keys';
import { readRoot } from '../../src/protocol';
import { groupSegments } from '../../src/root';
import type { SegmentRecord } from '../../src/segments';
import { TEST_FORMATS, type FormatRecord, type TestFormat } from '../support/formats';
import { readerView } from '../support/records';
import { openTestStore, type TestStore } from '../support/stores';
import { connectClient, startTestWorker, testSettings, uniqueId, type RunningWorker } from '../support/temporal';

const group = 'inodes';

/**
 * A segment's records: unique keys over a small key space, values long enough that a group makes several output
 * segments.
 */
const segment = fc
  .uniqueArray(
    fc.record({
      key: fc.integer({ min: 0, max: 7 }).map((k) => `inode/${k}`),
      seq: fc.integer({ min: 1, max: 30 }),
      tombstone: fc.boolean(),
    }),
    {
      minLength: 1,
      maxLength: 6,
      selector: (r) => r.key,
    },
  )
  .map((records) =>
    records.map(({ key, seq, tombstone }): FormatRecord => ({
      key,
      seq,
      value: tombstone ? null : `v${seq}-${'x'.repeat(300)}`,
    })),
  );

const scenario = fc.record({
  inputs: fc.array(segment, { minLength: 1, maxLength: 4 }),
  late: fc.array(segment, { maxLength: 2 }),
  /**
   * Attempts of the work killed after their first heartbeated progress; the next resumes from the heartbeat details.
   */
  kills: fc.integer({ min: 0, max: 2 }),
});
type Scenario = typeof scenario extends fc.Arbitrary<infer S> ? S : never;

/** The reader's view of `group` (records.ts: per key the newest record, tombstones applied), in either format. */
async function groupView(store: TestStore['store'], format: TestFormat, ns: string): Promise<Record<string, string>> {
  const { root } = await readRoot(store, namespaceId(ns), format.plugins.rootCodec);
  const segments: SegmentRecord[][] = [];
  for (const key of groupSegments(root, familyGroup(group))) {
    segments.push(
      (await format.readRecords(store, [key])).map(({ key: k, seq, value }) =>
        value === null ? { key: k, seq, tombstone: true } : { key: k, seq, value },
      ),
    );
  }
  return readerView(segments);
}

describe.each(TEST_FORMATS)('the reader view through the compaction workflow, $name format', (format) => {
  let fixture: TestStore;
  let worker: RunningWorker;
  let client: Client;
  let closeClient: () => Promise<void>;
  /** Each case in its own namespace: what to do there, and the view when its compaction's last attempt ended. */
  const cases = new Map<string, { scenario: Scenario; attempts: number; viewBefore?: Record<string, string> }>();

  beforeAll(async () => {
    fixture = await openTestStore('minio');
    const store = fixture.store;
    const inner = format.plugins.compactor;
    // The format's compactor, registering the case's late segments as its first attempt starts and
    // failing its first attempts after their first progress.
    const compactor: Compactor = {
      async compact(attempt) {
        const ns = attempt.job.namespaceId;
        const c = cases.get(ns)!;
        const number = ++c.attempts;
        if (number === 1) for (const records of c.scenario.late) await format.writeRecords(store, ns, group, records);
        const result = await inner.compact({
          ...attempt,
          heartbeat: (progress) => {
            attempt.heartbeat(progress);
            if (progress !== undefined && number <= c.scenario.kills)
              throw new Error(`attempt ${number} killed after its first progress`);
          },
        });
        // Nothing registers after this: the view the publication must leave as it is.
        c.viewBefore = await groupView(store, format, ns);
        return result;
      },
    };
    worker = await startTestWorker(
      store,
      testSettings(1000, { targetSegmentBytes: 1024, maxFanIn: 2 }),
      undefined,
      undefined,
      { compactor, rootCodec: format.plugins.rootCodec },
    );
    ({ client, close: closeClient } = await connectClient());
  });
  afterAll(async () => {
    await worker?.stop();
    await closeClient?.();
    await fixture?.store.close();
  });

  it('for random groups, late registrations and killed attempts, the view after publication is the view before it', async () => {
    await fc.assert(
      fc.asyncProperty(scenario, async (s) => {
        const ns = uniqueId('view').toLowerCase();
        cases.set(ns, { scenario: s, attempts: 0 });
        for (const records of s.inputs) await format.writeRecords(fixture.store, ns, group, records);
        const result = await (
          await startCompaction(client, { namespaceId: ns, group, taskQueue: worker.taskQueue })
        ).result();
        // One input with no tombstone to drop is left alone: the view holds all the same.
        expect(result.outcome).toBe(
          s.inputs.length === 1 && result.tombstones.length === 0 ? 'unchanged' : 'published',
        );
        const c = cases.get(ns)!;
        // The first attempt always heartbeats progress (every group has a record); a resumed one may find nothing left
        // to write.
        expect(c.attempts).toBeGreaterThanOrEqual(Math.min(s.kills, 1) + 1);
        expect(await groupView(fixture.store, format, ns)).toEqual(c.viewBefore);
      }),
      {
        numRuns: 6,
        seed: 33,
        // Each case is a workflow run: report the first failure as found, unshrunk.
        endOnFailure: true,
        // First the case: a late segment holds an older version of a key the inputs deleted.
        examples: [
          [
            {
              inputs: [
                [{ key: 'inode/1', seq: 5, value: 'live' }],
                [
                  { key: 'inode/1', seq: 7, value: null },
                  { key: 'inode/2', seq: 8, value: 'x' },
                ],
              ],
              late: [[{ key: 'inode/1', seq: 1, value: 'stale' }]],
              kills: 1,
            },
          ],
        ],
      },
    );
  }, 300_000);
});
