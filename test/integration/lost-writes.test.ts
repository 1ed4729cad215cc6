/**
 * Lost writes with a writer budget (issue 27 item 1, spec 6a.4 and 6a.1), at the default timings
 * (writer budget 15 min, reader grace 45.5 min, lost-write grace 24 h), on the embedded store and on
 * MinIO. Each collector pass runs the pass plan against the store directly, with its clock set ahead
 * of the store's `LastModified` by the age a test needs: the same decisions a pass makes that late.
 *
 * Before this change the lost-write rule used T (20.5 min) and the writer had no budget: a writer
 * delayed past T registered a segment the collector had deleted, and a segment replaced without
 * retirement (through `updateRoot`, or by an older worker's format-1 root) went on the next pass.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveTiming } from '../../src/config';
import {
  inputSegmentKey,
  inputSegmentsPrefix,
  namespaceId,
  newSegmentId,
  rootKey,
  type NamespaceId,
} from '../../src/keys';
import { readRoot, updateRoot } from '../../src/protocol';
import { encodeRoot, jsonRootCodec, type RootState } from '../../src/root';
import { NotFoundError, type ObjectStore } from '../../src/store';
import { writeInputSegment, WriterBudgetExceededError } from '../../src/writer';
import { interceptStore } from '../support/faults';
import { passAhead } from '../support/pass';
import { openTestStore, type StoreKind, type TestStore } from '../support/stores';

const timing = resolveTiming();
const { writerBudgetMs, lostWriteGraceMs, readerGraceMs, gcMinGraceMs } = timing;
const MINUTE = 60_000;
const record = (key: string, seq = 1) => ({ key, seq, value: `v-${key}` });

describe.each<StoreKind>(['embedded', 'minio'])('lost writes and retirement on %s', (kind) => {
  let fixture: TestStore;
  let store: ObjectStore;
  let counter = 0;
  const newNamespace = (label: string): NamespaceId => namespaceId(`${label}-${Date.now().toString(36)}-${counter++}`);

  beforeAll(async () => {
    fixture = await openTestStore(kind);
    store = fixture.store;
  });
  afterAll(() => fixture?.store.close());

  const pass = (ns: NamespaceId, aheadMs: number) => passAhead(store, ns, aheadMs);

  const exists = (key: string) =>
    store.head(key).then(
      () => true,
      (err: unknown) => (err instanceof NotFoundError ? false : Promise.reject(err)),
    );
  const segmentsUnder = async (ns: NamespaceId) =>
    (await store.list({ prefix: inputSegmentsPrefix(ns) })).objects.map((o) => o.key).sort();

  it('a writer delayed past its budget between the PUT and the root CAS registers nothing and throws WriterBudgetExceededError naming the segment', async () => {
    const ns = newNamespace('slow');
    await writeInputSegment(store, { namespaceId: ns, group: 'inodes' }, [record('a')]);
    const before = (await readRoot(store, ns, jsonRootCodec)).root;
    // A pause as long as the budget and 1 ms falls between the segment PUT and the root read.
    let elapsed = 0;
    const paused = interceptStore(store, (operation) => {
      if (operation === 'put') elapsed += writerBudgetMs + 1;
    });
    const err: unknown = await writeInputSegment(paused, { namespaceId: ns, group: 'inodes' }, [record('b')], {
      writerBudgetMs,
      elapsedMs: () => elapsed,
    }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(WriterBudgetExceededError);
    const { segmentKey, retryable } = err as WriterBudgetExceededError;
    expect(retryable).toBe(false);
    expect((err as Error).message).toContain(segmentKey);
    expect(await exists(segmentKey)).toBe(true);
    const after = (await readRoot(store, ns, jsonRootCodec)).root;
    expect(after).toEqual(before);
  });

  it('the budget is checked before every CAS attempt: a writer that loses a race and is past its budget sends no second CAS', async () => {
    const ns = newNamespace('race');
    await writeInputSegment(store, { namespaceId: ns, group: 'inodes' }, [record('a')]);
    let elapsed = 0;
    let casSent = 0;
    const racing = interceptStore(store, async (operation, key) => {
      if (operation !== 'putIfMatch' || key !== rootKey(ns)) return;
      casSent++;
      // Another writer's CAS lands first, and the retry comes after the budget.
      await writeInputSegment(store, { namespaceId: ns, group: 'inodes' }, [record('c')]);
      elapsed += writerBudgetMs + 1;
    });
    await expect(
      writeInputSegment(racing, { namespaceId: ns, group: 'inodes' }, [record('b')], {
        writerBudgetMs,
        elapsedMs: () => elapsed,
      }),
    ).rejects.toThrow(WriterBudgetExceededError);
    expect(casSent).toBe(1);
    expect((await readRoot(store, ns, jsonRootCodec)).root.groups.inodes).toHaveLength(2);
  });

  it('the unregistered segment of a writer past its budget is kept until the lost-write grace and goes after it', async () => {
    const ns = newNamespace('lost');
    await writeInputSegment(store, { namespaceId: ns, group: 'inodes' }, [record('a')]);
    let elapsed = 0;
    const paused = interceptStore(store, (operation) => {
      if (operation === 'put') elapsed += writerBudgetMs + 1;
    });
    const err = (await writeInputSegment(paused, { namespaceId: ns, group: 'inodes' }, [record('b')], {
      writerBudgetMs,
      elapsedMs: () => elapsed,
    }).catch((e: unknown) => e)) as WriterBudgetExceededError;
    // Past T (the old lost-write age) and past the writer budget, the segment stays: its writer could still have
    // registered it until the budget.
    for (const ahead of [gcMinGraceMs + MINUTE, writerBudgetMs + MINUTE, lostWriteGraceMs - MINUTE]) {
      const report = await pass(ns, ahead);
      expect(report.totals, `${ahead} ms ahead`).toMatchObject({ lostWritesDeleted: 0, retainedReferenced: 1 });
      expect(await exists(err.segmentKey)).toBe(true);
    }
    const late = await pass(ns, lostWriteGraceMs + MINUTE);
    expect(late.totals).toMatchObject({ lostWritesDeleted: 1, objectsDeleted: 1 });
    expect(await exists(err.segmentKey)).toBe(false);
    expect(await segmentsUnder(ns)).toEqual((await readRoot(store, ns, jsonRootCodec)).root.groups.inodes);
  });

  it("a segment replaced through updateRoot is retired at the writer's clock, kept for the reader grace, and goes after it", async () => {
    const ns = newNamespace('replaced');
    const [a, b] = [
      await writeInputSegment(store, { namespaceId: ns, group: 'inodes' }, [record('a')]),
      await writeInputSegment(store, { namespaceId: ns, group: 'inodes' }, [record('b')]),
    ];
    const merged = await writeInputSegment(store, { namespaceId: ns, group: 'dentries' }, [
      record('a'),
      record('b', 2),
    ]);
    const retiredAtMs = Date.now();
    const written = await updateRoot(
      store,
      ns,
      (root): RootState => ({ ...root, generation: root.generation + 1, groups: { dentries: [merged] } }),
      { codec: jsonRootCodec, clockMs: () => retiredAtMs },
    );
    expect(written.retired).toEqual([
      { key: a, retired_at_ms: retiredAtMs },
      { key: b, retired_at_ms: retiredAtMs },
    ]);
    expect((await readRoot(store, ns, jsonRootCodec)).root.retired).toEqual(written.retired);
    // The pass right after, and one just inside the reader grace: both kept for readers of the old root.
    for (const ahead of [0, readerGraceMs - MINUTE]) {
      const report = await pass(ns, ahead);
      expect(report.totals, `${ahead} ms ahead`).toMatchObject({
        retainedInGrace: 2,
        retiredDeleted: 0,
        lostWritesDeleted: 0,
      });
    }
    expect(await segmentsUnder(ns)).toEqual([a, b, merged].sort());
    const due = await pass(ns, readerGraceMs + MINUTE);
    expect(due.totals).toMatchObject({ retiredDeleted: 2, retiredRecordsDropped: 2 });
    expect(await segmentsUnder(ns)).toEqual([merged]);
  });

  it("segments a root writer replaced without retiring them (a service's own writer) are kept for the lost-write grace, not T", async () => {
    const ns = newNamespace('unretired');
    const [a, b, c] = [
      await writeInputSegment(store, { namespaceId: ns, group: 'inodes' }, [record('a')]),
      await writeInputSegment(store, { namespaceId: ns, group: 'inodes' }, [record('b')]),
      await writeInputSegment(store, { namespaceId: ns, group: 'inodes' }, [record('c')]),
    ];
    const output = inputSegmentKey(ns, newSegmentId(), 'mseg');
    await store.put(output, new TextEncoder().encode('an older publisher wrote this'));
    // A publication of the service's own: the inputs leave the group and no retired list names them.
    const current = await readRoot(store, ns, jsonRootCodec);
    const unretired = encodeRoot({
      namespace_id: ns,
      generation: current.root.generation + 1,
      groups: { inodes: [output] },
      retired: [],
    });
    await store.putIfMatch(rootKey(ns), unretired, current.etag);
    for (const ahead of [MINUTE, gcMinGraceMs + MINUTE, readerGraceMs + MINUTE, lostWriteGraceMs - MINUTE]) {
      const report = await pass(ns, ahead);
      expect(report.totals, `${ahead} ms ahead`).toMatchObject({ lostWritesDeleted: 0, retainedYoung: 3 });
    }
    expect(await segmentsUnder(ns)).toEqual([a, b, c, output].sort());
    const late = await pass(ns, lostWriteGraceMs + MINUTE);
    expect(late.totals).toMatchObject({ lostWritesDeleted: 3 });
    expect(await segmentsUnder(ns)).toEqual([output]);
  });
});
