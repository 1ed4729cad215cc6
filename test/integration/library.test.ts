/**
 * The library path of a metadata service on the shared dev server: a worker from the environment, compactions and
 * collector passes through the public API.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Client } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it, inject, vi } from 'vitest';
import {
  registerSearchAttributes,
  runGcPass,
  SEARCH_ATTRIBUTES,
  startCompaction,
  startWorkerFromEnv,
  type Timing,
  type WorkerFromEnv,
} from '../../src';
import { TIMING_ENV } from '../../src/config';
import { leaseKey, namespaceId, newJobId } from '../../src/keys';
import { updateRoot } from '../../src/protocol';
import { jsonRootCodec } from '../../src/root';
import { makeInputs, writeInputs } from '../support/records';
import {
  connectClient,
  freshTemporalNamespace,
  quickExpirySettings,
  uniqueId,
  workflowBundle,
} from '../support/temporal';

describe('the library worker configured by the environment', () => {
  const taskQueue = uniqueId('library-tq');
  const storePath = join(mkdtempSync(join(tmpdir(), 'library-')), 'store.sqlite');
  const logged: string[] = [];
  let started: WorkerFromEnv;
  let client: Client;
  let closeClient: () => Promise<void>;

  beforeAll(async () => {
    const timing = Object.fromEntries(
      Object.entries(TIMING_ENV).map(([field, name]) => [
        name,
        String(quickExpirySettings.timing[field as keyof Timing]),
      ]),
    );
    // The process's own environment: startCompaction and runGcPass read COMPACTION_TASK_QUEUE from it like the worker
    // does.
    vi.stubEnv('COMPACTION_TASK_QUEUE', taskQueue);
    const env = {
      ...process.env,
      ...timing,
      TEMPORAL_ADDRESS: inject('temporalAddress'),
      COMPACTION_EMBEDDED_STORE: storePath,
      COMPACTION_TARGET_SEGMENT_BYTES: '4096',
      COMPACTION_HEARTBEAT_TIMEOUT_MS: String(quickExpirySettings.heartbeatTimeoutMs),
    };
    // test/support/temporal installed this process's Runtime already.
    started = await startWorkerFromEnv({
      env,
      installRuntime: false,
      log: (line) => logged.push(line),
      workerOptions: { workflowBundle: await workflowBundle(), shutdownGraceTime: '2 seconds' },
    });
    ({ client, close: closeClient } = await connectClient());
  });
  afterAll(async () => {
    vi.unstubAllEnvs();
    await closeClient?.();
    await started?.stop();
  });

  it('polls COMPACTION_TASK_QUEUE, the queue startCompaction starts on, and says once which store it writes to', async () => {
    expect(started.taskQueue).toBe(taskQueue);
    expect(logged).toEqual([
      expect.stringMatching(new RegExp(`task queue ${taskQueue}, store embedded:${storePath}$`)),
    ]);
    const ns = uniqueId('library').toLowerCase();
    await writeInputs(started.store, ns, 'inodes', makeInputs(2, 100));
    const handle = await startCompaction(client, { namespaceId: ns, group: 'inodes' });
    expect((await handle.result()).outcome).toBe('published');
  });

  it("runGcPass returns an incomplete pass's typed report instead of throwing it", async () => {
    const ns = namespaceId(uniqueId('library-corrupt').toLowerCase());
    const key = leaseKey(ns, newJobId());
    // A namespace the collector judges has a root (without one it is skipped before any lease is read).
    await updateRoot(started.store, ns, (root) => root, { codec: jsonRootCodec });
    await started.store.put(key, new TextEncoder().encode('{"not":"a lease"}'));
    const pass = await runGcPass(client, { namespaces: [ns] });
    expect(pass.complete).toBe(false);
    expect(pass.report.corruptNamespaces).toEqual([ns]);
    expect(pass.report.corruptLeases).toEqual([{ key, reason: expect.stringContaining(key) }]);
    expect(pass.report.totals).toMatchObject({ namespaces: 1, corrupt: 1, objectsDeleted: 0 });
  });

  it('registerSearchAttributes adds every attribute to a Temporal namespace that has none, once', async () => {
    const namespace = await freshTemporalNamespace(client, 'library-ns');
    const added = await registerSearchAttributes(client.connection, namespace);
    expect(added.sort()).toEqual(Object.keys(SEARCH_ATTRIBUTES).sort());
    expect(await registerSearchAttributes(client.connection, namespace)).toEqual([]);
  });
});
