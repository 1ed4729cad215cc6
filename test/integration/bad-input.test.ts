/**
 * The bad-input catalogue (issue 5, item 4; compaction inputs: issue 14): each bad input gives a
 * typed error naming the key or setting, deletes nothing, and publishes nothing. Only cases no other test takes end to
 * end are here; the decoder's
 * own catalogue is test/unit/lease.test.ts, the id grammar test/unit/keys.test.ts, an undecodable or
 * mis-identified lease and keys outside the grammar in a real pass test/integration/gc.test.ts, and
 * the settings' error messages test/integration/store-config-errors.test.ts (docs/reliability.md
 * lists every case and where it is tested).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { S3Client } from '@aws-sdk/client-s3';
import { WorkflowFailedError, type Client, type WorkflowHandleWithFirstExecutionRunId } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { NativeConnection, Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { startCompaction } from '../../src/client';
import type { CompactionSettings } from '../../src/config';
import { freePort } from '../../src/devservers';
import { encodeEnvelope } from '../../src/envelope';
import {
  compactionsPrefix,
  familyGroup,
  inputSegmentKey,
  INPUT_LIST_EXTENSION,
  InvalidKeyError,
  jobId,
  jobPrefix,
  leaseKey,
  namespaceId,
  newJobId,
  newSegmentId,
  parseCompactionKey,
  rootKey,
  stagedSegmentKey,
  STORE_PROBE_PREFIX,
  type MetadataCompactionId,
  type NamespaceId,
} from '../../src/keys';
import { tombstoneSegmentKey } from '../../src/compactor';
import { createLeaseState, encodeLease, MAX_LEASE_BYTES } from '../../src/lease';
import { readRoot } from '../../src/protocol';
import { encodeRoot, jsonRootCodec, type RootState } from '../../src/root';
import { createS3ObjectStore, ObjectTooLargeError, StoreConfigError, type ObjectStore } from '../../src/store';
import { createWorker } from '../../src/worker';
import type { compactionWorkflow } from '../../src/workflows';
import type { GcInput, GcPassReport } from '../../src/workflows/gc';
import { interceptStore } from '../support/faults';
import { makeInputs, readRecords, referenceMerge, writeInputs } from '../support/records';
import { startS3FaultProxy } from '../support/s3-fault-proxy';
import { createTestBucket, openTestStore, s3ClientConfig, type TestStore } from '../support/stores';
import {
  connectClient,
  expectReplays,
  quickExpirySettings,
  startTestWorker,
  uniqueId,
  workflowBundle,
  type RunningWorker,
} from '../support/temporal';
import { writeRoot } from '../support/roots';

/** An input segment larger than this is oversized for the compactions here. */
const MAX_INPUT_BYTES = 256 * 1024;
const settings: CompactionSettings = { ...quickExpirySettings, maxInputSegmentBytes: MAX_INPUT_BYTES };

const bytes = (s: string) => new TextEncoder().encode(s);
const payloadOf = (ns: NamespaceId, job: MetadataCompactionId) => ({
  job_id: job,
  namespace_id: ns,
  owner_id: 'catalogue',
  status: 'active',
  started_at_ms: 1000,
  heartbeat_at_ms: 2000,
});
const leaseText = (ns: NamespaceId, job: MetadataCompactionId) =>
  new TextDecoder().decode(
    encodeLease(createLeaseState({ jobId: job, namespaceId: ns, ownerId: 'catalogue', nowMs: 1000 })),
  );

/**
 * Lease contents no other test stores and collects; each must fail its namespace's pass, naming the lease key and the
 * defect.
 */
