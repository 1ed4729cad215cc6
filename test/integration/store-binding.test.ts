/**
 * Workers of one task queue bound to different stores. A run records the store it was started
 * against (the client's environment, or `store`); a worker bound to another fails its activities with
 * StoreMismatch naming both, where it used to read a root that is not there ("root … does not exist",
 * naming neither store) or collect the wrong bucket.
 */
import { S3Client } from '@aws-sdk/client-s3';
import type { Client } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compactionResult, runGcPass, startCompaction } from '../../src/client';
import { namespaceId } from '../../src/keys';
import { updateRoot } from '../../src/protocol';
import { jsonRootCodec } from '../../src/root';
import { createS3ObjectStore, storeIdentity, storeIdentityFromEnv } from '../../src/store';
import { runCliProcess } from '../support/cli-process';
import { makeInputs, writeInputs } from '../support/records';
import { openTestStore, s3ClientConfig, type TestStore } from '../support/stores';
import {
  connectClient,
  failureOf,
  quickExpirySettings,
  startTestWorker,
  uniqueId,
  type RunningWorker,
} from '../support/temporal';
import { environmentFor } from '../support/worker-process';

describe('a run bound to the store it was started against', () => {
  let a: TestStore;
  let b: TestStore;
  let onlyB: RunningWorker;
  const shared: RunningWorker[] = [];
  let client: Client;
  let close: () => Promise<void>;
  let identityA: string;
  let identityB: string;

  beforeAll(async () => {
    [a, b] = await Promise.all([openTestStore('minio'), openTestStore('minio')]);
    [identityA, identityB] = await Promise.all([storeIdentity(a.store), storeIdentity(b.store)]);
    onlyB = await startTestWorker(b.store, quickExpirySettings, uniqueId('store-b-tq'));
    const both = uniqueId('two-stores-tq');
    shared.push(
      await startTestWorker(a.store, quickExpirySettings, both),
      await startTestWorker(b.store, quickExpirySettings, both),
    );
    ({ client, close } = await connectClient());
  });
  afterAll(async () => {
    await close?.();
    for (const worker of [onlyB, ...shared]) await worker?.stop();
    await Promise.all([a?.store.close(), b?.store.close()]);
  });

  it("a store is named by its bucket and endpoint, the same from the environment as from the worker's client", () => {
    expect(identityA).toBe(`s3://${a.bucket} at ${a.endpoint!.endpoint.replace(/\/$/, '')}`);
    expect(storeIdentityFromEnv(environmentFor(a, 'any', quickExpirySettings))).toBe(identityA);
    expect(identityA).not.toBe(identityB);
  });

  it(
    '`compact start --wait` from an environment naming store A, on a queue whose worker is bound to B, fails StoreMismatch naming both, and writes nothing to B',
    { timeout: 60_000 },
    async () => {
      const ns = namespaceId(uniqueId('bound').toLowerCase());
      await writeInputs(a.store, ns, 'inodes', makeInputs(2, 20));
      const run = await runCliProcess(
        ['compact', 'start', '--namespace', ns, '--group', 'inodes', '--wait'],
        environmentFor(a, onlyB.taskQueue, quickExpirySettings),
      );
      expect(run.code).toBe(1);
      expect(run.stderr.trim().split('\n')).toEqual([
        expect.stringContaining(
          `StoreMismatch: the run works on ${identityA}, but this worker is bound to ${identityB}`,
        ),
      ]);
      expect(run.stderr).not.toMatch(/does not exist/);
      expect((await b.store.list({ prefix: `namespaces/${ns}/` })).objects).toEqual([]);
    },
  );

  it(
    'with workers of both stores on one queue, every compaction started against A is published or fails StoreMismatch naming both: none reads a root that is not there',
    { timeout: 120_000 },
    async () => {
      const ns = namespaceId(uniqueId('two-stores').toLowerCase());
      const groups = ['g1', 'g2', 'g3', 'g4'];
      for (const group of groups) await writeInputs(a.store, ns, group, makeInputs(2, 20));
      const handles = await Promise.all(
        groups.map((group) =>
          startCompaction(client, { namespaceId: ns, group, taskQueue: shared[0]!.taskQueue, store: identityA }),
        ),
      );
      const ends = await Promise.all(
        handles.map((h) =>
          compactionResult(h, { onWait: () => {} }).then(
            (r) => r.outcome,
            async (e: unknown) => {
              const failure = await failureOf(Promise.reject(e));
              return `${failure.type}: ${failure.message}`;
            },
          ),
        ),
      );
      for (const end of ends) {
        expect([end]).toEqual([
          expect.stringMatching(
            new RegExp(
              `^(published|StoreMismatch: the run works on ${identityA.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}, but this worker is bound to ${identityB.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}.*)$`,
            ),
          ),
        ]);
      }
    },
  );

  it(
    'a worker reaching bucket A at another endpoint of the same server (localhost, not 127.0.0.1) serves runs started against A: one bucket is one store',
    { timeout: 60_000 },
    async () => {
      const endpoint = a.endpoint!.endpoint.replace('127.0.0.1', 'localhost');
      const viaLocalhost = createS3ObjectStore({
        bucket: a.bucket!,
        client: new S3Client(s3ClientConfig({ ...a.endpoint!, endpoint })),
      });
      const worker = await startTestWorker(viaLocalhost, quickExpirySettings, uniqueId('localhost-tq'));
      try {
        // The setup: the two identities differ, by their endpoints alone (compared whole, they failed this run
        // StoreMismatch).
        expect(await storeIdentity(viaLocalhost)).toBe(identityA.replace('127.0.0.1', 'localhost'));
        expect(await storeIdentity(viaLocalhost)).not.toBe(identityA);
        const ns = namespaceId(uniqueId('same-bucket').toLowerCase());
        await writeInputs(a.store, ns, 'inodes', makeInputs(2, 20));
        const handle = await startCompaction(client, {
          namespaceId: ns,
          group: 'inodes',
          taskQueue: worker.taskQueue,
          store: identityA,
        });
        expect((await compactionResult(handle, { onWait: () => {} })).outcome).toBe('published');
      } finally {
        await worker.stop();
        await viaLocalhost.close();
      }
    },
  );

  it(
    "a collector pass started against A on the queue of B's worker reports StoreMismatch naming both, and deletes nothing in B",
    { timeout: 60_000 },
    async () => {
      const ns = namespaceId(uniqueId('bound-gc').toLowerCase());
      await updateRoot(b.store, ns, (root) => root, { codec: jsonRootCodec });
      const pass = await runGcPass(client, {
        taskQueue: onlyB.taskQueue,
        namespaces: [ns],
        store: identityA,
        onWait: () => {},
      });
      expect(pass.complete).toBe(false);
      expect(pass.report.failures.map((f) => f.message)).toEqual([
        expect.stringContaining(`the run works on ${identityA}, but this worker is bound to ${identityB}`),
      ]);
      expect((await b.store.list({ prefix: `namespaces/${ns}/` })).objects.map((o) => o.key)).toEqual([
        `namespaces/${ns}/metadata/root.json`,
      ]);
    },
  );
});
