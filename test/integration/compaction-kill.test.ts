/** A worker process killed mid-compaction: the next worker resumes the same job from its heartbeat details. */
import type { ChildProcess } from 'node:child_process';
import { defaultPayloadConverter } from '@temporalio/common';
import { temporal } from '@temporalio/proto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LeasedProgress } from '../../src/activities/compaction';
import { startCompaction } from '../../src/client';
import { runPartKey, type CompactionProgress } from '../../src/compactor';
import { compactionsPrefix, jobId, leaseKey, namespaceId, parseCompactionKey } from '../../src/keys';
import { decodeLease } from '../../src/lease';
import type { ObjectInfo } from '../../src/store';
import { makeInputs, readRecords, referenceMerge, writeInputs } from '../support/records';
import { binaryFormat, TEST_FORMATS, type TestFormat } from '../support/formats';
import { s3Requests, startS3FaultProxy } from '../support/s3-fault-proxy';
import { openTestStore, type TestStore } from '../support/stores';
import { connectClient, testSettings, uniqueId } from '../support/temporal';
import { SPAWNED_WORKER_TIMEOUT_MS, spawnWorkerProcess } from '../support/worker-env';
import { environmentFor, spawnWorker } from '../support/worker-process';

/**
 * Inputs (records per segment, key space, over 8 segments) large enough that the first worker is
 * killed with outputs still to write: the binary compactor merges in memory and writes its outputs
 * several times faster than the reference streams them.
 */
const killShape = (format: TestFormat) =>
  format === binaryFormat ? { perSegment: 30_000, keySpace: 90_000 } : { perSegment: 4000, keySpace: 12_000 };

const killed = (child: ChildProcess) => new Promise((resolve) => child.once('exit', resolve));

/**
 * Polls the progress the job's compactor heartbeated until `reached`, then SIGKILLs the worker; returns that progress
 * and the job.
 */
async function killOnceHeartbeated<P>(
  handle: Awaited<ReturnType<typeof startCompaction>>,
  worker: ChildProcess,
  reached: (progress: P) => boolean,
  what: string,
): Promise<{ heartbeated: P; job: string }> {
  const deadline = Date.now() + 90_000;
  for (;;) {
    if (Date.now() > deadline) throw new Error(`the compaction never heartbeated ${what}`);
    await new Promise((r) => setTimeout(r, 50));
    const pending = (await handle.describe()).raw.pendingActivities ?? [];
    const payload = pending.find((a) => a.activityType?.name === 'compactUnderLease')?.heartbeatDetails?.payloads?.[0];
    // The caller knows which compactor the worker runs, so what its progress is.
    const heartbeated = payload
      ? (defaultPayloadConverter.fromPayload<LeasedProgress>(payload).progress as P | undefined)
      : undefined;
    if (heartbeated !== undefined && reached(heartbeated)) {
      const { jobId: job } = await handle.query<{ jobId: string }>('leaseState');
      worker.kill('SIGKILL');
      await killed(worker);
      return { heartbeated, job };
    }
  }
}

