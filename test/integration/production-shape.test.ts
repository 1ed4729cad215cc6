/**
 * The production-shape tier (issue 14): on MinIO, a group of ≥ 200 input segments holding
 * ≥ 100 MB compacts through a link that throttles segment bodies, with the operation deadline cut
 * to 3 s and every other timing at its default, so the job outlives many deadlines and single input
 * reads and output writes outlast one. Its worker process is SIGKILLed once heartbeat details show
 * finished output segments; a new worker resumes the same job from them and publishes. The group is
 * wider than the default fan-in, so it merges through intermediate runs first, which the resumed
 * attempt takes over from the same heartbeat details.
 */
import type { ChildProcess } from 'node:child_process';
import type { Client } from '@temporalio/client';
import { defaultPayloadConverter } from '@temporalio/common';
import { temporal } from '@temporalio/proto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LeasedProgress } from '../../src/activities/compaction';
import { startCompaction } from '../../src/client';
import { outputSegmentKey, planMerge, runPartKey, type CompactionProgress } from '../../src/compactor';
import { resolveSettings } from '../../src/config';
import { familyGroup, jobId, jobPrefix, namespaceId, rootKey } from '../../src/keys';
import { readRoot } from '../../src/protocol';
import { groupSegments, jsonRootCodec } from '../../src/root';
import { readSegment, SEGMENT_EXTENSION } from '../../src/segments';
import type { ObjectInfo } from '../../src/store';
import { startS3FaultProxy, type S3FaultProxy, type S3Request } from '../support/s3-fault-proxy';
import { openTestStore, type TestStore } from '../support/stores';
import { connectClient, uniqueId } from '../support/temporal';
import { writeWideGroup } from '../support/wide-group';
import { SPAWNED_WORKER_TIMEOUT_MS, spawnWorkerProcess } from '../support/worker-env';
import { environmentFor } from '../support/worker-process';

const MB = 1_000_000;
const OPERATION_DEADLINE_MS = 3000;
/**
 * Bytes per second for all segment bodies together: 100 MB take ≥ 10 s to read, an output segment (~6 MB) ≥ 4 s to
 * write.
 */
const LINK = { download: 10 * MB, upload: 1.5 * MB };
/** ~206 segments of ~1,600 records (~100 MB stored, ~144 MB raw), each key in about two of them. */
const SHAPE = {
  minSegments: 200,
  minStoredBytes: 100 * MB,
  keySpace: 160_000,
  recordsPerSegment: 1600,
  concurrency: 8,
};
/** An eighth of the default: the group's ~60 MB of raw output becomes ~8 segments to resume between. */
const TARGET_SEGMENT_BYTES = 8 * 1024 * 1024;
/**
 * How soon Temporal notices the killed worker (default 30 s). The data is scaled down ~100× from a
 * real group, so this is too: phases that grow with the group (reading the first bytes of every
 * input, skipping to the resume key, writing an output segment) must heartbeat, not outlast it.
 */
const HEARTBEAT_TIMEOUT_MS = 10_000;
const KILL_AFTER_SEGMENTS = 2;

const isSegmentBody = (r: S3Request) => r.key.endsWith(`.${SEGMENT_EXTENSION}`);
const seconds = (fromMs: number) => ((performance.now() - fromMs) / 1000).toFixed(1);
const report = (phase: string, fromMs: number, detail: string) =>
  console.log(`[production-shape] ${phase}: ${seconds(fromMs)} s · ${detail}`);

/**
 * Where the pending `compactUnderLease` activity stands, as the server holds it (what a retried attempt resumes from).
 */
interface CompactionAttempt {
  readonly attempt: number;
  readonly started: boolean;
  readonly progress: CompactionProgress | undefined;
  readonly lastFailure: string | undefined;
}

