/**
 * The worker's Prometheus endpoint: the SDK's metrics and the package's own, after a compaction and a collector pass.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { ChildProcess } from 'node:child_process';
import { startCompaction } from '../../src/client';
import { freePort } from '../../src/devservers';
import { leaseKey, namespaceId, newJobId, newSegmentId, stagedSegmentKey } from '../../src/keys';
import { updateRoot } from '../../src/protocol';
import { jsonRootCodec } from '../../src/root';
import { SEGMENT_EXTENSION } from '../../src/segments';
import { makeInputs, writeInputs } from '../support/records';
import { s3Requests, startS3FaultProxy, type S3FaultProxy } from '../support/s3-fault-proxy';
import { openTestStore, type TestStore } from '../support/stores';
import { connectClient, uniqueId } from '../support/temporal';
import { SPAWNED_WORKER_TIMEOUT_MS } from '../support/worker-env';
import { spawnWorker } from '../support/worker-process';

describe('metrics', () => {
  let fixture: TestStore;
  let worker: ChildProcess | undefined;
  let proxy: S3FaultProxy | undefined;
  beforeAll(async () => {
    fixture = await openTestStore('minio');
  });
  afterAll(async () => {
    if (worker && worker.exitCode === null) {
      worker.kill('SIGKILL');
      await new Promise((r) => worker!.once('exit', r));
    }
    await proxy?.stop();
    await fixture?.store.close();
  });

  it('the Prometheus endpoint serves lease refreshes, refresh latency, claims and reclaimed objects', async () => {
    const port = await freePort();
    const taskQueue = uniqueId('metrics');
    // The worker reaches MinIO through a proxy, which holds the work's first output until the lease has been refreshed.
    proxy = await startS3FaultProxy(fixture.endpoint!.endpoint);
    worker = spawnWorker(fixture, taskQueue, {
      COMPACTION_METRICS_PROMETHEUS: `127.0.0.1:${port}`,
      COMPACTION_TARGET_SEGMENT_BYTES: '65536',
      AWS_ENDPOINT_URL_S3: proxy.endpoint,
    });
    const { client, close } = await connectClient();
    const ns = uniqueId('metrics').toLowerCase();
    // A lease-less staged segment, for the pass to reclaim once it is older than the staging grace (7.5 s here).
    const orphan = stagedSegmentKey(namespaceId(ns), newJobId(), newSegmentId(), 'mseg');
    await fixture.store.put(orphan, new Uint8Array(10));
    const orphanWritten = Date.now();
    // The keeper refreshes the lease only while the work runs, and a fast compactor can finish within one 1 s
    // refresh interval: the work's first output is held until the lease has been refreshed twice.
    await writeInputs(fixture.store, ns, 'tombstones', makeInputs(6, 24_000, 160_000));
    let refreshes = 0;
    proxy.observe(({ request, status }) => {
      if (s3Requests.compareAndSwap(request) && request.key.endsWith('/lease.json') && status === 200) refreshes++;
    });
    const firstOutput = proxy.hold(
      (r) => s3Requests.put(r) && r.key.includes('/compactions/') && r.key.endsWith(`.${SEGMENT_EXTENSION}`),
    );
    const handle = await startCompaction(client, {
      namespaceId: ns,
      group: 'tombstones',
      taskQueue,
      workerTimeoutMs: SPAWNED_WORKER_TIMEOUT_MS,
    });
    await firstOutput.arrived;
    await vi.waitUntil(() => refreshes >= 2, { timeout: 15_000, interval: 100 });
    firstOutput.release();
    const result = await handle.result();
    expect(result.outcome).toBe('published');
    await new Promise((r) => setTimeout(r, Math.max(0, orphanWritten + 9000 - Date.now())));
    const pass = await client.workflow.execute('gcWorkflow', {
      taskQueue,
      workflowId: uniqueId('metrics-gc'),
      args: [{ namespaces: [ns] }],
    });
    expect(pass).toMatchObject({ totals: { orphaned: 1, objectsDeleted: 1 } });
    await close();

    const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    for (const name of [
      'compaction_lease_refreshes',
      'compaction_lease_refresh_latency',
      'compaction_lease_claims',
      'compaction_lease_objects_reclaimed',
      'compaction_lease_objects_retained',
      'temporal_activity_execution_latency',
    ]) {
      expect(text, `${name} missing from /metrics`).toContain(name);
    }
  });

  it('a pass a corrupt lease left incomplete is counted by compaction_lease_gc_incomplete_passes', async () => {
    const port = await freePort();
    const taskQueue = uniqueId('metrics-incomplete');
    const incompleteWorker = spawnWorker(fixture, taskQueue, { COMPACTION_METRICS_PROMETHEUS: `127.0.0.1:${port}` });
    try {
      const { client, close } = await connectClient();
      const ns = namespaceId(uniqueId('metrics-corrupt').toLowerCase());
      await updateRoot(fixture.store, ns, (root) => root, { codec: jsonRootCodec });
      await fixture.store.put(leaseKey(ns, newJobId()), new TextEncoder().encode('not a lease'));
      const pass = await client.workflow.execute('gcWorkflow', {
        taskQueue,
        workflowId: uniqueId('metrics-gc'),
        args: [{ namespaces: [ns] }],
      });
      expect(pass).toMatchObject({ complete: false, totals: { corrupt: 1 } });
      await close();
      const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      expect(text).toMatch(/^compaction_lease_gc_incomplete_passes\{[^}]*\} 1$/m);
    } finally {
      incompleteWorker.kill('SIGKILL');
      if (incompleteWorker.exitCode === null) await new Promise((r) => incompleteWorker.once('exit', r));
    }
  });
});
