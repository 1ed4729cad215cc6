/**
 * The least-privilege policies of docs/security.md on MinIO's IAM engine: each role does its whole job
 * with credentials bound to nothing but its policy from the document, and is refused, request by
 * request, what that policy must not allow; a refusal names the policy and deletes nothing.
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import type { Client } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { runGcPass, startCompaction } from '../../src/client';
import type { S3Endpoint } from '../../src/devservers';
import {
  compactionsPrefix,
  familyGroup,
  inputSegmentKey,
  jobId,
  jobPrefix,
  leaseKey,
  manifestPartKey,
  namespaceId,
  namespacePrefix,
  NAMESPACES_PREFIX,
  newJobId,
  newPassId,
  newSegmentId,
  parseManifestPrefix,
  passId,
  rootKey,
  STORE_CLOCK_KEY,
  STORE_PROBE_PREFIX,
  stagedSegmentKey,
  type MetadataCompactionId,
  type NamespaceId,
} from '../../src/keys';
import { createLeaseState, decodeLease, encodeLease } from '../../src/lease';
import {
  createJobLease,
  LeaseLostError,
  publishCompaction,
  readRoot,
  refreshJobLease,
  updateRoot,
} from '../../src/protocol';
import { claimLease, deleteLease, readPassManifest } from '../../src/collector';
import { jsonRootCodec } from '../../src/root';
import { createS3ObjectStore, StoreConfigError, verifyStore, type ObjectStore } from '../../src/store';
import type { GcReport } from '../../src/workflows/gc';
import { createRoleUser, type Role } from '../support/iam';
import { makeInputs, readRecords, referenceMerge, writeInputs } from '../support/records';
import { openTestStore, s3ClientConfig, type TestStore } from '../support/stores';
import {
  connectClient,
  expectReplays,
  quickExpirySettings,
  startTestWorker,
  testSettings,
  uniqueId,
  type RunningWorker,
} from '../support/temporal';
import { workerEnvironment } from '../support/worker-env';
import { TEST_PASS_ID } from '../support/pass';

const settings = quickExpirySettings;
const { leaseExpiryMs, stagingGraceMs, publicationBudgetMs } = settings.timing;
const cliMain = join(__dirname, '..', '..', 'src', 'cli', 'index.ts');
const bytes = (text: string) => new TextEncoder().encode(text);

/** The store's refusal: the typed configuration error naming the policy and the key, and nothing else. */
async function expectRefused(attempt: Promise<unknown>, key: string): Promise<void> {
  const err: unknown = await attempt.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err, key).toBeInstanceOf(StoreConfigError);
  expect((err as StoreConfigError).setting, key).toBe('IAM policy');
  expect((err as Error).message).toContain(`access denied to ${key} in `);
  expect((err as Error).message).toContain('docs/security.md');
}

