/**
 * The library's public surface as a metadata service imports it: one reading of the environment, and a collector pass's
 * report as a value.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { WorkflowFailedError, type Client } from '@temporalio/client';
import { ApplicationFailure, RetryState, WorkflowNotFoundError } from '@temporalio/common';
import { msToTs } from '@temporalio/common/lib/time';
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { afterEach, describe, expect, it, vi } from 'vitest';
import * as library from '../../src';
import * as errors from '../../src/error-classes';
import { LIVE_POLLER_WINDOW_MS } from '../../src/client/workers';
import { SettingsError } from '../../src/config';
import * as testing from '../../src/testing';
import { DEFAULT_TASK_QUEUE, taskQueueFromEnv } from '../../src/worker';
import type { GcReport } from '../../src/workflows/gc';
import { registeredAttributes } from '../support/search-attributes';

/**
 * A client whose `workflow.start` and `schedule.create` record their options and do nothing else; a
 * worker polls every task queue (one the server saw `pollerAgoMs` ago, unless not `polled`), and no workflow runs yet.
 */
function recordingClient({ polled = true, pollerAgoMs = 0 } = {}) {
  const started: { taskQueue?: string; args?: unknown[] }[] = [];
  const handle = (workflowId: string) => ({ workflowId, firstExecutionRunId: 'run-1' });
  const client = {
    options: { namespace: 'default' },
    workflow: {
      start: async (_type: string, options: { workflowId: string; taskQueue: string; args: unknown[] }) => (
        started.push(options),
        handle(options.workflowId)
      ),
      getHandle: (workflowId: string) => ({
        describe: () => Promise.reject(new WorkflowNotFoundError('not found', workflowId, undefined)),
      }),
    },
    workflowService: {
      describeTaskQueue: async () => ({
        pollers: !polled ? [] : [{ identity: 'w1', lastAccessTime: msToTs(Date.now() - pollerAgoMs) }],
      }),
      // A server that lists no worker heartbeats.
      listWorkers: async () => ({ workersInfo: [] }),
    },
    // A Temporal namespace with every search attribute registered, by its type.
    connection: {
      operatorService: { listSearchAttributes: async () => ({ customAttributes: registeredAttributes() }) },
    },
    schedule: {
      create: async (options: { action: { taskQueue: string; args: unknown[] } }) => (
        started.push(options.action),
        { scheduleId: 's' }
      ),
    },
  } as unknown as Client;
  return { client, started };
}

afterEach(() => {
  vi.unstubAllEnvs();
});

