/**
 * A job's input list: written once per attempt under the job prefix, read back only as written, out of a
 * compactor's reach.
 */
import { describe, expect, it } from 'vitest';
import { checkStagedKeys, OutsideJobPrefixError, stagedStore } from '../../src/compactor';
import { inputListKey, isInputListKeyOf, jobId, leaseKey, namespaceId, parseCompactionKey } from '../../src/keys';
import {
  InputListUnreadableError,
  LeaseLostError,
  readInputList,
  readInputListUnderLease,
  writeInputList,
} from '../../src/protocol';
import { createEmbeddedObjectStore } from '../../src/store';

const ns = namespaceId('demo');
const job = { namespaceId: ns, jobId: jobId(`cmp_${'a'.repeat(32)}`) };
const other = { namespaceId: ns, jobId: jobId(`cmp_${'b'.repeat(32)}`) };
const list = {
  group: 'inodes',
  inputs: ['namespaces/demo/metadata/segments/a.mseg', 'namespaces/demo/metadata/segments/b.mseg'],
  etags: ['"1"', '"2"'],
};

describe('the input list', () => {
  it('is a staged object of its job, one key per readGroup attempt, none of another job', () => {
    const first = inputListKey(ns, job.jobId, 1);
    expect(parseCompactionKey(first)).toMatchObject({
      kind: 'staged_segment',
      namespaceId: ns,
      jobId: job.jobId,
      extension: 'inputs',
    });
    expect(inputListKey(ns, job.jobId, 2)).not.toBe(first);
    expect(isInputListKeyOf(ns, job.jobId, first)).toBe(true);
    expect(isInputListKeyOf(ns, other.jobId, first)).toBe(false);
  });

  it('reads back as written: the inputs, their ETags and the group', async () => {
    const store = createEmbeddedObjectStore({ path: ':memory:' });
    const ref = await writeInputList(store, job, 1, list);
    expect(ref).toMatchObject({ key: inputListKey(ns, job.jobId, 1), count: 2 });
    expect(await readInputList(store, job, ref)).toEqual(list);
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
  ])('one %s is refused with InputListUnreadableError naming the key', async (_, reason, damage) => {
    const store = createEmbeddedObjectStore({ path: ':memory:' });
    const ref = await writeInputList(store, job, 1, list);
    await damage(store, ref.key);
    await expect(readInputList(store, job, ref)).rejects.toThrow(InputListUnreadableError);
    await expect(readInputList(store, job, ref)).rejects.toThrow(`input list ${ref.key} ${reason}`);
    await store.close();
  });

  it('gone under the lease (taken for an orphan before the lease existed) is a lost lease: the job is fenced and runs again; changed is still unreadable', async () => {
    const store = createEmbeddedObjectStore({ path: ':memory:' });
    const ref = await writeInputList(store, job, 1, list);
    expect(await readInputListUnderLease(store, job, ref)).toEqual(list);
    await store.put(ref.key, new TextEncoder().encode('{}'));
    await expect(readInputListUnderLease(store, job, ref)).rejects.toThrow(InputListUnreadableError);
    await store.deleteMany([ref.key]);
    const lost = await readInputListUnderLease(store, job, ref).catch((err: unknown) => err);
    expect(lost).toBeInstanceOf(LeaseLostError);
    expect(lost).toMatchObject({ key: leaseKey(ns, job.jobId), failureType: 'LeaseLost' });
    expect((lost as Error).message).toContain(`input list ${ref.key} is gone`);
    await store.close();
  });

  it("another job's input list, or another count, is refused", async () => {
    const store = createEmbeddedObjectStore({ path: ':memory:' });
    const ref = await writeInputList(store, job, 1, list);
    await expect(readInputList(store, other, ref)).rejects.toThrow(/is not the input list of job/);
    await expect(readInputList(store, job, { ...ref, count: 3 })).rejects.toThrow(/with 3 inputs/);
    await store.close();
  });

  it('a compactor may neither write nor return it', async () => {
    const store = createEmbeddedObjectStore({ path: ':memory:' });
    const key = inputListKey(ns, job.jobId, 1);
    expect(() => checkStagedKeys(job, [key])).toThrow(OutsideJobPrefixError);
    await expect(stagedStore(store, job).put(key, new Uint8Array(1))).rejects.toThrow(OutsideJobPrefixError);
    await store.close();
  });
});