describe('production-shape compaction on MinIO', () => {
  let fixture: TestStore;
  let proxy: S3FaultProxy;
  let client: Client;
  let closeClient: () => Promise<void>;
  const workers: ChildProcess[] = [];
  const killed = new WeakSet<ChildProcess>();
  const exited = (child: ChildProcess) =>
    new Promise((resolve) =>
      child.exitCode !== null || child.signalCode !== null ? resolve(undefined) : child.once('exit', resolve),
    );
  const kill = async (child: ChildProcess) => {
    killed.add(child);
    child.kill('SIGKILL');
    await exited(child);
  };

  beforeAll(async () => {
    fixture = await openTestStore('minio');
    ({ client, close: closeClient } = await connectClient());
    proxy = await startS3FaultProxy(fixture.endpoint!.endpoint);
    // Only segment bodies: the shared pacer serves slices first come first served, so a lease or
    // root request (under a kilobyte) would queue behind every open body, unlike on a real link.
    proxy.setThrottle({
      shared: true,
      responseBytesPerSecond: LINK.download,
      requestBytesPerSecond: LINK.upload,
      matches: isSegmentBody,
    });
  });
  afterAll(async () => {
    await Promise.all(workers.map(kill));
    await proxy?.stop();
    await closeClient?.();
    await fixture?.store.close();
  });

  /**
   * A worker process whose S3 endpoint is the throttled proxy; `died` rejects if it exits without being killed by the
   * test.
   */
  function startWorker(taskQueue: string): { child: ChildProcess; died: Promise<never> } {
    const settings = resolveSettings({
      timing: { operationDeadlineMs: OPERATION_DEADLINE_MS },
      targetSegmentBytes: TARGET_SEGMENT_BYTES,
      heartbeatTimeoutMs: HEARTBEAT_TIMEOUT_MS,
    });
    const throughProxy = { ...fixture, endpoint: { ...fixture.endpoint!, endpoint: proxy.endpoint } };
    // Every write the worker sends is checked below against the job's prefix and the root; its start-up store probe
    // (under store-probe/) is shown in store-probe.test.ts.
    const child = spawnWorkerProcess({
      ...environmentFor(throughProxy, taskQueue, settings),
      COMPACTION_STORE_CHECK: 'skip',
    });
    workers.push(child);
    const died = new Promise<never>((_, reject) =>
      child.once('exit', (code, signal) => {
        if (!killed.has(child))
          reject(
            new Error(`worker ${child.pid} exited by itself (code ${code}, signal ${signal}): see its stderr above`),
          );
      }),
    );
    died.catch(() => {}); // raced below; this only keeps an exit after the last race from counting as unhandled
    return { child, died };
  }

  it(
    'a group of ≥ 200 inputs and ≥ 100 MB compacts through a throttled link under a 3 s operation deadline, resumes after its worker is SIGKILLed and publishes exactly the reference merge',
    { timeout: 8 * 60_000 },
    async () => {
      const ns = uniqueId('tier').toLowerCase();
      const nsId = namespaceId(ns);

      let from = performance.now();
      const group = await writeWideGroup(fixture.store, ns, 'inodes', SHAPE);
      report(
        'inputs written',
        from,
        `${group.inputs.length} segments, ${(group.storedBytes / MB).toFixed(1)} MB stored, ${(group.rawBytes / MB).toFixed(1)} MB raw, ${group.records} records`,
      );
      expect(group.inputs.length).toBeGreaterThanOrEqual(200);
      expect(group.storedBytes).toBeGreaterThanOrEqual(100 * MB);

      // Every request the workers send that is not a read, with when its answer was complete.
      const writes: { key: string; method: string; atMs: number }[] = [];
      proxy.observe(({ request }) => {
        if (request.method !== 'GET' && request.method !== 'HEAD')
          writes.push({ key: request.key, method: request.method, atMs: performance.now() });
      });

      const taskQueue = uniqueId('tier-tq');
      const first = startWorker(taskQueue);
      const handle = await startCompaction(client, {
        namespaceId: ns,
        group: 'inodes',
        taskQueue,
        workerTimeoutMs: SPAWNED_WORKER_TIMEOUT_MS,
      });
      const jobStarted = performance.now();

      /**
       * Polls the workflow until `check` returns a value; a worker that dies, or a workflow that closes while `check`
       * still waits, ends the wait.
       */
      const waitFor = async <T>(
        what: string,
        limitMs: number,
        died: Promise<never>,
        check: (a: CompactionAttempt | undefined, closed: boolean) => T | undefined,
      ): Promise<T> => {
        const limit = Date.now() + limitMs;
        for (;;) {
          const description = await Promise.race([handle.describe(), died]);
          const closed = description.status.name !== 'RUNNING';
          const pending = description.raw.pendingActivities?.find((a) => a.activityType?.name === 'compactUnderLease');
          const payload = pending?.heartbeatDetails?.payloads?.[0];
          const found = check(
            pending && {
              attempt: pending.attempt ?? 1,
              started: pending.state === temporal.api.enums.v1.PendingActivityState.PENDING_ACTIVITY_STATE_STARTED,
              progress: payload
                ? (defaultPayloadConverter.fromPayload<LeasedProgress>(payload).progress as
                    CompactionProgress | undefined)
                : undefined,
              lastFailure: pending.lastFailure?.message ?? undefined,
            },
            closed,
          );
          if (found !== undefined) return found;
          if (closed) {
            await handle.result();
            throw new Error(`the workflow closed (${description.status.name}) before ${what}`);
          }
          if (Date.now() > limit) throw new Error(`${what}: not within ${limitMs / 1000} s`);
          await Promise.race([new Promise((r) => setTimeout(r, 250)), died]);
        }
      };
      const noRetryBeyond = (attempt: number, a: CompactionAttempt | undefined) => {
        if (a && a.attempt > attempt)
          throw new Error(`compactUnderLease attempt ${a.attempt - 1} failed: ${a.lastFailure}`);
      };

      // The kill comes once the server holds finished segments: that is what the next attempt resumes from.
      from = performance.now();
      const atKill = await waitFor(
        `heartbeat details with ${KILL_AFTER_SEGMENTS} finished output segments`,
        240_000,
        first.died,
        (a) => {
          noRetryBeyond(1, a);
          return a?.progress && a.progress.segmentsFinished >= KILL_AFTER_SEGMENTS ? a.progress : undefined;
        },
      );
      const job = { namespaceId: nsId, jobId: jobId((await handle.query<{ jobId: string }>('leaseState')).jobId) };
      const prefix = jobPrefix(job.namespaceId, job.jobId);
      await kill(first.child);
      const killedAt = performance.now();
      report(
        'first worker SIGKILLed',
        from,
        `${atKill.segmentsFinished} output segments in heartbeat details, ${atKill.recordsOut} records`,
      );

      const listStaged = async () => {
        const staged = new Map<string, ObjectInfo>();
        let cursor: string | undefined;
        do {
          const page = await fixture.store.list({ prefix: `${prefix}segments/`, cursor });
          for (const o of page.objects) staged.set(o.key, o);
          cursor = page.nextCursor;
        } while (cursor);
        return staged;
      };
      const stagedAtKill = await listStaged();
      const finished = Array.from({ length: atKill.segmentsFinished }, (_, i) => outputSegmentKey(job, i));
      // The group is wider than the default fan-in: its intermediate runs were all finished before the first output
      // segment.
      expect(atKill.runs?.parts).toHaveLength(planMerge(group.inputs.length, resolveSettings().maxFanIn).runs.length);
      const runParts = atKill.runs!.parts.flatMap((parts, run) =>
        Array.from({ length: parts }, (_, part) => runPartKey(job, atKill.runs!.fanIn, run, part)),
      );

      from = performance.now();
      const second = startWorker(taskQueue);
      const resumed = await waitFor(
        'a second attempt of compactUnderLease started on the new worker',
        HEARTBEAT_TIMEOUT_MS + 90_000,
        second.died,
        (a) => {
          noRetryBeyond(2, a);
          return a?.attempt === 2 && a.started ? a : undefined;
        },
      );
      report(
        'resumed',
        from,
        `attempt ${resumed.attempt} from ${resumed.progress?.segmentsFinished ?? 0} finished output segments`,
      );

      from = performance.now();
      await waitFor('publication', 240_000, second.died, (a, closed) => {
        noRetryBeyond(2, a);
        return closed || undefined;
      });
      const result = await handle.result();
      const jobSeconds = (performance.now() - jobStarted) / 1000;
      report(
        'published',
        from,
        `${result.outputs.length} output segments, ${result.recordsOut} records, ${(result.bytesOut / MB).toFixed(1)} MB raw; the whole job took ${jobSeconds.toFixed(1)} s`,
      );

      expect(result).toMatchObject({ outcome: 'published', jobId: job.jobId, fencedJobIds: [] });
      expect(jobSeconds * 1000, 'the job lasts several operation deadlines').toBeGreaterThan(5 * OPERATION_DEADLINE_MS);

      // Resumed, not restarted: no segment the killed attempt had reported finished was written
      // again, and the new attempt wrote the rest.
      const stagedAfter = await listStaged();
      const writtenAfterKill = writes.filter((w) => w.atMs > killedAt).map((w) => w.key);
      expect(
        writtenAfterKill.filter((key) => finished.includes(key)),
        'finished outputs written again after the kill',
      ).toEqual([]);
      expect(
        writtenAfterKill.filter((key) => runParts.includes(key)),
        'finished intermediate runs written again after the kill',
      ).toEqual([]);
      expect(finished.length).toBeLessThan(result.outputs.length);
      expect(writtenAfterKill).toContain(result.outputs.at(-1));
      for (const key of finished)
        expect(stagedAfter.get(key)?.etag, `${key} was rewritten`).toBe(stagedAtKill.get(key)?.etag);
      // Each full output segment took longer than one operation deadline to write over the link.
      for (const key of result.outputs.slice(0, -1))
        expect(stagedAfter.get(key)!.size).toBeGreaterThan((LINK.upload * OPERATION_DEADLINE_MS) / 1000);

      // The root references exactly the outputs; the job's prefix holds them, the tombstone segments, the runs and the
      // job's input list, and the workers wrote nothing outside it but the root.
      const { root } = await readRoot(fixture.store, nsId, jsonRootCodec);
      expect(groupSegments(root, familyGroup('inodes'))).toEqual(result.outputs);
      expect([...stagedAfter.keys()].sort()).toEqual(
        [...result.outputs, ...result.tombstones, ...runParts, result.inputList].sort(),
      );
      expect(
        writes.filter((w) => !w.key.startsWith(prefix) && w.key !== rootKey(nsId)).map((w) => `${w.method} ${w.key}`),
      ).toEqual([]);

      from = performance.now();
      const expected = group.expected();
      let records = 0;
      for (const key of result.outputs) {
        for await (const record of readSegment(key, (await fixture.store.getStream(key)).body)) {
          const want = expected.next();
          if (want.done) throw new Error(`${key} holds ${record.key} after the last record of the reference merge`);
          // Field by field: a deep equality per record would cost more than the read.
          const same =
            record.key === want.value.key &&
            record.seq === want.value.seq &&
            'value' in record &&
            'value' in want.value &&
            record.value === want.value.value;
          if (!same) expect(record, `record ${records} in ${key}`).toEqual(want.value);
          records++;
        }
      }
      expect(expected.next().done, 'the outputs end before the reference merge').toBe(true);
      expect(result.recordsOut).toBe(records);
      report('outputs checked against the reference merge', from, `${records} records`);
    },
  );
});