describe('compaction across a worker crash', () => {
  let fixture: TestStore;
  const children: ChildProcess[] = [];
  beforeAll(async () => {
    fixture = await openTestStore('minio');
  });
  afterAll(async () => {
    await Promise.all(
      children.filter((c) => c.exitCode === null && c.signalCode === null).map((c) => (c.kill('SIGKILL'), killed(c))),
    );
    await fixture?.store.close();
  });

  it.each(TEST_FORMATS)(
    '$name format: after SIGKILL of the worker a new worker resumes the same job from heartbeat details, rewrites no finished segment and keeps the lease',
    async (format) => {
      const { client, close } = await connectClient();
      const ns = uniqueId('kill').toLowerCase();
      const nsId = namespaceId(ns);
      const { perSegment, keySpace } = killShape(format);
      const { merge } = await format.writeInputs(fixture.store, ns, 'revisions', 8, perSegment, keySpace);
      const taskQueue = uniqueId('kill-tq');
      const first = spawnWorker(fixture, taskQueue, format.workerEnv);
      children.push(first);
      const handle = await startCompaction(client, {
        namespaceId: ns,
        group: 'revisions',
        taskQueue,
        workerTimeoutMs: SPAWNED_WORKER_TIMEOUT_MS,
      });

      const { heartbeated, job } = await killOnceHeartbeated(
        handle,
        first,
        (p) => format.outputsFinished(p) >= 40,
        'progress',
      );
      const finished = format.outputsFinished(heartbeated);
      const listStaged = async () => {
        const staged = new Map<string, ObjectInfo>();
        let cursor: string | undefined;
        do {
          const page = await fixture.store.list({ prefix: compactionsPrefix(nsId), cursor });
          for (const o of page.objects) if (parseCompactionKey(o.key).kind === 'staged_segment') staged.set(o.key, o);
          cursor = page.nextCursor;
        } while (cursor);
        return staged;
      };
      const beforeResume = await listStaged();
      const lease = decodeLease((await fixture.store.get(leaseKey(nsId, jobId(job)))).body, {
        namespaceId: nsId,
        jobId: jobId(job),
      });

      children.push(spawnWorker(fixture, taskQueue, format.workerEnv));
      const result = await handle.result();
      expect(result.outcome).toBe('published');
      expect(result.jobId).toBe(job);
      expect(result.fencedJobIds).toEqual([]);
      const afterResume = await listStaged();
      expect(result.outputs.slice(0, finished).every((key) => key.endsWith(`.${format.extension}`))).toBe(true);
      for (const key of result.outputs.slice(0, finished)) {
        expect(afterResume.get(key)?.lastModified, `${key} was rewritten`).toEqual(beforeResume.get(key)?.lastModified);
        expect(afterResume.get(key)?.etag).toBe(beforeResume.get(key)?.etag);
      }
      const leases = (await fixture.store.list({ prefix: compactionsPrefix(nsId) })).objects.filter(
        (o) => parseCompactionKey(o.key).kind === 'lease',
      );
      expect(leases).toHaveLength(1);
      const finalLease = decodeLease((await fixture.store.get(leaseKey(nsId, jobId(job)))).body, {
        namespaceId: nsId,
        jobId: jobId(job),
      });
      expect(finalLease).toMatchObject({ status: 'active', started_at_ms: lease.started_at_ms });
      expect(await format.readRecords(fixture.store, result.outputs)).toEqual(merge);
      await close();
    },
  );
  it('after SIGKILL during the intermediate runs of a group wider than the fan-in, a new worker resumes after the runs its predecessor finished and rewrites none of them', async () => {
    const { client, close } = await connectClient();
    const ns = uniqueId('kill-runs').toLowerCase();
    const nsId = namespaceId(ns);
    // 24 inputs at fan-in 4: seven runs before the final merge of four sources (see planMerge).
    const inputs = makeInputs(24, 2000, 6000);
    await writeInputs(fixture.store, ns, 'revisions', inputs);
    const taskQueue = uniqueId('kill-runs-tq');
    const fanIn = { COMPACTION_MAX_FAN_IN: '4', COMPACTION_TARGET_SEGMENT_BYTES: '4096' };
    // The first worker reaches MinIO through a proxy that keeps the first part of the third run
    // from the store, its retries too (its deadline passes while held), so it is killed with exactly
    // two runs finished, however fast it merges and whenever it heartbeats.
    const proxy = await startS3FaultProxy(fixture.endpoint!.endpoint);
    const isThirdRunsFirstPart = (key: string) => {
      const staged = parseCompactionKey(key);
      return (
        staged.kind === 'staged_segment' && key === runPartKey({ namespaceId: nsId, jobId: staged.jobId }, 4, 2, 0)
      );
    };
    const thirdRun = proxy.hold((r) => s3Requests.put(r) && isThirdRunsFirstPart(r.key), { every: true });
    const first = spawnWorker(fixture, taskQueue, { ...fanIn, AWS_ENDPOINT_URL_S3: proxy.endpoint });
    children.push(first);
    try {
      const handle = await startCompaction(client, {
        namespaceId: ns,
        group: 'revisions',
        taskQueue,
        workerTimeoutMs: SPAWNED_WORKER_TIMEOUT_MS,
      });
      await thirdRun.arrived;
      const { heartbeated, job } = await killOnceHeartbeated<CompactionProgress>(
        handle,
        first,
        (p) => (p.runs?.parts.length ?? 0) >= 2,
        'two finished runs',
      );
      expect(heartbeated?.runs?.parts).toHaveLength(2);
      expect(heartbeated?.segmentsFinished).toBe(0);
      const ref = { namespaceId: nsId, jobId: jobId(job) };
      const finished = heartbeated!.runs!.parts.flatMap((parts, run) =>
        Array.from({ length: parts }, (_, part) => runPartKey(ref, 4, run, part)),
      );
      const before = await Promise.all(finished.map((key) => fixture.store.head(key)));

      children.push(spawnWorker(fixture, taskQueue, fanIn));
      const result = await handle.result();
      expect(result.outcome).toBe('published');
      expect(result.jobId).toBe(job);
      const after = await Promise.all(finished.map((key) => fixture.store.head(key)));
      after.forEach((info, i) => {
        expect(info.lastModified, `${info.key} was rewritten`).toEqual(before[i]!.lastModified);
        expect(info.etag).toBe(before[i]!.etag);
      });
      expect(await readRecords(fixture.store, result.outputs)).toEqual(referenceMerge(inputs));
    } finally {
      await proxy.stop();
      await close();
    }
  }, 240_000);
  it('after SIGKILL of the worker the retried keeper refreshes the lease within half the lease expiry', async () => {
    // Default proportions (expiry 5 × refresh) at a 3 s refresh, and a 2 s heartbeat timeout: the bound is 7.5 s.
    const settings = testSettings(3000, { targetSegmentBytes: 1024, heartbeatTimeoutMs: 2000 });
    const { client, close } = await connectClient();
    const ns = uniqueId('dead').toLowerCase();
    const nsId = namespaceId(ns);
    await writeInputs(fixture.store, ns, 'revisions', makeInputs(8, 8000, 30_000));
    const taskQueue = uniqueId('dead-tq');
    const first = spawnWorkerProcess(environmentFor(fixture, taskQueue, settings));
    children.push(first);
    const handle = await startCompaction(client, {
      namespaceId: ns,
      group: 'revisions',
      taskQueue,
      workerTimeoutMs: SPAWNED_WORKER_TIMEOUT_MS,
    });

    const deadline = Date.now() + 90_000;
    const started = async () => {
      const pending = (await handle.describe()).raw.pendingActivities ?? [];
      return pending.some((a) => a.activityType?.name === 'compactUnderLease' && a.lastStartedTime);
    };
    while (!(await started())) {
      if (Date.now() > deadline) throw new Error('the keeper and the work never started');
      await new Promise((r) => setTimeout(r, 50));
    }
    // A second worker already polls, as in production: the retry waits for Temporal, not for a worker to start.
    children.push(spawnWorkerProcess(environmentFor(fixture, taskQueue, settings)));
    const activityPollers = async () =>
      (
        await client.workflowService.describeTaskQueue({
          namespace: 'default',
          taskQueue: { name: taskQueue },
          taskQueueType: temporal.api.enums.v1.TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY,
        })
      ).pollers?.length ?? 0;
    while ((await activityPollers()) < 2) {
      if (Date.now() > deadline) throw new Error('the second worker never polled');
      await new Promise((r) => setTimeout(r, 100));
    }
    const { jobId: job } = await handle.query<{ jobId: string }>('leaseState');
    const key = leaseKey(nsId, jobId(job));
    const heartbeatAt = async () =>
      decodeLease((await fixture.store.get(key)).body, { namespaceId: nsId, jobId: jobId(job) }).heartbeat_at_ms;

    const killedAt = Date.now();
    first.kill('SIGKILL');
    await killed(first);
    const leftAt = await heartbeatAt();
    let refreshedAt: number | undefined;
    while (refreshedAt === undefined) {
      if (Date.now() - killedAt > settings.timing.leaseExpiryMs)
        throw new Error('no refresh within a lease expiry of the worker dying');
      await new Promise((r) => setTimeout(r, 50));
      if ((await heartbeatAt()) > leftAt) refreshedAt = Date.now();
    }
    const result = await handle.result();
    expect(result.outcome).toBe('published');
    const publishScheduled = (await handle.fetchHistory()).events?.find(
      (e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'publish',
    );
    const publishScheduledMs =
      Number(publishScheduled!.eventTime!.seconds) * 1000 + (publishScheduled!.eventTime!.nanos ?? 0) / 1e6;
    console.log(
      `dead worker: the retried keeper refreshed the lease ${refreshedAt - killedAt} ms after SIGKILL (lease expiry ${settings.timing.leaseExpiryMs} ms, heartbeat timeout ${settings.heartbeatTimeoutMs} ms)`,
    );
    // The refresh seen was the retried keeper's, not the one at the top of the publication.
    expect(publishScheduledMs).toBeGreaterThan(refreshedAt);
    expect(refreshedAt - killedAt).toBeLessThanOrEqual(settings.timing.leaseExpiryMs / 2);
    await close();
  });
});