describe('the public API', () => {
  it.each([
    'SEARCH_ATTRIBUTES',
    'registerSearchAttributes',
    'installRuntime',
    'connectClientFromEnv',
    'startWorkerFromEnv',
    'createWorker',
    'startCompaction',
    'ensureGcSchedule',
    'runGcPass',
    'startGcPass',
    'gcPassResult',
    'waitForWorker',
    'writeInputSegment',
    'objectStoreFromEnv',
    'settingsFromEnv',
    'verifyStore',
    'requireFitStore',
  ])('exports %s', (name) => {
    expect(library).toHaveProperty(name);
  });

  it('keeps test helpers out of the main entry: dev servers, shrunk timings, the stand-in compactor and the conformance kit are compaction-lease/testing', () => {
    const helpers = [
      'startTemporalDevServer',
      'startMinio',
      'shrunkTiming',
      'defaultTimingDividedBy',
      'waitingCompactor',
      'checkFormat',
      'jobPrefix',
      'leaseKey',
    ];
    expect(helpers.filter((name) => !(name in testing))).toEqual([]);
    expect(helpers.filter((name) => name in library)).toEqual([]);
  });

  it('names at most 120 values in its main entry, and none twice across the three entries', () => {
    expect(Object.keys(library).length).toBeLessThanOrEqual(120);
    const entries = [Object.keys(library), Object.keys(errors), Object.keys(testing)];
    const names = entries.flat();
    expect(names.filter((name, i) => names.indexOf(name) !== i)).toEqual([]);
  });

  it('exports its error classes from compaction-lease/errors, each on the common base, and none from the main entry', () => {
    const classes = Object.entries(errors).filter(
      (entry): entry is [string, typeof errors.TypedError] =>
        entry[0].endsWith('Error') && entry[1] !== errors.TypedError,
    );
    expect(classes.length).toBeGreaterThan(30);
    expect(classes.filter(([, cls]) => !(cls.prototype instanceof errors.TypedError)).map(([name]) => name)).toEqual(
      [],
    );
    expect(Object.keys(library).filter((name) => name.endsWith('Error'))).toEqual([]);
  });

  it('is named export by export: a name a module adds stays inside until src/index.ts names it', () => {
    expect(readFileSync(join(__dirname, '..', '..', 'src', 'index.ts'), 'utf8')).not.toMatch(
      /export \*|export type \*/,
    );
  });

  it('exports every error class the README and the docs name, from compaction-lease/errors or ./testing, so a caller can catch it by its class', () => {
    const root = join(__dirname, '..', '..');
    const texts = [
      join(root, 'README.md'),
      ...readdirSync(join(root, 'docs'))
        .filter((f) => f.endsWith('.md'))
        .map((f) => join(root, 'docs', f)),
    ].map((file) => readFileSync(file, 'utf8'));
    const named = new Set(
      texts.flatMap((text) => [...text.matchAll(/\b([A-Z][A-Za-z]+Error)\b/g)].map((m) => m[1] as string)),
    );
    // JavaScript's own, an S3 error code, and the error a plug-in in docs/plugins.md declares for itself.
    const notOurs = new Set(['Error', 'RangeError', 'TypeError', 'InternalError', 'AcmeInputError']);
    expect(named.size).toBeGreaterThan(20);
    expect(
      [...named]
        .filter(
          (name) =>
            !notOurs.has(name) && typeof ({ ...errors, ...testing } as Record<string, unknown>)[name] !== 'function',
        )
        .sort(),
    ).toEqual([]);
  });

  it('registers every search attribute the workflows upsert, by the type the Temporal CLI names', () => {
    expect(library.SEARCH_ATTRIBUTES).toMatchObject({
      CompactionNamespace: 'Keyword',
      GcObjectsDeleted: 'Int',
      GcDryRun: 'Bool',
    });
  });
});

