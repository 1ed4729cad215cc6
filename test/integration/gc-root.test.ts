/**
 * Retention wins over a root the collector cannot trust (issue 15, item 5; spec 6a.5): a namespace
 * whose root is missing, corrupt or unreadable claims and deletes nothing in that pass, and the
 * pass reports it per namespace. The real gcWorkflow on the Temporal dev server, the worker's store
 * on MinIO through the S3 fault proxy (which fails every GET of one root with a 500).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Client } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  leaseKey,
  manifestsPrefix,
  namespaceId,
  newJobId,
  newSegmentId,
  rootKey,
  stagedSegmentKey,
  type MetadataCompactionId,
  type NamespaceId,
} from '../../src/keys';
import { createLeaseState, encodeLease } from '../../src/lease';
import { updateRoot } from '../../src/protocol';
import { jsonRootCodec } from '../../src/root';
import type { ObjectStore } from '../../src/store';
import type { GcPassReport } from '../../src/workflows/gc';
import { s3Requests, type S3Exchange, type S3FaultProxy } from '../support/s3-fault-proxy';
import {
  connectClient,
  expectReplays,
  quickExpirySettings,
  startWorkerBehindProxy,
  uniqueId,
  type RunningWorker,
  type WorkerBehindProxy,
} from '../support/temporal';

const settings = quickExpirySettings;
const bytes = (s: string) => new TextEncoder().encode(s);

describe('a namespace whose root cannot be trusted', () => {
  let behind: WorkerBehindProxy;
  let store: ObjectStore;
  let proxy: S3FaultProxy;
  let worker: RunningWorker;
  let client: Client;
  let closeClient: () => Promise<void>;
  /** Every request the server answered, as the proxy saw it: the ground truth of what the pass did. */
  let exchanges: S3Exchange[];

  const newNamespace = () => namespaceId(uniqueId('root').toLowerCase());
  const keysUnder = async (ns: NamespaceId) =>
    (await store.list({ prefix: `namespaces/${ns}/` })).objects.map((o) => o.key).sort();
  /** An expired job and an orphan prefix, each with old staged output: a healthy namespace loses all of it. */
  const populate = async (ns: NamespaceId) => {
    const expired: MetadataCompactionId = newJobId();
    await store.put(
      leaseKey(ns, expired),
      encodeLease(createLeaseState({ jobId: expired, namespaceId: ns, ownerId: 'dead', nowMs: 1 })),
    );
    for (const job of [expired, newJobId()]) {
      for (let i = 0; i < 2; i++) await store.put(stagedSegmentKey(ns, job, newSegmentId(), 'mseg'), bytes('staged'));
    }
  };

  const missing = newNamespace();
  const corrupt = newNamespace();
  const unreadable = newNamespace();
  const healthy = newNamespace();
  /** Writes the server applied to a namespace: PUTs of its keys, and DeleteObjects whose body names one of them. */
  const writesTo = (ns: NamespaceId) =>
    exchanges.filter(
      ({ request, requestBody }) =>
        (request.method !== 'GET' && request.key.startsWith(`namespaces/${ns}/`)) ||
        (s3Requests.deleteObjects(request) &&
          (requestBody === undefined || requestBody.toString('utf8').includes(`namespaces/${ns}/`))),
    );
  let before: Map<NamespaceId, string[]>;
  let report: GcPassReport;
  let workflowId: string;

  beforeAll(async () => {
    behind = await startWorkerBehindProxy(settings);
    ({ proxy, worker, exchanges } = behind);
    store = behind.direct.store;
    ({ client, close: closeClient } = await connectClient());

    for (const ns of [missing, corrupt, unreadable, healthy]) await populate(ns);
    for (const ns of [corrupt, unreadable, healthy])
      await updateRoot(store, ns, (root) => root, { codec: jsonRootCodec });
    // A root that names a group twice decodes as corrupt.
    const rootText = new TextDecoder().decode((await store.get(rootKey(corrupt))).body);
    await store.put(rootKey(corrupt), bytes(rootText.replace('"groups":{}', '"groups":{"bindings":[],"bindings":[]}')));
    proxy.script('error500', (r) => s3Requests.getObject(r) && r.key === rootKey(unreadable), 1000);
    before = new Map(
      await Promise.all([missing, corrupt, unreadable].map(async (ns) => [ns, await keysUnder(ns)] as const)),
    );
    await sleep(settings.timing.stagingGraceMs + 500);

    exchanges.length = 0;
    workflowId = uniqueId('gc-root');
    report = await client.workflow.execute('gcWorkflow', {
      taskQueue: worker.taskQueue,
      workflowId,
      args: [{ namespaces: [missing, corrupt, unreadable, healthy] }],
    });
  }, 300_000);
  afterAll(async () => {
    await closeClient?.();
    await behind?.stop();
  });

  it.each([
    ['missing', () => missing, /does not exist/],
    ['corrupt', () => corrupt, /member "bindings" appears twice/],
    ['unreadable', () => unreadable, /store unavailable/],
  ] as const)(
    'a %s root: the namespace is reported, nothing in it is claimed or deleted',
    async (problem, ns, reason) => {
      expect(report.rootProblems).toContainEqual({
        namespaceId: ns(),
        key: rootKey(ns()),
        problem,
        reason: expect.stringMatching(reason),
      });
      expect(
        writesTo(ns()).map((e) => `${e.request.method} ${e.request.key}`),
        'claims or deletes in the namespace',
      ).toEqual([]);
      expect(await keysUnder(ns())).toEqual(before.get(ns()));
    },
  );

  it('the pass ends incomplete, not failed, so a schedule keeps running; its search attribute says so', async () => {
    expect(report.complete).toBe(false);
    const { searchAttributes } = await client.workflow.getHandle(workflowId).describe();
    expect(searchAttributes.GcIncomplete).toEqual([true]);
  });

  it('the pass counts the skipped namespaces and still collects the healthy one', async () => {
    // Two leases: the expired job's, and the one the pass created to claim the orphan prefix.
    expect(report.totals).toMatchObject({
      namespaces: 4,
      skippedNamespaces: 3,
      claimed: 1,
      orphaned: 1,
      objectsDeleted: 4,
      leasesDeleted: 2,
    });
    // What stays is the root, and the pass's deletion manifest of what it deleted (issue 32).
    const left = await keysUnder(healthy);
    expect(left.filter((key) => !key.startsWith(manifestsPrefix(healthy)))).toEqual([rootKey(healthy)]);
    expect(left.some((key) => key.startsWith(manifestsPrefix(healthy)))).toBe(true);
    expect(writesTo(healthy).filter((e) => s3Requests.deleteObjects(e.request)).length).toBeGreaterThan(0);
  });

  it('the pass replays', async () => {
    await expectReplays(client, `${workflowId}/${missing}`);
  });
});