const LEASE_CASES: [string, (ns: NamespaceId, job: MetadataCompactionId) => Uint8Array, RegExp][] = [
  [
    'valid JSON with a wrong checksum',
    (ns, job) => bytes(leaseText(ns, job).replace(/sha256:[0-9a-f]{64}/, `sha256:${'0'.repeat(64)}`)),
    /payload_checksum does not match/,
  ],
  [
    'an unknown payload field',
    (ns, job) => encodeEnvelope('compaction_lease', { ...payloadOf(ns, job), cursor: 5 }),
    /cursor/,
  ],
  [
    'a missing payload field',
    (ns, job) => encodeEnvelope('compaction_lease', { ...payloadOf(ns, job), heartbeat_at_ms: undefined }),
    /heartbeat_at_ms/,
  ],
  ['a wrong kind', (ns, job) => encodeEnvelope('metadata_root', payloadOf(ns, job)), /kind is "metadata_root"/],
  [
    'a wrong format_version',
    (ns, job) => bytes(leaseText(ns, job).replace('"format_version":1', '"format_version":2')),
    /unknown format_version 2/,
  ],
  [
    'an unknown status',
    (ns, job) => encodeEnvelope('compaction_lease', { ...payloadOf(ns, job), status: 'done' }),
    /status/,
  ],
  [
    'a heartbeat before its start',
    (ns, job) => encodeEnvelope('compaction_lease', { ...payloadOf(ns, job), heartbeat_at_ms: 999 }),
    /heartbeat_at_ms is before started_at_ms/,
  ],
  [
    'a fractional timestamp',
    (ns, job) => encodeEnvelope('compaction_lease', { ...payloadOf(ns, job), heartbeat_at_ms: 2000.5 }),
    /heartbeat_at_ms/,
  ],
  [
    'a second, unchecksummed payload',
    (ns, job) =>
      bytes(
        `${leaseText(ns, job).slice(0, -1)},"payload":${JSON.stringify({ ...payloadOf(ns, job), status: 'reaping' })}}`,
      ),
    /member "payload" appears twice/,
  ],
  ['a byte-order mark', (ns, job) => bytes(`\ufeff${leaseText(ns, job)}`), /byte-order mark/],
  ['bytes that are not UTF-8', () => new Uint8Array([0xff, 0xfe, 0x7b]), /not UTF-8/],
  ['a zero-byte object', () => new Uint8Array(), /empty object/],
  ['a 100 MB object', () => new Uint8Array(100 * 1024 * 1024), new RegExp(`exceeds the limit of ${MAX_LEASE_BYTES}`)],
];

/** Roots the collector must not trust: the namespace is skipped, claiming and deleting nothing (spec 6a.5). */
const ROOT_CASES: [string, (ns: NamespaceId) => Uint8Array, RegExp][] = [
  ['a zero-byte root', () => new Uint8Array(), /empty object/],
  [
    'a root with a wrong checksum',
    (ns) =>
      bytes(
        new TextDecoder()
          .decode(encodeRoot({ namespace_id: ns, generation: 1, groups: {} }))
          .replace(/sha256:[0-9a-f]{64}/, `sha256:${'f'.repeat(64)}`),
      ),
    /payload_checksum/,
  ],
  [
    'a root with a repeated member',
    (ns) =>
      bytes(
        new TextDecoder()
          .decode(encodeRoot({ namespace_id: ns, generation: 1, groups: {} }))
          .replace('"generation":1', '"generation":1,"generation":2'),
      ),
    /member "generation" appears twice/,
  ],
  [
    'a root that names another namespace',
    () => encodeRoot({ namespace_id: namespaceId('someone-else'), generation: 1, groups: {} }),
    /names namespace someone-else/,
  ],
  [
    'a root that references a key outside its namespace',
    (ns) =>
      encodeRoot({
        namespace_id: ns,
        generation: 1,
        groups: { bindings: [stagedSegmentKey(namespaceId('other'), newJobId(), newSegmentId(), 'mseg')] },
      }),
    /not a segment key of/,
  ],
];

const BAD_IDS = ['', '..', 'a/b', '../namespaces/x', 'Upper', '\u00fcn\u00efcode', 'a'.repeat(64), 'a b', '-lead'];

