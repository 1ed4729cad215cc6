/**
 * An expected failure of a plug-in (a typed error no retry can fix, such as its input refused) is
 * logged once by the worker, as the workflow's failure, without a stack or a task token: the
 * activity's failure is BENIGN, which the SDK logs at DEBUG (issue 29, item 7). The runtime logger
 * is this file's own, so it installs the Runtime itself and imports no fixture that does.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, Connection, WorkflowFailedError } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { DefaultLogger, NativeConnection, Runtime, type LogEntry, type LogLevel } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { startCompaction } from '../../src/client';
import { resolveSettings, shrunkTiming } from '../../src/config';
import { TypedError } from '../../src/errors';
import { createEmbeddedObjectStore, type ObjectStore } from '../../src/store';
import { createWorker } from '../../src/worker';
import { makeInputs, writeInputs } from '../support/records';

const logged: LogEntry[] = [];
Runtime.install({ logger: new DefaultLogger('DEBUG', (entry) => logged.push(entry)) });

/** What a format plug-in throws for input it cannot take: typed, of a failure type no retry can fix. */
class PluginInputError extends TypedError {
  readonly failureType = 'InvalidInput';
}

const REASON = 'record 7 of the group has an empty key: the acme format cannot encode it';
const LOUD: readonly LogLevel[] = ['WARN', 'ERROR'];
const mentions = (entry: LogEntry) =>
  `${entry.message} ${String((entry.meta?.error as Error | undefined)?.message)}`.includes(REASON);

describe('an expected plug-in failure in the worker log', () => {
  let store: ObjectStore;
  let client: Client;
  let connection: Connection;
  let stopWorker: () => Promise<void>;
  const taskQueue = `expected-failure-${process.pid}-${Date.now().toString(36)}`;

  beforeAll(async () => {
    store = createEmbeddedObjectStore({ path: join(mkdtempSync(join(tmpdir(), 'expected-failure-')), 'store.sqlite') });
    const workerConnection = await NativeConnection.connect({ address: inject('temporalAddress') });
    const worker = await createWorker({
      store,
      settings: resolveSettings({
        timing: shrunkTiming(1000, 5000),
        targetSegmentBytes: 4096,
        heartbeatTimeoutMs: 5000,
      }),
      connection: workerConnection,
      taskQueue,
      storeCheck: 'skip',
      compactor: { compact: () => Promise.reject(new PluginInputError(REASON)) },
      log: () => {},
    });
    const running = worker.run();
    stopWorker = async () => {
      worker.shutdown();
      await running;
      await workerConnection.close();
    };
    connection = await Connection.connect({ address: inject('temporalAddress') });
    client = new Client({ connection });
  });
  afterAll(async () => {
    await stopWorker?.();
    await connection?.close();
    await store?.close();
  });

  it('is logged once, as the workflow failed, with no stack and no task token; the activity failure only at DEBUG', async () => {
    const ns = `expected-${process.pid}`;
    await writeInputs(store, ns, 'inodes', makeInputs(2, 20));
    const handle = await startCompaction(client, { namespaceId: ns, group: 'inodes', taskQueue });
    const err: unknown = await handle.result().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(WorkflowFailedError);
    expect((err as WorkflowFailedError).cause).toBeInstanceOf(ApplicationFailure);
    expect(((err as WorkflowFailedError).cause as ApplicationFailure).type).toBe('InvalidInput');

    const loud = logged.filter((entry) => LOUD.includes(entry.level));
    expect(loud.filter((entry) => entry.meta?.taskToken !== undefined)).toEqual([]);
    const stated = loud.filter(mentions);
    expect(stated.map((entry) => entry.message)).toEqual(['Workflow failed']);
    expect(String((stated[0]!.meta?.error as Error).stack)).not.toMatch(/\n\s+at /);
    expect(
      logged.filter((entry) => entry.level === 'DEBUG' && entry.message === 'Activity failed' && mentions(entry)),
    ).toHaveLength(1);
  });
});
