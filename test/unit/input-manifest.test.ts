/**
 * A job's input manifest: written once per attempt under the job prefix, read back only as written, out of a
 * compactor's reach.
 */
import { describe, expect, it } from 'vitest';
import { checkStagedKeys, OutsideJobPrefixError, stagedStore } from '../../src/compactor';
import {
  inputManifestKey,
  isInputManifestKeyOf,
  jobId,
  leaseKey,
  namespaceId,
  parseCompactionKey,
} from '../../src/keys';
import {
  InputManifestUnreadableError,
  LeaseLostError,
  readInputManifest,
  readInputManifestUnderLease,
  writeInputManifest,
} from '../../src/protocol';
import { createEmbeddedObjectStore } from '../../src/store';

const ns = namespaceId('demo');
const job = { namespaceId: ns, jobId: jobId(`cmp_${'a'.repeat(32)}`) };
const other = { namespaceId: ns, jobId: jobId(`cmp_${'b'.repeat(32)}`) };
const manifest = {
  group: 'inodes',
  inputs: ['namespaces/demo/metadata/segments/a.mseg', 'namespaces/demo/metadata/segments/b.mseg'],
  etags: ['"1"', '"2"'],
};

describe('the input manifest', () => {
  it('is a staged object of its job, one key per readGroup attempt, none of another job', () => {
    const first = inputManifestKey(ns, job.jobId, 1);
    expect(parseCompactionKey(first)).toMatchObject({
      kind: 'staged_segment',
      namespaceId: ns,
      jobId: job.jobId,
      extension: 'inputs',
    });
    expect(inputManifestKey(ns, job.jobId, 2)).not.toBe(first);
    expect(isInputManifestKeyOf(ns, job.jobId, first)).toBe(true);
    expect(isInputManifestKeyOf(ns, other.jobId, first)).toBe(false);
  });

  it('reads back as written: the inputs, their ETags and the group', async () => {
    const store = createEmbeddedObjectStore({ path: ':memory:' });
    const ref = await writeInputManifest(store, job, 1, manifest);
    expect(ref).toMatchObject({ key: inputManifestKey(ns, job.jobId, 1), count: 2 });
    expect(await readInputManifest(store, job, ref)).toEqual(manifest);
    await store.close();
  });

  it.each([
    [
      'rewritten since',
      'changed since it was written',
      async (store: ReturnType<typeof createEmbeddedObjectStore>, key: string) =>
        void (await store.put(key, new TextEncoder().encode('{}'))),
    ],
    [
      'gone',
      'is gone',
      async (store: ReturnType<typeof createEmbeddedObjectStore>, key: string) => void (await store.deleteMany([key])),
    ],
  ])('one %s is refused with InputManifestUnreadableError naming the key', async (_, reason, damage) => {
    const store = createEmbeddedObjectStore({ path: ':memory:' });
    const ref = await writeInputManifest(store, job, 1, manifest);
    await damage(store, ref.key);
    await expect(readInputManifest(store, job, ref)).rejects.toThrow(InputManifestUnreadableError);
    await expect(readInputManifest(store, job, ref)).rejects.toThrow(`input manifest ${ref.key} ${reason}`);
    await store.close();
  });

  it('gone under the lease (taken for an orphan before the lease existed) is a lost lease: the job is fenced and runs again; changed is still unreadable', async () => {
    const store = createEmbeddedObjectStore({ path: ':memory:' });
    const ref = await writeInputManifest(store, job, 1, manifest);
    expect(await readInputManifestUnderLease(store, job, ref)).toEqual(manifest);
    await store.put(ref.key, new TextEncoder().encode('{}'));
    await expect(readInputManifestUnderLease(store, job, ref)).rejects.toThrow(InputManifestUnreadableError);
    await store.deleteMany([ref.key]);
    const lost = await readInputManifestUnderLease(store, job, ref).catch((err: unknown) => err);
    expect(lost).toBeInstanceOf(LeaseLostError);
    expect(lost).toMatchObject({ key: leaseKey(ns, job.jobId), failureType: 'LeaseLost' });
    expect((lost as Error).message).toContain(`input manifest ${ref.key} is gone`);
    await store.close();
  });

  it("another job's manifest, or another count, is refused", async () => {
    const store = createEmbeddedObjectStore({ path: ':memory:' });
    const ref = await writeInputManifest(store, job, 1, manifest);
    await expect(readInputManifest(store, other, ref)).rejects.toThrow(/is not the input manifest of job/);
    await expect(readInputManifest(store, job, { ...ref, count: 3 })).rejects.toThrow(/with 3 inputs/);
    await store.close();
  });

  it('a compactor may neither write nor return it', async () => {
    const store = createEmbeddedObjectStore({ path: ':memory:' });
    const key = inputManifestKey(ns, job.jobId, 1);
    expect(() => checkStagedKeys(job, [key])).toThrow(OutsideJobPrefixError);
    await expect(stagedStore(store, job).put(key, new Uint8Array(1))).rejects.toThrow(OutsideJobPrefixError);
    await store.close();
  });
});
