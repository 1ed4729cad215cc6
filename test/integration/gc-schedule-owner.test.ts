/**
 * One collector schedule per deployment: ensuring it from another task queue or for another store
 * used to re-point it silently (the last caller won); now it is refused naming both, unless `replace`.
 */
import type { Client } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { describeGcSchedule, ensureGcSchedule, GcScheduleOwnedError } from '../../src/client/schedule';
import type { GcOptions } from '../../src/workflows/gc';
import { runCliProcess } from '../support/cli-process';
import { connectClient, uniqueId } from '../support/temporal';

describe("the collector's schedule belongs to one deployment", () => {
  let client: Client;
  let close: () => Promise<void>;
  const scheduleId = uniqueId('owned-gc');

  beforeAll(async () => {
    ({ client, close } = await connectClient());
  });
  afterAll(async () => {
    await client?.schedule
      .getHandle(scheduleId)
      .delete()
      .catch(() => undefined);
    await close?.();
  });

  const passOf = async () => (await describeGcSchedule(client, { scheduleId })).action;

  it('ensured again from its own queues it is updated in place; from another queue or for another store it is refused naming both, and left as it was', async () => {
    await ensureGcSchedule(client, {
      scheduleId,
      cron: '0 3 * * *',
      taskQueue: 'deployment-a',
      pass: { store: 's3://a' },
    });
    await ensureGcSchedule(client, {
      scheduleId,
      every: '2h',
      taskQueue: 'deployment-a',
      pass: { store: 's3://a', dryRun: true },
    });
    expect(await passOf()).toMatchObject({
      taskQueue: 'deployment-a',
      args: [{ store: 's3://a', dryRun: true, collectorTaskQueue: 'deployment-a' }],
    });

    const otherQueue = ensureGcSchedule(client, {
      scheduleId,
      every: '1h',
      taskQueue: 'deployment-b',
      pass: { store: 's3://a' },
    });
    await expect(otherQueue).rejects.toThrow(GcScheduleOwnedError);
    await expect(otherQueue).rejects.toThrow(
      `schedule ${scheduleId} runs its passes on task queue deployment-a, store s3://a, not on task queue deployment-b, store s3://a`,
    );
    const otherStore = ensureGcSchedule(client, {
      scheduleId,
      every: '1h',
      taskQueue: 'deployment-a',
      pass: { store: 's3://b' },
    });
    await expect(otherStore).rejects.toThrow(
      /runs its passes on task queue deployment-a, store s3:\/\/a, not on task queue deployment-a, store s3:\/\/b: it collects for another deployment/,
    );
    const otherCollector = ensureGcSchedule(client, {
      scheduleId,
      every: '1h',
      taskQueue: 'deployment-a',
      pass: { store: 's3://a', collectorTaskQueue: 'gc-b' },
    });
    await expect(otherCollector).rejects.toThrow(/not on task queue deployment-a \(collector task queue gc-b\)/);
    expect(await passOf()).toMatchObject({ taskQueue: 'deployment-a', args: [{ store: 's3://a', dryRun: true }] });

    // One bucket named at another endpoint is the same store, as the workers judge it: updated in place.
    await ensureGcSchedule(client, {
      scheduleId,
      every: '2h',
      taskQueue: 'deployment-a',
      pass: { store: 's3://a at http://localhost:9000', dryRun: true },
    });
    expect(await passOf()).toMatchObject({
      taskQueue: 'deployment-a',
      args: [{ store: 's3://a at http://localhost:9000', dryRun: true }],
    });

    await ensureGcSchedule(client, {
      scheduleId,
      every: '1h',
      taskQueue: 'deployment-b',
      pass: { store: 's3://b' },
      replace: true,
    });
    expect(await passOf()).toMatchObject({
      taskQueue: 'deployment-b',
      args: [{ store: 's3://b', collectorTaskQueue: 'deployment-b' }],
    });
  });

  it(
    '`gc schedule ensure` from another queue exits 1 naming both, and `--replace` re-points it',
    { timeout: 60_000 },
    async () => {
      const env = { PATH: process.env.PATH, TEMPORAL_ADDRESS: inject('temporalAddress') };
      const refused = await runCliProcess(['gc', 'schedule', 'ensure', '--schedule-id', scheduleId], {
        ...env,
        COMPACTION_TASK_QUEUE: 'deployment-c',
      });
      expect(refused.code).toBe(1);
      expect(refused.stderr).toMatch(
        new RegExp(
          `^schedule ${scheduleId} runs its passes on task queue deployment-b, store s3://b, not on task queue deployment-c: .*\`--replace\``,
        ),
      );
      const replaced = await runCliProcess(['gc', 'schedule', 'ensure', '--schedule-id', scheduleId, '--replace'], {
        ...env,
        COMPACTION_TASK_QUEUE: 'deployment-c',
      });
      expect(replaced.code, replaced.stderr).toBe(0);
      expect(((await passOf()).args?.[0] as GcOptions).collectorTaskQueue).toBe('deployment-c');
    },
  );
});
