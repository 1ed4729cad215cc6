/** Every error class decides its own failure type and retryability, and the retry policies' list agrees with them. */
import { ApplicationFailure } from '@temporalio/common';
import { describe, expect, it } from 'vitest';
import { NON_RETRYABLE_TYPES, toFailure } from '../../src/activities/failures';
import * as compactor from '../../src/compactor';
import * as compactorInputs from '../../src/compactor/inputs';
import * as config from '../../src/config';
import { TypedError } from '../../src/errors';
import * as keys from '../../src/keys';
import * as lease from '../../src/lease';
import * as protocol from '../../src/protocol';
import * as root from '../../src/root';
import * as segments from '../../src/segments/format';
import * as store from '../../src/store';
import * as writer from '../../src/writer';

/** The modules activities run: every error class they export. */
const errorClasses = [...new Set([compactor, compactorInputs, config, keys, lease, protocol, root, segments, store, writer].flatMap((m) => Object.values(m)))].filter(
  (value): value is abstract new (...args: never[]) => Error => typeof value === 'function' && value.prototype instanceof Error,
);

/** An instance, whatever the constructor's arguments: class fields exist only on instances. */
function instanceOf(cls: abstract new (...args: never[]) => Error): TypedError {
  for (const args of [['k', 'reason', 1, 2], ['k', []], []]) {
    try {
      return Reflect.construct(cls, args) as TypedError;
    } catch {
      // another argument shape
    }
  }
  throw new Error(`cannot construct ${cls.name}`);
}

describe('the error map', () => {
  const concrete = errorClasses.filter((cls) => cls !== store.StoreError);

  it('every error class activities can throw is a TypedError, so it had to decide its type and retryability', () => {
    expect(concrete.length).toBeGreaterThan(15);
    for (const cls of errorClasses) expect(cls.prototype instanceof TypedError, cls.name).toBe(true);
  });

  it("the retry policies' list of non-retryable types is exactly the types of the non-retryable classes", () => {
    const decided = new Set(concrete.map(instanceOf).filter((e) => !e.retryable).map((e) => e.failureType));
    expect([...decided].sort()).toEqual([...NON_RETRYABLE_TYPES].sort());
  });

  it('a typed error becomes a failure of its type and retryability; another error stays retryable under its name', () => {
    const lost = toFailure(new protocol.LeaseLostError('namespaces/a/lease.json', 'claimed')) as ApplicationFailure;
    expect([lost.type, lost.nonRetryable]).toEqual(['LeaseLost', true]);
    const unavailable = toFailure(new store.StoreUnavailableError('k', 'reset')) as ApplicationFailure;
    expect([unavailable.type, unavailable.nonRetryable]).toEqual(['StoreUnavailableError', false]);
    const plain = toFailure(new RangeError('x')) as ApplicationFailure;
    expect([plain.type, plain.nonRetryable]).toEqual(['RangeError', false]);
  });
});
