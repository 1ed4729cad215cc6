/**
 * A namespace's history starts with its root's first change (spec 6c.5), on MinIO through the S3
 * fault proxy: a root is created empty at generation 1, and the history marker (`gc/judged-root`,
 * the copy of that root) is written before the first CAS that gives it content. So a root lost
 * after it had content is refused afresh (`RootLostError`) though no collector pass ever ran, a
 * root lost while still the empty first one is simply created again, and a writer stopped between
 * the two writes leaves nothing wedged. Before the marker the fence started with the first pass's
 * copy: the first test's write created the root afresh, naming only its own segment.
 */
import { describe, expect, it } from 'vitest';
import { resolveTiming } from '../../src/config';
import { familyGroup, judgedRootKey, namespaceId, rootKey, type NamespaceId } from '../../src/keys';
import { readRoot, RootLostError, updateRoot } from '../../src/protocol';
import { readJudgedRoot, restoreJudgedRoot } from '../../src/collector';
import { groupSegments, jsonRootCodec, MAX_COLLECTED_ROOT_BYTES } from '../../src/root';
import { NotFoundError, type ObjectStore } from '../../src/store';
import { writeInputSegment } from '../../src/writer';
import { passAhead } from '../support/pass';
import { proxiedMinio } from '../support/proxied-minio';
import { readGroupView } from '../support/records';
import { s3Requests } from '../support/s3-fault-proxy';
import { uniqueId } from '../support/temporal';

const timing = resolveTiming();
const group = familyGroup('inodes');

describe("a namespace's history starts with its root's first change, on MinIO", () => {
  const minio = proxiedMinio();
  const newNamespace = () => namespaceId(uniqueId('history').toLowerCase());
  const rootOf = async (ns: NamespaceId) => (await readRoot(minio.fixture.store, ns, jsonRootCodec)).root;
  const markerOf = async (ns: NamespaceId) =>
    (await readJudgedRoot(minio.fixture.store, ns, jsonRootCodec, MAX_COLLECTED_ROOT_BYTES))?.root;
  const missing = (store: ObjectStore, key: string) => expect(store.head(key)).rejects.toBeInstanceOf(NotFoundError);

  it('a root with content lost before any pass ran is not created afresh: writers refuse, a pass deletes nothing, and a restore lists the segments to register again', async () => {
    const ns = newNamespace();
    const a = await writeInputSegment(minio.fixture.store, { namespaceId: ns, group }, [
      { key: 'a', seq: 1, value: 'x' },
    ]);
    const b = await writeInputSegment(minio.fixture.store, { namespaceId: ns, group }, [
      { key: 'b', seq: 2, value: 'y' },
    ]);
    expect(await rootOf(ns)).toMatchObject({ generation: 3, groups: { [group]: [a, b] } });
    // The marker is the empty first root, written before the first registration.
    expect(await markerOf(ns)).toEqual({ namespace_id: ns, generation: 1, groups: {}, retired: [] });

    await minio.fixture.store.deleteMany([rootKey(ns)]);
    await expect(
      writeInputSegment(minio.fixture.store, { namespaceId: ns, group }, [{ key: 'c', seq: 3, value: 'z' }]),
    ).rejects.toBeInstanceOf(RootLostError);
    await expect(updateRoot(minio.fixture.store, ns, (root) => root, { codec: jsonRootCodec })).rejects.toBeInstanceOf(
      RootLostError,
    );
    await missing(minio.fixture.store, rootKey(ns));

    const blind = await passAhead(minio.fixture.store, ns, timing.lostWriteGraceMs + timing.readerGraceMs + 60_000);
    expect(blind.totals.objectsDeleted).toBe(0);
    expect(blind.rootProblems).toEqual([
      expect.objectContaining({ problem: 'missing', reason: expect.stringMatching(/root restore/) }),
    ]);
    for (const key of [a, b]) await expect(minio.fixture.store.head(key)).resolves.toBeDefined();
    const plan = await restoreJudgedRoot(minio.fixture.store, ns, jsonRootCodec, {
      apply: false,
      maxBytes: MAX_COLLECTED_ROOT_BYTES,
    });
    expect(plan).toMatchObject({
      judgedGeneration: 1,
      currentGeneration: undefined,
      restoredGeneration: 2,
      unnamedCount: 3,
    });
    expect(plan.unnamedSegments).toEqual(expect.arrayContaining([a, b]));
  });

  it('a root lost while still the empty first one (no marker) is created again by the next writer, and nothing is lost', async () => {
    const ns = newNamespace();
    // The change names nothing: the root is created, empty at generation 1, and not changed.
    expect(await updateRoot(minio.fixture.store, ns, (root) => root, { codec: jsonRootCodec })).toEqual({
      namespace_id: ns,
      generation: 1,
      groups: {},
      retired: [],
    });
    await missing(minio.fixture.store, judgedRootKey(ns));

    await minio.fixture.store.deleteMany([rootKey(ns)]);
    const a = await writeInputSegment(minio.fixture.store, { namespaceId: ns, group }, [
      { key: 'a', seq: 1, value: 'x' },
    ]);
    expect(await rootOf(ns)).toMatchObject({ generation: 2, groups: { [group]: [a] } });
    expect((await markerOf(ns))?.generation).toBe(1);
    expect(await readGroupView(minio.fixture.store, ns, group)).toEqual({ a: 'x' });
  });

  it('a writer stopped between creating the root and writing the marker wedges nothing: the next write marks the history and registers, and a pass takes the marker over by CAS', async () => {
    const ns = newNamespace();
    const before = minio.proxy.injected.answer;
    minio.proxy.script(
      { status: 403, code: 'AccessDenied' },
      (r) => s3Requests.createIfAbsent(r) && r.key === judgedRootKey(ns),
    );
    await expect(
      writeInputSegment(minio.viaProxy, { namespaceId: ns, group }, [{ key: 'a', seq: 1, value: 'x' }]),
    ).rejects.toThrow(/access denied to .*gc\/judged-root/);
    expect(minio.proxy.injected.answer).toBe(before + 1);
    expect(await rootOf(ns)).toEqual({ namespace_id: ns, generation: 1, groups: {}, retired: [] });
    await missing(minio.fixture.store, judgedRootKey(ns));

    const b = await writeInputSegment(minio.fixture.store, { namespaceId: ns, group }, [
      { key: 'b', seq: 2, value: 'y' },
    ]);
    expect((await markerOf(ns))?.generation).toBe(1);
    expect(groupSegments(await rootOf(ns), group)).toEqual([b]);

    const report = await passAhead(minio.fixture.store, ns, 1000);
    expect(report.rootProblems).toEqual([]);
    expect((await markerOf(ns))?.generation).toBeGreaterThanOrEqual(2);
    expect(await readGroupView(minio.fixture.store, ns, group)).toEqual({ b: 'y' });
  });
});
