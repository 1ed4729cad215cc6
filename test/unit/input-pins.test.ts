/**
 * The store a compactor reads its inputs through holds each input to the ETag `readGroup` saw: a
 * GET, stream or HEAD of another version throws InputChanged (non-retryable) naming the key, and a
 * stream that changed between two of its reads is InputChanged too. On the embedded store.
 */
import { ApplicationFailure } from '@temporalio/common';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { toFailure } from '../../src/activities/failures';
import { asInputError, checkInputs, InputChangedError, pinnedInputs } from '../../src/compactor/inputs';
import { createEmbeddedObjectStore, ObjectChangedError, type ObjectStore } from '../../src/store';
import { makeInputs, writeInputs } from '../support/records';

describe('pinned inputs', () => {
  let store: ObjectStore;
  let inputs: string[];
  beforeEach(async () => {
    store = createEmbeddedObjectStore({ path: ':memory:' });
    inputs = await writeInputs(store, 'pins', 'inodes', makeInputs(2, 20));
  });
  afterEach(() => store.close());

  it('checkInputs returns the ETag of each input in the order of the inputs', async () => {
    const etags = await checkInputs(store, 'inodes', inputs, 1 << 20);
    expect(etags).toEqual(await Promise.all(inputs.map(async (key) => (await store.head(key)).etag)));
  });

  it('reads an input at its pinned version, and refuses it by GET, stream and HEAD once it was rewritten', async () => {
    const etags = await checkInputs(store, 'inodes', inputs, 1 << 20);
    const pinned = pinnedInputs(store, 'inodes', inputs, etags);
    await expect(pinned.getStream(inputs[0]!)).resolves.toMatchObject({ etag: etags[0] });
    await store.put(inputs[0]!, (await store.get(inputs[1]!)).body);
    for (const read of [
      () => pinned.get(inputs[0]!),
      () => pinned.getStream(inputs[0]!),
      () => pinned.head(inputs[0]!),
    ]) {
      await expect(read()).rejects.toThrow(InputChangedError);
    }
    await expect(pinned.get(inputs[1]!)).resolves.toMatchObject({ etag: etags[1] });
  });

  it('is a non-retryable failure of type InputChanged naming the input, its pinned ETag and the one seen', async () => {
    const etags = await checkInputs(store, 'inodes', inputs, 1 << 20);
    await store.put(inputs[0]!, (await store.get(inputs[1]!)).body);
    const err = await pinnedInputs(store, 'inodes', inputs, etags)
      .head(inputs[0]!)
      .catch((e: unknown) => e);
    const failure = toFailure(err) as ApplicationFailure;
    expect([failure.type, failure.nonRetryable]).toEqual(['InputChanged', true]);
    expect(failure.message).toContain(inputs[0]);
    expect(failure.message).toContain(etags[0]);
    expect(failure.message).toContain((await store.head(inputs[0]!)).etag);
  });

  it("an input's stream that changed between two reads is InputChanged; another object's change is left as it is", () => {
    expect(asInputError(new ObjectChangedError(inputs[0]!, 'e1'), 'inodes', inputs)).toBeInstanceOf(InputChangedError);
    const other = new ObjectChangedError('namespaces/pins/metadata/root.json', 'e1');
    expect(asInputError(other, 'inodes', inputs)).toBe(other);
  });
});
