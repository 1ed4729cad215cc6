/**
 * The compaction workflow under faults: a lost lease, lost responses, a changed group, bad input.
 * What depends on the format (fencing, publication against a changed group) runs on both test
 * formats (support/formats.ts); a lost refresh response and bad input run on the reference.
 */
import { S3Client } from '@aws-sdk/client-s3';
import { ApplicationFailure, WorkflowFailedError } from '@temporalio/client';
import { describe, expect, it } from 'vitest';
import { startCompaction } from '../../src/client';
import {
  familyGroup,
  inputListKey,
  inputSegmentKey,
  jobId,
  jobPrefix,
  leaseKey,
  namespaceId,
  newSegmentId,
  parseCompactionKey,
  rootKey,
  type MetadataCompactionId,
  type NamespaceId,
} from '../../src/keys';
import { claimLeaseState, decodeLease, encodeLease, isLeaseLive } from '../../src/lease';
import { readRoot, updateRoot } from '../../src/protocol';
import { addSegments, jsonRootCodec, referencedKeys } from '../../src/root';
import { AmbiguousError, createS3ObjectStore, type ObjectStore } from '../../src/store';
import { gate, interceptStore, loseResponses, wrapStore } from '../support/faults';
import { referenceFormat, TEST_FORMATS, type TestFormat } from '../support/formats';
import { makeInputs, writeInputs } from '../support/records';
import { s3ClientConfig } from '../support/stores';
import { expectReplays, startTestWorker, storeAndClient, testSettings, uniqueId } from '../support/temporal';
import { TEST_PASS_ID } from '../support/pass';

const settings = testSettings(1000);
const until = async (condition: () => Promise<boolean>, timeoutMs = 60_000) => {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error('condition not reached in time');
    await new Promise((r) => setTimeout(r, 100));
  }
};
const isLeaseKey = (subject: unknown) => typeof subject === 'string' && parseCompactionKey(subject).kind === 'lease';