describe('the IAM policies of docs/security.md on MinIO', () => {
  let root: TestStore;
  const endpoints = {} as Record<Role, S3Endpoint>;
  const stores = {} as Record<Role, ObjectStore>;
  let compactionWorker: RunningWorker;
  let collectorWorker: RunningWorker;
  let client: Client;
  let closeClient: () => Promise<void>;
  /** The key lists of the collector worker's DeleteObjects calls, in order. */
  const collectorDeletes: string[][] = [];

  beforeAll(async () => {
    root = await openTestStore('minio');
    for (const role of ['worker', 'collector', 'reader'] as const) {
      endpoints[role] = await createRoleUser(root.endpoint!, root.bucket!, role);
      stores[role] = createS3ObjectStore({
        bucket: root.bucket!,
        client: new S3Client(s3ClientConfig(endpoints[role])),
        operationDeadlineMs: 30_000,
      });
    }
    // Each worker verifies its access (HeadBucket) at start-up, under its own policy; the compaction worker probes the
    // store too.
    compactionWorker = await startTestWorker(stores.worker, settings, undefined, undefined, { storeCheck: 'run' });
    const collector = stores.collector;
    const recorded = Object.assign(Object.create(collector) as ObjectStore, {
      deleteMany: (keys: readonly string[]) => (collectorDeletes.push([...keys]), collector.deleteMany(keys)),
      deleteIfMatch: (key: string, etag: string) => (collectorDeletes.push([key]), collector.deleteIfMatch(key, etag)),
    });
    collectorWorker = await startTestWorker(recorded, settings);
    ({ client, close: closeClient } = await connectClient());
  });
  afterAll(async () => {
    await compactionWorker?.stop();
    await collectorWorker?.stop();
    await closeClient?.();
    await Promise.all(Object.values(stores).map((s) => s.close()));
    await root?.store.close();
  });

  const newNamespace = () => namespaceId(uniqueId('iam').toLowerCase());
  /** Written with the root credentials: what the metadata service or a job left behind. */
  const stage = async (ns: NamespaceId, job: MetadataCompactionId, count: number): Promise<string[]> => {
    const keys = Array.from({ length: count }, () => stagedSegmentKey(ns, job, newSegmentId(), 'seg'));
    for (const key of keys) await root.store.put(key, bytes(`staged ${key}`));
    return keys;
  };
  const writeLease = (ns: NamespaceId, job: MetadataCompactionId, heartbeatAtMs: number) =>
    root.store.put(
      leaseKey(ns, job),
      encodeLease(createLeaseState({ jobId: job, namespaceId: ns, ownerId: 'iam-test', nowMs: heartbeatAtMs })),
    );
  const keysUnder = async (prefix: string): Promise<string[]> =>
    (await root.store.list({ prefix })).objects.map((o) => o.key);
  const exists = (key: string): Promise<boolean> =>
    root.store.head(key).then(
      () => true,
      () => false,
    );

  // First in the file: the bucket then holds this namespace only, so the pass that discovers namespaces reports just
  // it.
  it("the collector's policy runs a pass: it finds the namespace, claims the expired lease, reclaims what no one owns, deletes the lease last, and reclaims retired inputs", async () => {
    const ns = newNamespace();
    const inputs = await writeInputs(root.store, ns, 'bindings', makeInputs(2, 20));
    // A retired input retired long before the reader grace, and a lost write of the metadata service.
    const [superseded, lost] = [inputSegmentKey(ns, newSegmentId(), 'seg'), inputSegmentKey(ns, newSegmentId(), 'seg')];
    for (const key of [superseded, lost]) await root.store.put(key, bytes(key));
    // Its retirement was seen (stamped visible) by an earlier pass, long enough ago.
    const longAgo = Date.now() - settings.timing.readerGraceMs - 1000;
    await updateRoot(
      root.store,
      ns,
      (r) => ({ ...r, retired: [{ key: superseded, retired_at_ms: longAgo, visible_at_ms: longAgo }] }),
      { codec: jsonRootCodec },
    );
    const [expired, orphan, live] = [newJobId(), newJobId(), newJobId()];
    const expiredStaged = await stage(ns, expired, 3);
    const doomed = [...expiredStaged, ...(await stage(ns, orphan, 2)), superseded, lost];
    const kept = await stage(ns, live, 2);
    await sleep(stagingGraceMs + 500);
    await writeLease(ns, expired, Date.now() - leaseExpiryMs - 1000);
    await writeLease(ns, live, Date.now() + 60_000);
    const rootBefore = await readRoot(root.store, ns, jsonRootCodec);

    const report: GcReport = await client.workflow.execute('gcWorkflow', {
      taskQueue: collectorWorker.taskQueue,
      workflowId: uniqueId('iam-gc'),
      args: [{}],
    });

    expect(report.totals).toMatchObject({
      namespaces: 1,
      failedNamespaces: 0,
      prefixesSeen: 3,
      live: 1,
      claimed: 1,
      orphaned: 1,
      failedPrefixes: 0,
    });
    // Two leases: the expired job's, and the one the pass created to claim the orphan prefix.
    expect(report.totals).toMatchObject({
      objectsDeleted: doomed.length,
      leasesDeleted: 2,
      retiredDeleted: 1,
      lostWritesDeleted: 1,
      retiredRecordsDropped: 1,
    });
    const leases = [leaseKey(ns, expired), leaseKey(ns, orphan)];
    // A set: a walk that Temporal retried may ask again for keys it already deleted.
    expect([...new Set(collectorDeletes.flat())].sort()).toEqual([...doomed, ...leases].sort());
    const leaseDeleted = collectorDeletes.findIndex((keys) => keys.includes(leaseKey(ns, expired)));
    const stagedDeleted = collectorDeletes.flatMap((keys, i) =>
      keys.some((k) => expiredStaged.includes(k)) ? [i] : [],
    );
    expect(Math.max(...stagedDeleted)).toBeLessThan(leaseDeleted);
    expect(await keysUnder(compactionsPrefix(ns))).toEqual([leaseKey(ns, live), ...kept].sort());
    for (const key of inputs) expect(await exists(key), key).toBe(true);
    // Its manifest, read with the operator's read-only statements, names exactly what it deleted.
    const pass = parseManifestPrefix(report.manifests[0] ?? '');
    expect(pass?.namespaceId).toBe(ns);
    const lines = (await readPassManifest(stores.reader, ns, passId(pass?.passId))).flatMap((p) =>
      p.lines.map((l) => l.key),
    );
    expect([...new Set(lines)].sort()).toEqual([...doomed, ...leases].sort());
    // The collector wrote the root three times and changed nothing else: its fence after the claim (spec 6b), the
    // lost-write
    // cutoff before it deleted the lost write (spec 6c.1), and the CAS that dropped the record.
    const after = (await readRoot(root.store, ns, jsonRootCodec)).root;
    expect(after).toEqual({
      ...rootBefore.root,
      generation: rootBefore.root.generation + 3,
      retired: [],
      lost_write_cutoff_ms: expect.any(Number),
    });
  });

  it.each(['worker', 'collector'] as const)(
    "the %s's policy lets the store probe through: every property held, its versioning read, nothing left under store-probe/",
    async (role) => {
      const check = await verifyStore(stores[role], { clockSafetyMarginMs: settings.timing.clockSafetyMarginMs });
      expect(check.properties.filter((p) => p.outcome === 'failed')).toEqual([]);
      expect(check.versioning).toBe('unversioned');
      // Only the object collector passes overwrite to read the store's clock, never deleted, may be there.
      expect((await keysUnder(STORE_PROBE_PREFIX)).filter((k) => k !== STORE_CLOCK_KEY)).toEqual([]);
    },
  );

  it("the worker's policy runs a compaction: its lease created and refreshed, its output staged, the root replaced by CAS", async () => {
    const ns = newNamespace();
    const inputs = makeInputs(3, 300);
    await writeInputs(root.store, ns, 'bindings', inputs);

    const result = await startCompaction(client, {
      namespaceId: ns,
      group: 'bindings',
      taskQueue: compactionWorker.taskQueue,
    }).then((h) => h.result());

    expect(result.outcome).toBe('published');
    expect((await readRoot(root.store, namespaceId(ns), jsonRootCodec)).root.groups.bindings).toEqual(result.outputs);
    expect(await readRecords(root.store, result.outputs)).toEqual(referenceMerge(inputs));
    const job = { namespaceId: namespaceId(ns), jobId: jobId(result.jobId) };
    const lease = decodeLease((await root.store.get(leaseKey(job.namespaceId, job.jobId))).body, job);
    // The publication refreshes the lease first: a later heartbeat than the create's.
    expect(lease).toMatchObject({ status: 'active' });
    expect(lease.heartbeat_at_ms).toBeGreaterThan(lease.started_at_ms);
  });

  it("under the worker's policy a job whose lease the collector claimed is fenced, at a refresh and at publication, and so is one whose lease is gone", async () => {
    const ns = newNamespace();
    const group = familyGroup('bindings');
    const inputs = await writeInputs(root.store, ns, group, makeInputs(1, 10));
    const job = { namespaceId: ns, jobId: newJobId() };
    const held = await createJobLease(stores.worker, {
      ...job,
      ownerId: 'iam-worker',
      startedAtMs: Date.now() - leaseExpiryMs - 1000,
    });
    const outputs = [stagedSegmentKey(ns, job.jobId, newSegmentId(), 'seg')];
    await stores.worker.put(outputs[0] as string, bytes('staged output'));

    expect(
      await claimLease(stores.collector, job, { nowMs: Date.now(), leaseExpiryMs, passId: TEST_PASS_ID }),
    ).toMatchObject({ owner: 'collector' });

    await expect(refreshJobLease(stores.worker, job, held, Date.now)).rejects.toThrow(LeaseLostError);
    const startedAt = performance.now();
    const publication = await publishCompaction(
      stores.worker,
      { ...job, group, inputs, outputs },
      {
        budgetMs: publicationBudgetMs,
        maxRootRaces: 3,
        raceBackoff: { firstMs: 10, maxMs: 100 },
        clock: { leaseClockMs: Date.now, elapsedMs: () => performance.now() - startedAt },
        codec: jsonRootCodec,
      },
    );
    expect(publication).toEqual({ outcome: 'fenced', reason: 'a collector claimed the lease' });
    await deleteLease(stores.collector, job, TEST_PASS_ID);
    // The CAS of a missing lease is a 404, and so is the re-read that decides it: the job is fenced, not failed.
    await expect(refreshJobLease(stores.worker, job, held, Date.now)).rejects.toThrow(/the lease is gone/);
    expect((await readRoot(root.store, ns, jsonRootCodec)).root.groups[group]).toEqual(inputs);
  });

  it("a collector pass sent to the compaction workers' queue fails at its first listing, refused by the worker's policy", async () => {
    const failure: unknown = await client.workflow
      .execute('gcWorkflow', {
        taskQueue: compactionWorker.taskQueue,
        workflowId: uniqueId('iam-gc-wrong-queue'),
        args: [{}],
      })
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    const messages: string[] = [];
    for (let cause = failure; cause instanceof Error; cause = cause.cause) messages.push(cause.message);
    expect(messages.join('\n')).toMatch(/access denied to namespaces\/ in .*docs\/security\.md/);
  });

  it("the CLI's read commands run under the collector's listing and reading statements alone", async () => {
    const ns = newNamespace();
    const job = newJobId();
    await writeLease(ns, job, Date.now() + 60_000);
    await stage(ns, job, 2);
    // Timings of a minute: the CLI's requests get a 30 s deadline, which a loaded machine cannot overrun
    // (quickExpirySettings gives 200 ms).
    const target = {
      temporalAddress: inject('temporalAddress'),
      s3: endpoints.reader,
      bucket: root.bucket!,
      taskQueue: 'unused',
    };
    const env = workerEnvironment(target, testSettings(60_000));
    const cli = async (...args: string[]): Promise<unknown> =>
      JSON.parse(
        (
          await promisify(execFile)(process.execPath, ['--import', 'tsx', cliMain, ...args], {
            env: { ...env, NODE_NO_WARNINGS: '1' },
          })
        ).stdout,
      );

    const listed = (await cli('lease', 'list', '--json')) as { namespaceId: string; jobId: string; status: string }[];
    expect(listed.filter((row) => row.namespaceId === ns)).toMatchObject([
      { jobId: job, status: 'active', ownerId: 'iam-test' },
    ]);
    expect(await cli('lease', 'show', ns, job, '--json')).toMatchObject({
      status: 'active',
      live: true,
      objects: { count: 3 },
    });
  });

  describe('one worker per role: its own credentials, its own task queue, only its own activities', () => {
    const identity = { compaction: uniqueId('compaction-role'), collector: uniqueId('collector-role') };
    // A bucket of its own, so the pass that lists every namespace meets only this test's.
    let own: TestStore;
    const ownStores: ObjectStore[] = [];
    let compactionOnly: RunningWorker;
    let collectorOnly: RunningWorker;

    beforeAll(async () => {
      own = await openTestStore('minio');
      const roleStore = async (role: Role) => {
        const endpoint = await createRoleUser(own.endpoint!, own.bucket!, role);
        const store = createS3ObjectStore({
          bucket: own.bucket!,
          client: new S3Client(s3ClientConfig(endpoint)),
          operationDeadlineMs: 30_000,
        });
        ownStores.push(store);
        return store;
      };
      compactionOnly = await startTestWorker(
        await roleStore('worker'),
        settings,
        uniqueId('tq-compaction'),
        undefined,
        {
          role: 'compaction',
          storeCheck: 'run',
          workerOptions: { identity: identity.compaction },
        },
      );
      collectorOnly = await startTestWorker(
        await roleStore('collector'),
        settings,
        uniqueId('tq-collector'),
        undefined,
        {
          role: 'collector',
          storeCheck: 'run',
          workerOptions: { identity: identity.collector },
        },
      );
    });
    afterAll(async () => {
      await compactionOnly?.stop();
      await collectorOnly?.stop();
      await Promise.all(ownStores.map((s) => s.close()));
      await own?.store.close();
    });

    /**
     * Where a workflow ran: its task queue, the queues, types and workers of its activities, and the workers of its
     * workflow tasks.
     */
    const whereItRan = async (workflowId: string) => {
      const events = (await client.workflow.getHandle(workflowId).fetchHistory()).events ?? [];
      const distinct = (pick: (e: (typeof events)[number]) => string | null | undefined) =>
        [...new Set(events.flatMap((e) => pick(e) ?? []))].sort();
      return {
        taskQueue: events[0]?.workflowExecutionStartedEventAttributes?.taskQueue?.name,
        activityQueues: distinct((e) => e.activityTaskScheduledEventAttributes?.taskQueue?.name),
        activityTypes: distinct((e) => e.activityTaskScheduledEventAttributes?.activityType?.name),
        activityWorkers: distinct((e) => e.activityTaskStartedEventAttributes?.identity),
        workflowWorkers: distinct((e) => e.workflowTaskStartedEventAttributes?.identity),
      };
    };

    it('a compaction and a collector pass started on the compaction queue both complete; the pass sends every activity and namespace workflow to the collector, and neither worker runs the other role’s activities', async () => {
      const [compacted, collected] = [newNamespace(), newNamespace()];
      await writeInputs(own.store, compacted, 'bindings', makeInputs(2, 100));
      await writeInputs(own.store, collected, 'bindings', makeInputs(1, 10));
      const orphan = newJobId();
      const doomed = Array.from({ length: 2 }, () => stagedSegmentKey(collected, orphan, newSegmentId(), 'seg'));
      for (const key of doomed) await own.store.put(key, bytes(`staged ${key}`));
      const stagedAt = Date.now();

      const compaction = await startCompaction(client, {
        namespaceId: compacted,
        group: 'bindings',
        taskQueue: compactionOnly.taskQueue,
      });
      const { outcome, outputs, tombstones, inputList } = await compaction.result();
      expect(outcome).toBe('published');
      await sleep(Math.max(0, stagedAt + stagingGraceMs + 500 - Date.now()));
      const pass = await runGcPass(client, {
        workflowId: uniqueId('iam-gc-roles'),
        taskQueue: compactionOnly.taskQueue,
        collectorTaskQueue: collectorOnly.taskQueue,
      });
      // The job's tombstone segments were not published (the group held only its inputs) and its input
      // list never is: once its lease has expired, the pass claims its prefix and deletes them as
      // unreferenced staged objects.
      const gone = async (keys: readonly string[]) =>
        (
          await Promise.all(
            keys.map((k) =>
              own.store.head(k).then(
                () => 0,
                () => 1,
              ),
            ),
          )
        ).reduce((a: number, b) => a + b, 0);
      const tombstonesDeleted = await gone([...tombstones, inputList]);

      expect(pass.complete).toBe(true);
      // The compaction's lease is live or expired by now: either way its referenced outputs stay. Its two
      // retired inputs are deleted by the collector's credentials or still in their reader grace.
      const { totals } = pass.report;
      expect(totals).toMatchObject({
        namespaces: 2,
        failedNamespaces: 0,
        prefixesSeen: 2,
        orphaned: 1,
        lostWritesDeleted: 0,
        failedPrefixes: 0,
      });
      expect([totals.objectsDeleted, totals.retiredDeleted + totals.retainedInGrace]).toEqual([
        doomed.length + totals.retiredDeleted + tombstonesDeleted,
        2,
      ]);
      for (const key of doomed)
        expect(
          await own.store.head(key).then(
            () => true,
            () => false,
          ),
          key,
        ).toBe(false);
      for (const key of outputs)
        expect(
          await own.store.head(key).then(
            () => true,
            () => false,
          ),
          key,
        ).toBe(true);

      expect(await whereItRan(compaction.workflowId)).toEqual({
        taskQueue: compactionOnly.taskQueue,
        activityQueues: [compactionOnly.taskQueue],
        activityTypes: ['compactUnderLease', 'createLease', 'publish', 'readGroup'],
        activityWorkers: [identity.compaction],
        workflowWorkers: [identity.compaction],
      });
      // The pass's workflow tasks run where it started; its listing and its children go to the collector.
      expect(await whereItRan(pass.workflowId)).toEqual({
        taskQueue: compactionOnly.taskQueue,
        activityQueues: [collectorOnly.taskQueue],
        activityTypes: ['listNamespaces', 'storeClock'],
        activityWorkers: [identity.collector],
        workflowWorkers: [identity.compaction],
      });
      for (const ns of [compacted, collected]) {
        const child = await whereItRan(`${pass.workflowId}/${ns}`);
        expect(child, ns).toMatchObject({
          taskQueue: collectorOnly.taskQueue,
          activityQueues: [collectorOnly.taskQueue],
          activityWorkers: [identity.collector],
          workflowWorkers: [identity.collector],
        });
        expect(child.activityTypes, ns).toContain('runPage');
        // Deterministic with the queue in its commands: the recorded run replays.
        await expectReplays(client, `${pass.workflowId}/${ns}`);
      }
      await expectReplays(client, pass.workflowId);
    });

    it("a pass started on the collector's own queue runs there wholly: the collector worker alone serves it", async () => {
      const pass = await runGcPass(client, {
        workflowId: uniqueId('iam-gc-collector-queue'),
        taskQueue: collectorOnly.taskQueue,
        collectorTaskQueue: collectorOnly.taskQueue,
      });

      expect(pass.complete).toBe(true);
      expect(pass.report.totals).toMatchObject({ namespaces: 2, failedNamespaces: 0, failedPrefixes: 0 });
      expect(await whereItRan(pass.workflowId)).toMatchObject({
        activityQueues: [collectorOnly.taskQueue],
        activityWorkers: [identity.collector],
        workflowWorkers: [identity.collector],
      });
    });
  });

  describe('refusals', () => {
    const ns = newNamespace();
    const job = newJobId();
    const outside = 'outside-namespaces/object';
    let keys: { root: string; input: string; lease: string; staged: string };
    /** A part of a pass's manifest: the operator's to read, not to write or delete. */
    const manifestKey = manifestPartKey(ns, newPassId(Date.now()), { byRule: { lease: 1 }, bytes: 15, dryRun: false });

    beforeAll(async () => {
      const [input] = await writeInputs(root.store, ns, 'bindings', makeInputs(1, 10));
      await writeLease(ns, job, Date.now());
      const [staged] = await stage(ns, job, 1);
      keys = { root: rootKey(ns), input: input as string, lease: leaseKey(ns, job), staged: staged as string };
      await root.store.put(outside, bytes('not the package’s'));
      await root.store.put(manifestKey, bytes('a manifest part'));
    });

    /** Every object the refusals aimed at is still there, unchanged. */
    const expectAllKept = async (before: Map<string, string>) => {
      for (const [key, etag] of before) expect((await root.store.head(key)).etag, key).toBe(etag);
    };
    const snapshot = async () =>
      new Map(
        await Promise.all(
          [...Object.values(keys), outside].map(async (k) => [k, (await root.store.head(k)).etag ?? ''] as const),
        ),
      );

    it('the worker cannot list, delete anything, or touch a key outside namespaces/', async () => {
      const worker = stores.worker;
      const before = await snapshot();
      for (const prefix of [
        '',
        NAMESPACES_PREFIX,
        namespacePrefix(ns),
        compactionsPrefix(ns),
        jobPrefix(ns, job),
        'outside-namespaces/',
      ]) {
        await expectRefused(worker.list({ prefix }), prefix);
        await expectRefused(worker.list({ prefix, delimiter: '/' }), prefix);
      }
      for (const key of [...Object.values(keys), outside]) await expectRefused(worker.deleteMany([key]), key);
      await expectRefused(worker.get(outside), outside);
      await expectRefused(worker.put(outside, bytes('x')), outside);
      await expectRefused(worker.put('outside-namespaces/new', bytes('x')), 'outside-namespaces/new');
      await expectAllKept(before);
      expect(await exists('outside-namespaces/new')).toBe(false);
    });

    it('the collector cannot write an input segment or staged output, nor delete a root, nor touch a key outside namespaces/', async () => {
      const collector = stores.collector;
      const before = await snapshot();
      const newInput = inputSegmentKey(ns, newSegmentId(), 'seg');
      await expectRefused(collector.put(newInput, bytes('x')), newInput);
      await expectRefused(collector.put(keys.input, bytes('x')), keys.input);
      const newStaged = stagedSegmentKey(ns, job, newSegmentId(), 'seg');
      await expectRefused(collector.put(newStaged, bytes('x')), newStaged);
      await expectRefused(collector.put(keys.staged, bytes('x')), keys.staged);
      await expectRefused(collector.deleteMany([keys.root]), keys.root);
      await expectRefused(collector.get(outside), outside);
      await expectRefused(collector.put(outside, bytes('x')), outside);
      await expectRefused(collector.list({ prefix: 'outside-namespaces/' }), 'outside-namespaces/');
      await expectRefused(collector.list({ prefix: '' }), '');
      await expectRefused(collector.deleteMany([outside]), outside);
      await expectAllKept(before);
      for (const key of [newInput, newStaged]) expect(await exists(key), key).toBe(false);
    });

    it('the read-only statements write and delete nothing, and reach nothing outside namespaces/', async () => {
      const reader = stores.reader;
      const before = await snapshot();
      await expectRefused(reader.putIfMatch(keys.lease, bytes('{}'), before.get(keys.lease) ?? ''), keys.lease);
      await expectRefused(reader.put(keys.staged, bytes('x')), keys.staged);
      await expectRefused(reader.put(manifestKey, bytes('x')), manifestKey);
      await expectRefused(reader.deleteMany([manifestKey]), manifestKey);
      expect(new TextDecoder().decode((await reader.get(manifestKey)).body)).toBe('a manifest part');
      for (const key of [...Object.values(keys), outside]) await expectRefused(reader.deleteMany([key]), key);
      await expectRefused(reader.get(outside), outside);
      await expectRefused(reader.list({ prefix: 'outside-namespaces/' }), 'outside-namespaces/');
      await expectAllKept(before);
    });

    it('a listing with no prefix parameter at all is authorised as HeadBucket is (the adapter never sends one)', async () => {
      // docs/security.md: the grant that lets HeadBucket through cannot tell this request from it, on S3 as on MinIO.
      for (const role of ['worker', 'collector'] as const) {
        const s3 = new S3Client(s3ClientConfig(endpoints[role]));
        const listed = await s3.send(new ListObjectsV2Command({ Bucket: root.bucket! }));
        expect(listed.KeyCount, role).toBeGreaterThan(0);
        s3.destroy();
      }
    });
  });
});