describe('bad-input catalogue', () => {
  let fixture: TestStore;
  let store: ObjectStore;
  let worker: RunningWorker;
  let client: Client;
  let closeClient: () => Promise<void>;
  const deleteRequests: string[] = [];
  /** Every key the worker wrote (put, create, CAS). */
  const writes: string[] = [];
  /** Input keys deleted just before the worker's first read of them: gone after its job checked its inputs. */
  const deleteOnRead = new Set<string>();

  beforeAll(async () => {
    fixture = await openTestStore('minio');
    store = fixture.store;
    const recorded = interceptStore(store, async (operation, subject) => {
      // The pass's clock check writes and deletes an object of its own under store-probe/: not a deletion of the
      // bucket's contents.
      if (operation === 'deleteMany')
        deleteRequests.push(...(subject as readonly string[]).filter((k) => !k.startsWith(STORE_PROBE_PREFIX)));
      if (operation === 'deleteIfMatch') deleteRequests.push(subject as string);
      if (operation === 'put' || operation === 'putIfAbsent' || operation === 'putIfMatch')
        writes.push(subject as string);
      if (operation === 'getStream' && deleteOnRead.delete(subject as string))
        await store.deleteMany([subject as string]);
    });
    worker = await startTestWorker(recorded, settings);
    ({ client, close: closeClient } = await connectClient());
  });
  afterAll(async () => {
    await worker?.stop();
    await closeClient?.();
    await store?.close();
  });

  const pass = (input: GcInput): Promise<GcPassReport> =>
    client.workflow.execute('gcWorkflow', {
      taskQueue: worker.taskQueue,
      workflowId: uniqueId('bad-input'),
      args: [input],
    });
  /** The typed failure a pass ends with: its type, message and (for an incomplete pass) its report. */
  const failureOf = async (run: Promise<unknown>): Promise<ApplicationFailure> => {
    const err: unknown = await run.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(WorkflowFailedError);
    const cause = (err as WorkflowFailedError).cause;
    expect(cause).toBeInstanceOf(ApplicationFailure);
    return cause as ApplicationFailure;
  };
  const keysUnder = async (prefix: string): Promise<string[]> =>
    (await store.list({ prefix })).objects.map((o) => o.key);
  const newNamespace = () => namespaceId(uniqueId('bad').toLowerCase());
  const stage = async (ns: NamespaceId, job: MetadataCompactionId, count: number) => {
    for (let i = 0; i < count; i++) await store.put(stagedSegmentKey(ns, job, newSegmentId(), 'mseg'), bytes('staged'));
  };

  describe('a bad object at a lease or root key fails its namespace, names the key, and deletes nothing there', () => {
    const leaseCases = LEASE_CASES.map(([name, body, reason]) => ({
      name,
      body,
      reason,
      ns: newNamespace(),
      job: newJobId(),
    }));
    const rootCases = ROOT_CASES.map(([name, body, reason]) => ({
      name,
      body,
      reason,
      ns: newNamespace(),
      orphan: newJobId(),
    }));
    let report: GcPassReport;

    beforeAll(async () => {
      for (const c of leaseCases) {
        // A namespace is collected only against a root it can read: an empty one references nothing.
        await store.put(rootKey(c.ns), encodeRoot({ namespace_id: c.ns, generation: 1, groups: {} }));
        await store.put(leaseKey(c.ns, c.job), c.body(c.ns, c.job));
        await stage(c.ns, c.job, 2);
        // Beside the bad lease, an expired job and an orphan: a healthy namespace would lose both.
        const expired = newJobId();
        await store.put(
          leaseKey(c.ns, expired),
          encodeLease(createLeaseState({ jobId: expired, namespaceId: c.ns, ownerId: 'dead', nowMs: 1 })),
        );
        await stage(c.ns, expired, 2);
        await stage(c.ns, newJobId(), 2);
      }
      for (const c of rootCases) {
        await store.put(rootKey(c.ns), c.body(c.ns));
        await stage(c.ns, c.orphan, 3);
      }
      await sleep(settings.timing.stagingGraceMs + 500);
      report = await pass({ namespaces: [...leaseCases, ...rootCases].map((c) => c.ns) });
    }, 300_000);

    it("the pass ends incomplete, not failed (each namespace's problem is its own), with nothing deleted anywhere", () => {
      expect(report.complete).toBe(false);
      expect(report.totals).toMatchObject({
        corrupt: leaseCases.length,
        skippedNamespaces: rootCases.length,
        claimed: 0,
        objectsDeleted: 0,
        leasesDeleted: 0,
      });
      expect(deleteRequests).toEqual([]);
    });

    it.each(leaseCases.map((c) => [c.name, c] as const))(
      'a lease with %s is reported by key and reason; its namespace keeps every object',
      async (_, c) => {
        const reported = report.corruptLeases.find((l) => l.key === leaseKey(c.ns, c.job));
        expect(reported?.reason).toMatch(c.reason);
        expect(reported?.reason).toContain(leaseKey(c.ns, c.job));
        expect(report.corruptNamespaces).toContain(c.ns);
        // Its root, the bad lease and two staged objects, the expired job's lease and two, the orphan's two, and the
        // copy
        // of the root the pass judged by.
        expect(await keysUnder(`namespaces/${c.ns}/`)).toHaveLength(1 + 1 + 2 + 1 + 2 + 2 + 1);
      },
    );

    it.each(rootCases.map((c) => [c.name, c] as const))(
      '%s skips its namespace before any claim or walk, naming the root key',
      async (_, c) => {
        const problem = report.rootProblems.find((r) => r.namespaceId === c.ns);
        expect(problem).toMatchObject({ key: rootKey(c.ns), problem: 'corrupt' });
        expect(problem?.reason).toContain(`root ${rootKey(c.ns)} is corrupt`);
        expect(problem?.reason).toMatch(c.reason);
        expect(await keysUnder(jobPrefix(c.ns, c.orphan))).toHaveLength(3);
      },
    );

    it('a 100 MB object at a lease key is refused from its size alone, before its body is read', async () => {
      const c = leaseCases.find((l) => l.name === 'a 100 MB object')!;
      const started = performance.now();
      await expect(store.get(leaseKey(c.ns, c.job), { maxBytes: MAX_LEASE_BYTES })).rejects.toThrow(
        ObjectTooLargeError,
      );
      expect(performance.now() - started).toBeLessThan(2000);
    });
  });

  describe('bad ids at the entry points are invalid input, named, before any object is touched', () => {
    it.each(BAD_IDS)('a pass over namespace %j fails as InvalidInput naming it', async (bad) => {
      const before = deleteRequests.length;
      const failure = await failureOf(pass({ namespaces: [bad] }));
      expect(failure.type).toBe('InvalidInput');
      expect(failure.nonRetryable).toBe(true);
      expect(failure.message).toContain(`invalid namespace id ${JSON.stringify(bad)}`);
      expect(deleteRequests.length).toBe(before);
    });

    it.each(BAD_IDS)('starting a compaction of namespace %j throws InvalidKeyError and starts nothing', async (bad) => {
      await expect(
        startCompaction(client, { namespaceId: bad, group: 'bindings', taskQueue: worker.taskQueue }),
      ).rejects.toThrow(InvalidKeyError);
      await expect(
        startCompaction(client, { namespaceId: 'fine', group: bad, taskQueue: worker.taskQueue }),
      ).rejects.toThrow(/invalid family group/);
    });

    it.each(BAD_IDS)('a compaction workflow started directly with namespace %j fails as InvalidInput', async (bad) => {
      const run = client.workflow.execute('compactionWorkflow', {
        taskQueue: worker.taskQueue,
        workflowId: uniqueId('bad-compaction'),
        args: [{ namespaceId: bad, group: 'bindings' }],
      });
      const failure = await failureOf(run);
      expect(failure.type).toBe('InvalidInput');
      expect(failure.message).toContain(JSON.stringify(bad));
    });

    it.each([
      ['a pass clock in the future', { nowMs: Date.now() + 3_600_000 }, /pass clock/],
      ['zero prefixes per page', { prefixesPerPage: 0 }, /prefixesPerPage must be a whole number/],
      ['a fractional flush size', { keysPerFlush: 2.5 }, /keysPerFlush must be a whole number/],
    ] as const)('a pass with %s fails as InvalidInput naming the option', async (_, input, reason) => {
      const failure = await failureOf(pass(input));
      expect(failure.type).toBe('InvalidInput');
      expect(failure.message).toMatch(reason);
    });
  });

  describe('bad input of a compaction ends the job with a typed failure naming the key; nothing is published, nothing outside the job prefix written', () => {
    const group = familyGroup('inodes');
    type Compaction = WorkflowHandleWithFirstExecutionRunId<typeof compactionWorkflow>;

    const compact = (ns: NamespaceId): Promise<Compaction> =>
      startCompaction(client, { namespaceId: ns, group, taskQueue: worker.taskQueue });
    /** Sets the group's segment list as a metadata service would, whatever the keys hold. */
    /** A group as a writer that breaks the protocol sets it (the package's root writer refuses a missing segment). */
    const setGroup = (ns: NamespaceId, keys: readonly string[]): Promise<RootState> =>
      writeRoot(store, ns, (root) => ({ ...root, groups: { ...root.groups, [group]: keys } }));
    const newInput = (ns: NamespaceId) => inputSegmentKey(ns, newSegmentId(), 'mseg');
    const leasesOf = async (ns: NamespaceId) =>
      (await keysUnder(compactionsPrefix(ns))).filter((k) => parseCompactionKey(k).kind === 'lease');

    /**
     * Runs the group's compaction to its end, which must be a failure; checks what every bad input
     * must leave: the root as it was, writes only under a job prefix, `leases` leases (0 when the
     * job ended before taking one) that nothing refreshes any more.
     */
    async function failedCompaction(
      ns: NamespaceId,
      leases: number,
    ): Promise<{ failure: ApplicationFailure; handle: Compaction }> {
      const rootBefore = (await readRoot(store, ns, jsonRootCodec)).root;
      const handle = await compact(ns);
      const failure = await failureOf(handle.result());
      expect(failure.nonRetryable).toBe(true);
      expect((await readRoot(store, ns, jsonRootCodec)).root).toEqual(rootBefore);
      const written = writes.filter((k) => k.startsWith(`namespaces/${ns}/`));
      expect(written.filter((k) => parseCompactionKey(k).kind === 'unrecognised')).toEqual([]);
      const leaseKeys = await leasesOf(ns);
      expect(leaseKeys).toHaveLength(leases);
      const etags = await Promise.all(leaseKeys.map(async (k) => (await store.head(k)).etag));
      await sleep(3 * settings.timing.leaseRefreshIntervalMs);
      expect(await Promise.all(leaseKeys.map(async (k) => (await store.head(k)).etag))).toEqual(etags);
      return { failure, handle };
    }

    it.each([
      ['that published', 'compaction-published-history.json'],
      ['that failed on a corrupt input', 'compaction-corrupt-input-history.json'],
    ])("a compaction %s, recorded from today's code by `npm run golden`, replays", async (_, file) => {
      const history: unknown = JSON.parse(readFileSync(join(__dirname, '..', 'golden', file), 'utf8'));
      await Worker.runReplayHistory({ workflowBundle: await workflowBundle() }, history, `compaction-golden/${file}`);
    });

    it('a missing input: InputMissing naming the key, before the job takes a lease', async () => {
      const ns = newNamespace();
      const [present] = await writeInputs(store, ns, group, makeInputs(1, 50));
      const missing = newInput(ns);
      await setGroup(ns, [present!, missing]);
      const { failure } = await failedCompaction(ns, 0);
      expect(failure.type).toBe('InputMissing');
      expect(failure.message).toContain(missing);
    });

    it('an input deleted while the job compacts: InputMissing, the keeper stops, and the next start compacts the group again', async () => {
      const ns = newNamespace();
      const inputs = makeInputs(3, 200);
      const keys = await writeInputs(store, ns, group, inputs);
      deleteOnRead.add(keys[1]!);
      const { failure, handle } = await failedCompaction(ns, 1);
      expect(failure.type).toBe('InputMissing');
      expect(failure.message).toContain(keys[1]);
      await expectReplays(client, handle.workflowId, handle.firstExecutionRunId);

      await setGroup(ns, [keys[0]!, keys[2]!]);
      const again = await compact(ns);
      expect(again.firstExecutionRunId).not.toBe(handle.firstExecutionRunId);
      const result = await again.result();
      expect(result.outcome).toBe('published');
      expect(await readRecords(store, result.outputs)).toEqual(referenceMerge([inputs[0]!, inputs[2]!]));
    }, 60_000);

    it("an input missing at the first read leaves no other input's read behind to fail the worker at its deadline", async () => {
      const deadlineMs = 5000;
      const uncaught: unknown[] = [];
      const record = (err: unknown) => uncaught.push(err);
      process.on('uncaughtException', record);
      const shortDeadline = createS3ObjectStore({
        bucket: fixture.bucket!,
        client: new S3Client(s3ClientConfig(inject('minio'))),
        operationDeadlineMs: deadlineMs,
      });
      const vanishing = new Set<string>();
      const own = await startTestWorker(
        interceptStore(shortDeadline, async (operation, subject) => {
          if (operation === 'getStream' && vanishing.delete(subject as string))
            await store.deleteMany([subject as string]);
        }),
        settings,
      );
      try {
        const ns = newNamespace();
        const keys = await writeInputs(store, ns, group, makeInputs(4, 500));
        vanishing.add(keys[2]!);
        const failure = await failureOf(
          startCompaction(client, { namespaceId: ns, group, taskQueue: own.taskQueue }).then((h) => h.result()),
        );
        expect(failure.type).toBe('InputMissing');
        await sleep(deadlineMs + 1000);
        expect(uncaught).toEqual([]);
      } finally {
        process.off('uncaughtException', record);
        await own.stop();
        await shortDeadline.close();
      }
    }, 60_000);

    it.each([
      ['truncated', (valid: Uint8Array) => valid.subarray(0, Math.floor(valid.length / 2))],
      ['not a segment', () => bytes('{"format":"something else"}\n')],
      ['empty', () => new Uint8Array()],
    ])('an input that is %s: SegmentCorrupt naming the key; the keeper stops', async (_, damage) => {
      const ns = newNamespace();
      const [good, bad] = await writeInputs(store, ns, group, makeInputs(2, 200));
      await store.put(bad!, damage((await store.get(bad!)).body));
      const { failure } = await failedCompaction(ns, 1);
      expect(failure.type).toBe('SegmentCorrupt');
      expect(failure.message).toContain(`segment ${bad} is corrupt`);
      expect(failure.message).not.toContain(good);
    });

    it('an oversized input: InputTooLarge naming the key and its size, from a HEAD, before the job takes a lease', async () => {
      const ns = newNamespace();
      const [good] = await writeInputs(store, ns, group, makeInputs(1, 50));
      const huge = newInput(ns);
      await store.put(huge, new Uint8Array(MAX_INPUT_BYTES + 1));
      await setGroup(ns, [good!, huge]);
      const { failure } = await failedCompaction(ns, 0);
      expect(failure.type).toBe('InputTooLarge');
      expect(failure.message).toContain(`input segment ${huge} is ${MAX_INPUT_BYTES + 1} bytes`);
    });

    it('an input listed twice in the group (a writer that registered it again) is compacted once: the group publishes, naming the merge once', async () => {
      const ns = newNamespace();
      const inputs = makeInputs(2, 50);
      const [twice, other] = await writeInputs(store, ns, group, inputs);
      await setGroup(ns, [twice!, other!, twice!]);
      const result = await (
        await startCompaction(client, { namespaceId: ns, group, taskQueue: worker.taskQueue })
      ).result();
      expect(result).toMatchObject({ outcome: 'published', inputCount: 2 });
      expect((await readRoot(store, ns, jsonRootCodec)).root.groups[group]).toEqual(result.outputs);
      expect(await readRecords(store, result.outputs)).toEqual(referenceMerge(inputs));
    });

    it('a group of zero segments: InvalidInput naming the root key, "nothing to compact"', async () => {
      const ns = newNamespace();
      await writeInputs(store, ns, 'bindings', makeInputs(1, 10));
      await setGroup(ns, []);
      const { failure } = await failedCompaction(ns, 0);
      expect(failure.type).toBe('InvalidInput');
      expect(failure.message).toContain(`has no segments in ${rootKey(ns)}: nothing to compact`);
    });

    it('a group of one segment is compacted: its tombstones are dropped and its output replaces it', async () => {
      const ns = newNamespace();
      const inputs = makeInputs(1, 300);
      expect(inputs[0]!.some((r) => 'tombstone' in r)).toBe(true);
      const [only] = await writeInputs(store, ns, group, inputs);
      const result = await (await compact(ns)).result();
      expect(result.outcome).toBe('published');
      expect((await readRoot(store, ns, jsonRootCodec)).root.groups[group]).toEqual(result.outputs);
      expect(result.outputs).not.toContain(only);
      expect(await readRecords(store, result.outputs)).toEqual(referenceMerge(inputs));
    });

    it('a group of one segment with nothing to drop is left alone: outcome unchanged, no new root generation', async () => {
      const ns = newNamespace();
      const inputs = makeInputs(1, 300).map((records) => records.filter((r) => !('tombstone' in r)));
      const [only] = await writeInputs(store, ns, group, inputs);
      const before = await readRoot(store, ns, jsonRootCodec);
      const result = await (await compact(ns)).result();
      expect(result).toMatchObject({ outcome: 'unchanged', inputCount: 1, tombstones: [] });
      expect(result.detail).toContain('nothing to drop');
      const after = await readRoot(store, ns, jsonRootCodec);
      expect(after.etag).toBe(before.etag);
      expect(after.root.groups[group]).toEqual([only]);
    });

    it('an output write that fails half-way (every attempt of the second output PUT answered 500): the attempt fails naming the key, the retry rewrites it, one publication of exactly the merge', async () => {
      const minio = inject('minio');
      const proxy = await startS3FaultProxy(minio.endpoint);
      const viaProxy = createS3ObjectStore({
        bucket: fixture.bucket!,
        client: new S3Client(s3ClientConfig({ ...minio, endpoint: proxy.endpoint })),
        operationDeadlineMs: 30_000,
      });
      const faulted = await startTestWorker(viaProxy, settings);
      try {
        const ns = newNamespace();
        const inputs = makeInputs(3, 300);
        await writeInputs(store, ns, group, inputs);
        const rootBefore = (await readRoot(store, ns, jsonRootCodec)).root;
        const outputs: string[] = [];
        // The job's tombstone segments are staged beside its outputs (the first 64 of any job); they are not outputs.
        const tombstoneSegmentsOf = (key: string) => {
          const parsed = parseCompactionKey(key);
          return parsed.kind === 'staged_segment'
            ? Array.from({ length: 64 }, (_, i) =>
                tombstoneSegmentKey({ namespaceId: parsed.namespaceId, jobId: parsed.jobId }, i),
              )
            : [];
        };
        const isOutputPut = (r: { method: string; key: string }) => {
          const parsed = parseCompactionKey(r.key);
          return (
            r.method === 'PUT' &&
            parsed.kind === 'staged_segment' &&
            parsed.extension !== INPUT_LIST_EXTENSION &&
            r.key.startsWith(`namespaces/${ns}/`) &&
            !tombstoneSegmentsOf(r.key).includes(r.key)
          );
        };
        // Every SDK attempt (3) of the second output segment's PUT: the first output is written, the second is not.
        proxy.script(
          'error500',
          (r) => {
            if (isOutputPut(r) && !outputs.includes(r.key)) outputs.push(r.key);
            return isOutputPut(r) && r.key === outputs[1];
          },
          3,
        );
        const written: string[] = [];
        proxy.observe(({ request, status }) => {
          if (request.method === 'PUT' && status === 200) written.push(request.key);
        });

        const handle = await startCompaction(client, { namespaceId: ns, group, taskQueue: faulted.taskQueue });
        const result = await handle.result();
        expect(proxy.injected.error500).toBe(3);
        expect(result.outcome).toBe('published');
        expect(result.outputs[1]).toBe(outputs[1]);
        expect(await readRecords(store, result.outputs)).toEqual(referenceMerge(inputs));

        const history = await handle.fetchHistory();
        const retried = history
          .events!.map((e) => e.activityTaskStartedEventAttributes)
          .find((a) => (a?.attempt ?? 1) > 1);
        expect(retried?.lastFailure?.message).toContain(outputs[1]);
        expect(retried?.lastFailure?.applicationFailureInfo?.type).toBe('Ambiguous');

        const root = (await readRoot(store, ns, jsonRootCodec)).root;
        expect(root.generation).toBe(rootBefore.generation + 1);
        const job = jobPrefix(ns, jobId(result.jobId));
        expect(written.filter((k) => !k.startsWith(job))).toEqual([rootKey(ns)]);
        const staged = (await keysUnder(job)).filter((k) => parseCompactionKey(k).kind === 'staged_segment');
        expect(staged.filter((k) => !tombstoneSegmentsOf(k).includes(k) && k !== result.inputList).sort()).toEqual(
          [...result.outputs].sort(),
        );
      } finally {
        await faulted.stop();
        await viaProxy.close();
        await proxy.stop();
      }
    }, 60_000);
  });

  describe('a worker with a bad store setting refuses to start, naming the setting, and deletes nothing', () => {
    let connection: NativeConnection;
    beforeAll(async () => {
      connection = await NativeConnection.connect({ address: inject('temporalAddress') });
    });
    afterAll(() => connection?.close());

    const startWith = (bad: ObjectStore) =>
      createWorker({ store: bad, settings, connection, taskQueue: uniqueId('never') });

    it('wrong credentials: StoreConfigError naming the credential settings; the bucket is unchanged', async () => {
      const minio = inject('minio');
      const bucket = await createTestBucket(minio);
      const good = createS3ObjectStore({ bucket, client: new S3Client(s3ClientConfig(minio)) });
      const ns = newNamespace();
      await good.put(stagedSegmentKey(ns, newJobId(), newSegmentId(), 'mseg'), bytes('orphan'));
      const before = (await good.list({ prefix: '' })).objects.map((o) => o.key);
      const bad = createS3ObjectStore({
        bucket,
        client: new S3Client(s3ClientConfig({ ...minio, secretKey: 'not-the-secret' })),
      });

      const err: unknown = await startWith(bad).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(StoreConfigError);
      expect((err as StoreConfigError).setting).toBe('AWS credentials');
      expect((await good.list({ prefix: '' })).objects.map((o) => o.key)).toEqual(before);
      await good.close();
    });

    it('a missing bucket: StoreConfigError naming COMPACTION_S3_BUCKET', async () => {
      const bad = createS3ObjectStore({
        bucket: uniqueId('absent').toLowerCase(),
        client: new S3Client(s3ClientConfig(inject('minio'))),
      });
      await expect(startWith(bad)).rejects.toMatchObject({ name: 'StoreConfigError', setting: 'COMPACTION_S3_BUCKET' });
    });

    it('an unreachable endpoint: StoreConfigError naming AWS_ENDPOINT_URL_S3', async () => {
      const client = new S3Client({
        ...s3ClientConfig(inject('minio')),
        endpoint: `http://127.0.0.1:${await freePort()}`,
        maxAttempts: 1,
      });
      const bad = createS3ObjectStore({ bucket: 'any', client, operationDeadlineMs: 5000 });
      await expect(startWith(bad)).rejects.toMatchObject({ name: 'StoreConfigError', setting: 'AWS_ENDPOINT_URL_S3' });
    });
  });
});
