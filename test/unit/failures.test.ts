/**
 * Every error class names a failure type, and the retry policies' list of non-retryable types agrees with the classes.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ApplicationFailure } from '@temporalio/common';
import { describe, expect, it } from 'vitest';
import { toFailure } from '../../src/activities/failures';
import * as storeBinding from '../../src/activities/store-binding';
import * as clientSchedule from '../../src/client/schedule';
import * as clientSearchAttributes from '../../src/client/search-attributes';
import * as clientWaiting from '../../src/client/waiting';
import * as clientWorkers from '../../src/client/workers';
import * as cliExitCodes from '../../src/cli/exit-codes';
import * as compactorInputs from '../../src/compactor/inputs';
import * as compactorPlan from '../../src/compactor/plan';
import * as compactorPlugin from '../../src/compactor/plugin';
import * as compactorRecurring from '../../src/compactor/recurring';
import * as settings from '../../src/config/settings';
import * as timing from '../../src/config/timing';
import * as conformance from '../../src/conformance';
import { FAILURE_TYPES, NON_RETRYABLE_FAILURE_TYPES, TypedError } from '../../src/errors';
import * as keys from '../../src/keys';
import * as leaseCodec from '../../src/lease/codec';
import * as leaseState from '../../src/lease/state';
import * as collector from '../../src/collector';
import * as inputList from '../../src/protocol/input-list';
import * as jobLease from '../../src/protocol/job-lease';
import * as publication from '../../src/protocol/publication';
import * as rootIo from '../../src/protocol/root-io';
import * as root from '../../src/root';
import * as segments from '../../src/segments/format';
import * as storePort from '../../src/store/port';
import * as storeProbe from '../../src/store/probe';
import * as storeS3 from '../../src/store/s3';
import * as formatModule from '../../src/worker/format-module';
import { activityRetry } from '../../src/workflows/activity-options';
import * as writer from '../../src/writer';

const modules = [
  compactorInputs,
  compactorPlan,
  compactorPlugin,
  compactorRecurring,
  settings,
  timing,
  conformance,
  keys,
  leaseCodec,
  leaseState,
  collector,
  inputList,
  jobLease,
  publication,
  rootIo,
  root,
  segments,
  storePort,
  storeProbe,
  storeS3,
  formatModule,
  writer,
  storeBinding,
  clientSchedule,
  clientSearchAttributes,
  clientWaiting,
  clientWorkers,
  cliExitCodes,
];
type ErrorClass = abstract new (...args: never[]) => Error;
const errorClasses = [...new Set(modules.flatMap((m) => Object.values(m)))].filter(
  (value): value is ErrorClass => typeof value === 'function' && value.prototype instanceof Error,
);

/** An instance, whatever the constructor's arguments: class fields exist only on instances. */
function instanceOf(cls: ErrorClass): TypedError {
  for (const args of [['k', 'reason', 1, 2], ['k', []], ['k', { namespaceId: 'ns', jobId: 'j' }, 'x', 'y'], []]) {
    try {
      return Reflect.construct(cls, args) as TypedError;
    } catch {
      // another argument shape
    }
  }
  throw new Error(`cannot construct ${cls.name}`);
}

/** The names of the error classes src/ declares (a class extending another `…Error`), read from the sources. */
function declaredErrorClasses(dir = join(__dirname, '..', '..', 'src')): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return declaredErrorClasses(path);
    if (!entry.name.endsWith('.ts')) return [];
    return [...readFileSync(path, 'utf8').matchAll(/class (\w+) extends (TypedError|\w+Error)\b/g)].map((m) => m[1]!);
  });
}

describe('the error map', () => {
  // The abstract bases name no failure type of their own.
  const concrete = errorClasses.filter(
    (cls) => !Object.is(cls, storePort.StoreError) && !Object.is(cls, compactorPlugin.CompactorRuleError),
  );
  const typed = concrete.map(instanceOf);

  it('the test sees every typed error class src/ declares', () => {
    const seen = new Set(errorClasses.map((cls) => cls.name));
    expect(declaredErrorClasses().filter((name) => !seen.has(name))).toEqual([]);
  });

  it('every error class of the library (activities, starts and waits) is a TypedError named after its class', () => {
    expect(concrete.length).toBeGreaterThan(30);
    for (const cls of errorClasses) expect(cls.prototype instanceof TypedError, cls.name).toBe(true);
    for (const [i, error] of typed.entries()) expect(error.name).toBe(concrete[i]!.name);
  });

  it("every non-retryable class is in the retry policies' list, every retryable one is not", () => {
    const nonRetryable = new Set<string>(activityRetry().nonRetryableErrorTypes);
    for (const error of typed)
      expect(nonRetryable.has(error.failureType), `${error.name} (${error.failureType})`).toBe(!error.retryable);
    expect([...nonRetryable].sort()).toEqual([...NON_RETRYABLE_FAILURE_TYPES].sort());
  });

  it("every failure type is some class's, or a workflow's own failure: no type is declared that nothing raises", () => {
    // A pass that ran to its end incomplete: gcWorkflow fails with its report as the failure's detail.
    const raisedByWorkflows = ['GcPassIncomplete'];
    expect([...new Set([...typed.map((e) => e.failureType), ...raisedByWorkflows])].sort()).toEqual(
      Object.keys(FAILURE_TYPES).sort(),
    );
  });

  it('failure types are class names without "Error", unless several classes share one', () => {
    const shared = new Set(['InvalidInput', 'InvalidSettings']);
    for (const error of typed) if (!shared.has(error.failureType)) expect(`${error.failureType}Error`).toBe(error.name);
  });

  it('writer input that cannot form a segment is invalid input: no retry can fix it', () => {
    const refused = new writer.InvalidSegmentInputError({ namespaceId: 'ns', group: 'g', reason: 'no records' });
    expect([refused.failureType, refused.retryable]).toEqual(['InvalidInput', false]);
  });

  it('a typed error becomes a failure of its type and retryability; another error stays retryable under its name', () => {
    const lost = toFailure(new jobLease.LeaseLostError('namespaces/a/lease.json', 'claimed')) as ApplicationFailure;
    expect([lost.type, lost.nonRetryable]).toEqual(['LeaseLost', true]);
    const unavailable = toFailure(new storePort.StoreUnavailableError('k', 'reset')) as ApplicationFailure;
    expect([unavailable.type, unavailable.nonRetryable]).toEqual(['StoreUnavailable', false]);
    const plain = toFailure(new RangeError('x')) as ApplicationFailure;
    expect([plain.type, plain.nonRetryable]).toEqual(['RangeError', false]);
  });
});