describe('one task queue setting for the library, the CLI and the worker', () => {
  it('startCompaction, ensureGcSchedule and startGcPass start on COMPACTION_TASK_QUEUE when no task queue is given', async () => {
    vi.stubEnv('COMPACTION_TASK_QUEUE', 'tq2');
    const { client, started } = recordingClient();
    await library.startCompaction(client, { namespaceId: 'tenant-7', group: 'inodes' });
    await library.ensureGcSchedule(client, { cron: '*/15 * * * *' });
    await library.startGcPass(client, { dryRun: true });
    expect(started.map((s) => s.taskQueue)).toEqual(['tq2', 'tq2', 'tq2']);
    expect(taskQueueFromEnv()).toBe('tq2');
  });

  it('without it they all use the default queue, the one a worker polls by default', async () => {
    vi.stubEnv('COMPACTION_TASK_QUEUE', '');
    const { client, started } = recordingClient();
    await library.startCompaction(client, { namespaceId: 'tenant-7', group: 'inodes' });
    expect(started[0]?.taskQueue).toBe(DEFAULT_TASK_QUEUE);
  });

  it("ensureGcSchedule and startGcPass record COMPACTION_COLLECTOR_TASK_QUEUE in the pass's input, unless told another", async () => {
    vi.stubEnv('COMPACTION_TASK_QUEUE', 'tq2');
    vi.stubEnv('COMPACTION_COLLECTOR_TASK_QUEUE', 'gc2');
    const { client, started } = recordingClient();
    await library.ensureGcSchedule(client, { cron: '*/15 * * * *', pass: { dryRun: true } });
    await library.startGcPass(client, { taskQueue: 'elsewhere' });
    await library.startGcPass(client, { collectorTaskQueue: 'gc3' });
    expect(started.map((s) => [s.taskQueue, s.args?.[0]])).toEqual([
      ['tq2', { dryRun: true, collectorTaskQueue: 'gc2' }],
      ['elsewhere', { collectorTaskQueue: 'gc2' }],
      ['tq2', { collectorTaskQueue: 'gc3' }],
    ]);
  });

  it("without it a pass's collector work stays on the queue the pass starts on", async () => {
    vi.stubEnv('COMPACTION_TASK_QUEUE', 'tq2');
    vi.stubEnv('COMPACTION_COLLECTOR_TASK_QUEUE', '');
    const { client, started } = recordingClient();
    await library.ensureGcSchedule(client, { every: '1h' });
    await library.startGcPass(client, { taskQueue: 'elsewhere' });
    expect(started.map((s) => (s.args?.[0] as { collectorTaskQueue?: string }).collectorTaskQueue)).toEqual([
      'tq2',
      'elsewhere',
    ]);
  });

  it('startCompaction and startGcPass with no live worker on their queue throw NoWorkerPollingError naming it, within workerTimeoutMs, and start nothing', async () => {
    const { client, started } = recordingClient({ polled: false });
    const before = Date.now();
    await expect(
      library.startCompaction(client, {
        namespaceId: 'tenant-7',
        group: 'inodes',
        taskQueue: 'nobody',
        workerTimeoutMs: 200,
      }),
    ).rejects.toThrow(errors.NoWorkerPollingError);
    await expect(library.runGcPass(client, { taskQueue: 'nobody', workerTimeoutMs: 200 })).rejects.toThrow(
      /^no worker polls task queue nobody in Temporal namespace default \(waited 0.2s\)/,
    );
    expect(Date.now() - before).toBeLessThan(5_000);
    expect(started).toEqual([]);
  });

  it('a poller the server last saw more than LIVE_POLLER_WINDOW_MS ago is a stopped worker; workerTimeoutMs: false starts without looking', async () => {
    const { client, started } = recordingClient({ pollerAgoMs: LIVE_POLLER_WINDOW_MS + 5_000 });
    await expect(
      library.startCompaction(client, { namespaceId: 'tenant-7', group: 'inodes', workerTimeoutMs: 0 }),
    ).rejects.toThrow(errors.NoWorkerPollingError);
    await library.startCompaction(client, { namespaceId: 'tenant-7', group: 'inodes', workerTimeoutMs: false });
    expect(started).toHaveLength(1);
  });

  it('a COMPACTION_LOG_LEVEL that is not a level stops the worker before the Runtime is installed', () => {
    expect(() => library.installRuntime({ COMPACTION_LOG_LEVEL: 'loud' })).toThrow(SettingsError);
    expect(() => library.installRuntime({ COMPACTION_LOG_LEVEL: 'loud' })).toThrow(
      'COMPACTION_LOG_LEVEL must be one of TRACE, DEBUG, INFO, WARN, ERROR, not "loud"',
    );
  });

  it('in a process that installed its own Runtime, installRuntime keeps that one, and refuses COMPACTION_LOG_LEVEL or metrics, which could not apply', () => {
    Runtime.install({ logger: new DefaultLogger('ERROR') });
    expect(library.installRuntime({})).toBe('existing');
    expect(() =>
      library.installRuntime({ COMPACTION_LOG_LEVEL: 'INFO', COMPACTION_METRICS_PROMETHEUS: '127.0.0.1:0' }),
    ).toThrow(
      /^COMPACTION_LOG_LEVEL and COMPACTION_METRICS_PROMETHEUS cannot apply: this process already has a Temporal Runtime .*installRuntime: false/,
    );
  });
});

describe('a collector pass as a value', () => {
  const report = {
    nowMs: 1,
    dryRun: false,
    totals: { corrupt: 1 },
    corruptNamespaces: ['tenant-8'],
    corruptLeases: [],
    failures: [],
    unrecognisedKeys: [],
  } as unknown as GcReport;
  const handleFailingWith = (err: unknown) =>
    ({
      workflowId: 'gc-1',
      firstExecutionRunId: 'run-1',
      result: () => Promise.reject(err),
    }) as unknown as library.GcPassHandle;

  it('an incomplete pass resolves with complete: false and the report it failed with', async () => {
    const failed = new WorkflowFailedError(
      'failed',
      ApplicationFailure.create({ type: 'GcPassIncomplete', message: 'incomplete', details: [report] }),
      RetryState.NON_RETRYABLE_FAILURE,
    );
    await expect(library.gcPassResult(handleFailingWith(failed))).resolves.toEqual({
      workflowId: 'gc-1',
      runId: 'run-1',
      complete: false,
      report,
    });
  });

  it('any other failure is thrown', async () => {
    const failed = new WorkflowFailedError(
      'failed',
      ApplicationFailure.nonRetryable('bad', 'InvalidInput'),
      RetryState.NON_RETRYABLE_FAILURE,
    );
    await expect(library.gcPassResult(handleFailingWith(failed))).rejects.toBe(failed);
  });
});