describe('compaction workflow under faults', () => {
  const servers = storeAndClient('minio');

  /** Runs one compaction of a fresh namespace on a worker over `store` with a format's plug-ins; returns the handle. */
  async function compactWith(store: ObjectStore, ns: string, plugins: TestFormat['plugins']) {
    const running = await startTestWorker(store, settings, undefined, undefined, plugins);
    const handle = await startCompaction(servers.client, {
      namespaceId: ns,
      group: 'inodes',
      taskQueue: running.taskQueue,
    });
    return { handle, stop: running.stop };
  }

  describe.each(TEST_FORMATS)('$name format', (format) => {
    /**
     * Whether a store call reads one of `inputs` (a stream for the reference compactor, a GET for the plug-in): the
     * compaction's work.
     */
    const readsInput = (inputs: readonly string[], operation: string, subject: unknown) =>
      (operation === 'getStream' || operation === 'get') && inputs.includes(subject as string);

    /**
     * A compaction of two fresh input segments, held after its lease exists and before it reads: another writer acts
     * meanwhile.
     */
    async function compactionHeldBeforeReading(ns: string) {
      const { keys } = await format.writeInputs(servers.fixture.store, ns, 'inodes', 2, 200);
      const held = gate();
      const store = interceptStore(servers.fixture.store, async (operation, subject) => {
        if (readsInput(keys, operation, subject)) await held.wait;
      });
      const { handle, stop } = await compactWith(store, ns, format.plugins);
      await until(async () => (await handle.query<{ phase: string }>('leaseState')).phase === 'compacting');
      return { handle, stop, release: held.open };
    }

    it('a job whose lease expired and was claimed reports fenced, publishes nothing, and runs again as a new job that publishes', async () => {
      const ns = uniqueId('fenced').toLowerCase();
      const inputs = await format.writeInputs(servers.fixture.store, ns, 'inodes', 3, 300);
      const compactionHeld = gate();
      let firstJob: string | undefined;
      let blockRefreshes = true;
      const store = interceptStore(servers.fixture.store, async (operation, subject) => {
        if (operation === 'putIfMatch' && isLeaseKey(subject) && blockRefreshes)
          throw new Error('store unreachable for the job');
        if (readsInput(inputs.keys, operation, subject) && !compactionHeld.opened) await compactionHeld.wait;
      });
      const { handle, stop } = await compactWith(store, ns, format.plugins);
      const nsId = namespaceId(ns);
      await until(async () => {
        firstJob = (await handle.query<{ jobId?: string }>('leaseState')).jobId;
        return (
          firstJob !== undefined &&
          (await servers.fixture.store.list({ prefix: leaseKey(nsId, jobId(firstJob)) })).objects.length === 1
        );
      });
      const key = leaseKey(nsId, jobId(firstJob!));
      await until(
        async () =>
          !isLeaseLive(
            decodeLease((await servers.fixture.store.get(key)).body, { namespaceId: nsId, jobId: jobId(firstJob!) }),
            Date.now(),
            settings.timing.leaseExpiryMs,
          ),
      );
      const expired = await servers.fixture.store.get(key);
      const lease = decodeLease(expired.body, { namespaceId: nsId, jobId: jobId(firstJob!) });
      await servers.fixture.store.putIfMatch(
        key,
        encodeLease(claimLeaseState(lease, TEST_PASS_ID, Date.now())),
        expired.etag,
      );
      const rootWhileFenced = await readRoot(servers.fixture.store, nsId, format.plugins.rootCodec);
      blockRefreshes = false;
      compactionHeld.open();

      const result = await handle.result();
      await stop();
      expect(result.fencedJobIds).toEqual([firstJob]);
      expect(result.jobId).not.toBe(firstJob);
      expect(result.outcome).toBe('published');
      const { root } = await readRoot(servers.fixture.store, nsId, format.plugins.rootCodec);
      expect(root.generation).toBe(rootWhileFenced.root.generation + 1);
      expect([...referencedKeys(root)].some((k) => k.includes(firstJob!))).toBe(false);
      expect(await format.readRecords(servers.fixture.store, result.outputs)).toEqual(inputs.merge);
      await expectReplays(servers.client, handle.workflowId, handle.firstExecutionRunId);
      await expectReplays(servers.client, handle.workflowId);
    });

    it('a job whose lease create landed unseen and was claimed before the retry reports fenced and runs again as a new job that publishes', async () => {
      const ns = uniqueId('claimedcreate').toLowerCase();
      const inputs = await format.writeInputs(servers.fixture.store, ns, 'inodes', 2, 200);
      let firstJob: string | undefined;
      // The first create lands, a collector claims it (as after expiry), and the job is told nothing certain.
      const store = wrapStore(servers.fixture.store, async (operation, args, call) => {
        const result = await call();
        if (operation === 'putIfAbsent' && isLeaseKey(args[0]) && firstJob === undefined) {
          const key = args[0] as string;
          const landed = await servers.fixture.store.get(key);
          const lease = decodeLease(
            landed.body,
            parseCompactionKey(key) as { namespaceId: NamespaceId; jobId: MetadataCompactionId },
          );
          firstJob = lease.job_id;
          await servers.fixture.store.putIfMatch(
            key,
            encodeLease(claimLeaseState(lease, TEST_PASS_ID, Date.now())),
            landed.etag,
          );
          throw new AmbiguousError(key, 'response lost');
        }
        return result;
      });
      const { handle, stop } = await compactWith(store, ns, format.plugins);
      const result = await handle.result();
      await stop();
      expect(result.fencedJobIds).toEqual([firstJob]);
      expect(result.outcome).toBe('published');
      expect(await format.readRecords(servers.fixture.store, result.outputs)).toEqual(inputs.merge);
      // The fenced job wrote its input list before its lease, and no output after it.
      expect(
        (await servers.fixture.store.list({ prefix: jobPrefix(namespaceId(ns), jobId(firstJob!)) })).objects.map(
          (o) => o.key,
        ),
      ).toEqual([leaseKey(namespaceId(ns), jobId(firstJob!)), inputListKey(namespaceId(ns), jobId(firstJob!), 1)]);
      await expectReplays(servers.client, handle.workflowId, handle.firstExecutionRunId);
    });

    it("a job whose input list a collector took for an orphan's before its lease existed reports fenced and runs again as a new job that publishes", async () => {
      const ns = uniqueId('orphaninputlist').toLowerCase();
      const inputs = await format.writeInputs(servers.fixture.store, ns, 'inodes', 2, 200);
      let firstJob: string | undefined;
      // The job waited past the staging grace between reading its group and creating its lease: the collector reclaimed
      // its prefix (the input list) first.
      const store = interceptStore(servers.fixture.store, async (operation, subject) => {
        if (operation === 'putIfAbsent' && isLeaseKey(subject) && firstJob === undefined) {
          firstJob = (parseCompactionKey(subject as string) as { jobId: MetadataCompactionId }).jobId;
          await servers.fixture.store.deleteMany([inputListKey(namespaceId(ns), jobId(firstJob), 1)]);
        }
      });
      const { handle, stop } = await compactWith(store, ns, format.plugins);
      const result = await handle.result();
      await stop();
      expect(result.fencedJobIds).toEqual([firstJob]);
      expect(result.jobId).not.toBe(firstJob);
      expect(result.outcome).toBe('published');
      expect(await format.readRecords(servers.fixture.store, result.outputs)).toEqual(inputs.merge);
      // The fenced job wrote nothing under its lease: its prefix holds the lease alone.
      expect(
        (await servers.fixture.store.list({ prefix: jobPrefix(namespaceId(ns), jobId(firstJob!)) })).objects.map(
          (o) => o.key,
        ),
      ).toEqual([leaseKey(namespaceId(ns), jobId(firstJob!))]);
      await expectReplays(servers.client, handle.workflowId, handle.firstExecutionRunId);
    });

    /**
     * A compaction whose input list a collector reclaims between the work and a publication
     * attempt (the input list's second read), as after a long stall: its lease expired and was claimed.
     * `publishedFirst`: the first publication CAS lands but its attempt fails, and the collector
     * comes before the activity's retry.
     */
    async function compactionReclaimedBeforePublication(ns: string, publishedFirst: boolean) {
      const nsId = namespaceId(ns);
      const inputs = await format.writeInputs(servers.fixture.store, ns, 'inodes', 2, 200);
      let firstJob: MetadataCompactionId | undefined;
      let listReads = 0;
      const reclaim = async () => {
        const key = leaseKey(nsId, firstJob!);
        const current = await servers.fixture.store.get(key);
        await servers.fixture.store.putIfMatch(
          key,
          encodeLease(
            claimLeaseState(
              decodeLease(current.body, { namespaceId: nsId, jobId: firstJob! }),
              TEST_PASS_ID,
              Date.now(),
            ),
          ),
          current.etag,
        );
        await servers.fixture.store.deleteMany([inputListKey(nsId, firstJob!, 1)]);
      };
      const store = wrapStore(servers.fixture.store, async (operation, args, call) => {
        const subject = args[0] as string;
        if (operation === 'putIfAbsent' && isLeaseKey(subject))
          firstJob ??= (parseCompactionKey(subject) as { jobId: MetadataCompactionId }).jobId;
        const listRead = operation === 'get' && firstJob !== undefined && subject === inputListKey(nsId, firstJob, 1);
        if (listRead && ++listReads === 2 && !publishedFirst) await reclaim();
        const result = await call();
        if (operation === 'putIfMatch' && subject === rootKey(nsId) && publishedFirst && listReads === 2) {
          await reclaim();
          // Not an AmbiguousError, which the attempt would settle by re-reading the root: the attempt fails, and its
          // retry reads the input list again.
          throw new Error('connection reset');
        }
        return result;
      });
      const { handle, stop } = await compactWith(store, ns, format.plugins);
      const result = await handle.result();
      await stop();
      return { handle, result, inputs, firstJob: firstJob! };
    }

    it('a job whose input list a collector reclaimed before publication (its lease claimed) reports fenced, publishes nothing, and runs again', async () => {
      const ns = uniqueId('reclaimedbeforepublish').toLowerCase();
      const { handle, result, inputs, firstJob } = await compactionReclaimedBeforePublication(ns, false);
      expect(result.fencedJobIds).toEqual([firstJob]);
      expect(result.jobId).not.toBe(firstJob);
      expect(result.outcome).toBe('published');
      const { root } = await readRoot(servers.fixture.store, namespaceId(ns), format.plugins.rootCodec);
      expect([...referencedKeys(root)].some((k) => k.includes(firstJob))).toBe(false);
      expect(await format.readRecords(servers.fixture.store, result.outputs)).toEqual(inputs.merge);
      await expectReplays(servers.client, handle.workflowId, handle.firstExecutionRunId);
    });

    it('a publication that landed unseen, its input list reclaimed before the retry, is found in the root: published, not fenced', async () => {
      const ns = uniqueId('reclaimedafterpublish').toLowerCase();
      const { result, inputs, firstJob } = await compactionReclaimedBeforePublication(ns, true);
      expect(result.fencedJobIds).toEqual([]);
      expect(result.jobId).toBe(firstJob);
      expect(result.outcome).toBe('published');
      const { root } = await readRoot(servers.fixture.store, namespaceId(ns), format.plugins.rootCodec);
      expect(result.outputs.every((k) => referencedKeys(root).has(k))).toBe(true);
      expect(await format.readRecords(servers.fixture.store, result.outputs)).toEqual(inputs.merge);
    });

    it('inputs replaced by another writer before publication: abandoned, the root keeps the other writer', async () => {
      const ns = uniqueId('abandoned').toLowerCase();
      const { handle, stop, release } = await compactionHeldBeforeReading(ns);
      const replacement = inputSegmentKey(namespaceId(ns), newSegmentId(), format.extension);
      await servers.fixture.store.put(
        replacement,
        (
          await servers.fixture.store.get(
            (await readRoot(servers.fixture.store, namespaceId(ns), format.plugins.rootCodec)).root.groups.inodes![0]!,
          )
        ).body,
      );
      const after = await updateRoot(
        servers.fixture.store,
        namespaceId(ns),
        (root) => ({ ...root, generation: root.generation + 1, groups: { ...root.groups, inodes: [replacement] } }),
        { codec: format.plugins.rootCodec },
      );
      release();
      const result = await handle.result();
      await stop();
      expect(result.outcome).toBe('abandoned');
      expect((await readRoot(servers.fixture.store, namespaceId(ns), format.plugins.rootCodec)).root).toEqual(after);
      await expectReplays(servers.client, handle.workflowId);
    });

    it('a segment added to the group during the compaction is kept beside the outputs and the tombstone segments', async () => {
      const ns = uniqueId('kept').toLowerCase();
      const { handle, stop, release } = await compactionHeldBeforeReading(ns);
      const [added] = (await format.writeInputs(servers.fixture.store, ns, 'inodes', 1, 10)).keys;
      release();
      const result = await handle.result();
      await stop();
      expect(result.outcome).toBe('published');
      // The added segment may hold an older version of a key the inputs deleted: their tombstones stay named
      // (docs/protocol.md, the reader view).
      expect(result.tombstones.length).toBeGreaterThan(0);
      expect(
        (await readRoot(servers.fixture.store, namespaceId(ns), format.plugins.rootCodec)).root.groups.inodes,
      ).toEqual([...result.outputs, ...result.tombstones, added]);
    });
  });

  it('a refresh whose response is lost is re-read and adopted: the job is not fenced', async () => {
    const ns = uniqueId('lost').toLowerCase();
    const inputs = makeInputs(3, 300);
    await writeInputs(servers.fixture.store, ns, 'inodes', inputs);
    const client3 = new S3Client(s3ClientConfig(servers.fixture.endpoint!));
    let budget = 3;
    const lost = loseResponses(
      client3,
      (command, input) =>
        command === 'PutObjectCommand' && input.IfMatch !== undefined && isLeaseKey(input.Key) && budget-- > 0,
    );
    const slow = interceptStore(
      createS3ObjectStore({ bucket: servers.fixture.bucket!, client: client3 }),
      async (operation) => {
        // Long enough for several refreshes while the work runs.
        if (operation === 'getStream')
          await new Promise((r) => setTimeout(r, 4 * settings.timing.leaseRefreshIntervalMs));
      },
    );
    const { handle, stop } = await compactWith(slow, ns, referenceFormat.plugins);
    const result = await handle.result();
    await stop();
    expect(lost.dropped).toBeGreaterThan(0);
    expect(result.outcome).toBe('published');
    expect(result.fencedJobIds).toEqual([]);
    await expectReplays(servers.client, handle.workflowId);
  });

  it('bad input fails with a typed failure and writes no lease: invalid namespace, missing root, corrupt input segment', async () => {
    const running = await startTestWorker(servers.fixture.store, settings);
    const failureType = async (args: { namespaceId: string; group: string }) => {
      const handle = await servers.client.workflow.start('compactionWorkflow', {
        taskQueue: running.taskQueue,
        workflowId: uniqueId('bad'),
        args: [args],
      });
      const err = await handle.result().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(WorkflowFailedError);
      const cause = (err as WorkflowFailedError).cause;
      return cause instanceof ApplicationFailure ? cause.type : (cause?.cause as ApplicationFailure | undefined)?.type;
    };
    expect(await failureType({ namespaceId: 'Bad/..', group: 'inodes' })).toBe('InvalidInput');
    expect(await failureType({ namespaceId: 'ok', group: 'UPPER' })).toBe('InvalidInput');
    const missing = uniqueId('noroot').toLowerCase();
    expect(await failureType({ namespaceId: missing, group: 'inodes' })).toBe('RootMissing');
    expect((await servers.fixture.store.list({ prefix: `namespaces/${missing}/` })).objects).toEqual([]);

    const corrupt = uniqueId('corrupt').toLowerCase();
    const [good] = await writeInputs(servers.fixture.store, corrupt, 'inodes', makeInputs(1, 50));
    const bad = inputSegmentKey(namespaceId(corrupt), newSegmentId(), 'mseg');
    await servers.fixture.store.put(bad, new TextEncoder().encode('not a segment'));
    await updateRoot(
      servers.fixture.store,
      namespaceId(corrupt),
      (root) => addSegments(root, familyGroup('inodes'), [bad]),
      { codec: jsonRootCodec },
    );
    const before = await readRoot(servers.fixture.store, namespaceId(corrupt), jsonRootCodec);
    expect(await failureType({ namespaceId: corrupt, group: 'inodes' })).toBe('SegmentCorrupt');
    expect((await readRoot(servers.fixture.store, namespaceId(corrupt), jsonRootCodec)).root).toEqual(before.root);
    expect(before.root.groups.inodes).toEqual([good, bad]);
    await running.stop();
  });
});
