/** The CLI as an operator runs it: a child process configured only by the environment, against Temporal and MinIO. */
import type { Client } from '@temporalio/client';
import { WorkflowNotFoundError } from '@temporalio/common';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { familyGroup, inputSegmentKey, leaseKey, namespaceId, newJobId, newSegmentId } from '../../src/keys';
import { createLeaseState, encodeLease } from '../../src/lease';
import { readRoot, updateRoot } from '../../src/protocol';
import { addSegments, jsonRootCodec } from '../../src/root';
import { readBinaryGroup, sampleBinaryInputs, textRootCodec, writeBinaryInputs } from '../support/binary-format';
import { makeInputs, writeInputs } from '../support/records';
import { openTestStore, type TestStore } from '../support/stores';
import { connectClient, quickExpirySettings, startTestWorker, uniqueId, type RunningWorker } from '../support/temporal';
import { finished, spawnCli as spawnCliProcess, type CliRun } from '../support/cli-process';
import { environmentFor } from '../support/worker-process';
import { writeRoot } from '../support/roots';

// The same timings (expiry 2 s) for the worker in this process and the CLI's environment.
const settings = quickExpirySettings;

describe('compaction-lease CLI', () => {
  let fixture: TestStore;
  let worker: RunningWorker;
  let client: Client;
  let closeClient: () => Promise<void>;
  const scheduleId = uniqueId('cli-gc');
  const ns = namespaceId(uniqueId('cli').toLowerCase());

  const spawnCli = (args: string[], taskQueue = worker.taskQueue, extraEnv: NodeJS.ProcessEnv = {}) =>
    spawnCliProcess(args, { ...environmentFor(fixture, taskQueue, settings), ...extraEnv });
  const cli = (...args: string[]): Promise<CliRun> => finished(spawnCli(args));
  const json = (run: CliRun): unknown => {
    expect(run.code, run.stderr).toBe(0);
    return JSON.parse(run.stdout);
  };

  const writeLease = async (heartbeatAtMs: number) => {
    const job = newJobId();
    await fixture.store.put(
      leaseKey(ns, job),
      encodeLease(createLeaseState({ jobId: job, namespaceId: ns, ownerId: 'cli-test', nowMs: heartbeatAtMs })),
    );
    return job;
  };

  beforeAll(async () => {
    fixture = await openTestStore('minio');
    worker = await startTestWorker(fixture.store, settings);
    ({ client, close: closeClient } = await connectClient());
    // The collector acts on a namespace only against a root it can read (spec 6a.5).
    await updateRoot(fixture.store, ns, (root) => root, { codec: jsonRootCodec });
  });
  afterAll(async () => {
    await client?.schedule
      .getHandle(scheduleId)
      .delete()
      .catch(() => undefined);
    await closeClient?.();
    await worker?.stop();
    await fixture?.store.close();
  });

  it('lease show prints a live lease with the objects under its prefix, and exits 3 for a missing one', async () => {
    const job = await writeLease(Date.now() + 60_000);
    const shown = json(await cli('lease', 'show', ns, job, '--json'));
    expect(shown).toMatchObject({
      jobId: job,
      status: 'active',
      live: true,
      lease: { owner_id: 'cli-test' },
      objects: { count: 1 },
    });
    const text = await cli('lease', 'show', ns, job);
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(/status\s+active \(live\)/);

    const missing = await cli('lease', 'show', ns, newJobId());
    expect(missing.code).toBe(3);
    expect(missing.stderr.trim().split('\n')).toHaveLength(1);
    expect(missing.stderr).toContain('no lease at');
  });

  it('lease list --json lists every job prefix of the namespace with its status at now', async () => {
    const expired = await writeLease(Date.now() - 10 * settings.timing.leaseExpiryMs);
    const rows = json(await cli('lease', 'list', '--namespace', ns, '--json')) as { jobId: string; status: string }[];
    expect(rows).toContainEqual(expect.objectContaining({ jobId: expired, status: 'expired' }));
    // Across every namespace of the bucket: other tests' compactions leave leases that expire too.
    const onlyExpired = json(await cli('lease', 'list', '--status', 'expired', '--json')) as {
      namespaceId: string;
      jobId: string;
      status: string;
    }[];
    expect(onlyExpired.every((r) => r.status === 'expired')).toBe(true);
    expect(onlyExpired.filter((r) => r.namespaceId === ns).map((r) => r.jobId)).toEqual([expired]);
  });

  it('compact start --wait runs the compaction on the worker and prints it published; a start beside it joins the same run', async () => {
    const compacted = uniqueId('cli-compact').toLowerCase();
    await writeInputs(fixture.store, compacted, 'revisions', makeInputs(3, 200));
    const [waited, joined] = await Promise.all([
      cli('compact', 'start', '--namespace', compacted, '--group', 'revisions', '--wait', '--json'),
      cli('compact', 'start', '--namespace', compacted, '--group', 'revisions', '--json'),
    ]);
    const done = json(waited) as { workflowId: string; runId: string; result: { outcome: string; outputs: string[] } };
    expect(done.workflowId).toBe(`compaction:${compacted}:revisions`);
    expect(done.result.outcome).toBe('published');
    expect(done.result.outputs.length).toBeGreaterThan(0);
    expect(json(joined)).toMatchObject({ workflowId: done.workflowId, runId: done.runId });
  });

  it('compact start --wait on a group whose input is missing exits 1 with one line naming InputMissing and the key', async () => {
    const broken = namespaceId(uniqueId('cli-missing').toLowerCase());
    await writeInputs(fixture.store, broken, 'revisions', makeInputs(1, 20));
    const missing = inputSegmentKey(broken, newSegmentId(), 'mseg');
    // Named by a writer that breaks the protocol: the package's root writer refuses a segment that is not in the store.
    await writeRoot(fixture.store, broken, (root) => addSegments(root, familyGroup('revisions'), [missing]));
    const run = await cli('compact', 'start', '--namespace', broken, '--group', 'revisions', '--wait');
    expect(run.code, run.stderr).toBe(1);
    const lines = run.stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^Workflow execution failed: InputMissing: input segment /);
    expect(lines[0]).toContain(missing);
  });

  it('worker serves compactions in the CLI process until SIGTERM, then exits 0', async () => {
    const taskQueue = uniqueId('cli-worker-tq');
    const child = spawnCli(['worker'], taskQueue);
    const exited = finished(child);
    try {
      const compacted = uniqueId('cli-worker').toLowerCase();
      await writeInputs(fixture.store, compacted, 'revisions', makeInputs(2, 100));
      // The worker process loads and bundles its workflows before it polls: slow on a busy machine.
      const done = json(
        await finished(
          spawnCli(
            [
              'compact',
              'start',
              '--namespace',
              compacted,
              '--group',
              'revisions',
              '--wait',
              '--worker-timeout',
              '60s',
              '--json',
            ],
            taskQueue,
          ),
        ),
      );
      expect(done).toMatchObject({ result: { outcome: 'published' } });
    } finally {
      child.kill('SIGTERM');
    }
    const run = await exited;
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain(`task queue ${taskQueue}`);
  });

  const formatModule = './test/support/binary-format-module.mts';
  it.each([
    ['worker --format', ['--format', formatModule], {}],
    ['worker with COMPACTION_FORMAT_MODULE', [], { COMPACTION_FORMAT_MODULE: formatModule }],
  ])(
    "%s serves a format module's plug-ins: binary inputs publish in the text root, and a collector pass reads that root",
    async (_, flags, env) => {
      const taskQueue = uniqueId('cli-format-tq');
      const child = spawnCli(['worker', ...flags], taskQueue, env);
      const exited = finished(child);
      try {
        const formatted = namespaceId(uniqueId('cli-format').toLowerCase());
        const inputs = await writeBinaryInputs(fixture.store, formatted, 'inodes', sampleBinaryInputs(2, 50));
        const expected = await readBinaryGroup(fixture.store, inputs);
        const started = [
          'compact',
          'start',
          '--namespace',
          formatted,
          '--group',
          'inodes',
          '--wait',
          '--worker-timeout',
          '60s',
          '--json',
        ];
        const done = json(await finished(spawnCli(started, taskQueue))) as {
          result: { outcome: string; outputs: string[] };
        };
        expect(done.result.outcome).toBe('published');
        expect(done.result.outputs.length).toBeGreaterThan(0);
        expect(done.result.outputs.every((key) => key.endsWith('.lpb'))).toBe(true);
        expect((await readRoot(fixture.store, formatted, textRootCodec)).root.groups.inodes).toEqual(
          done.result.outputs,
        );
        expect(await readBinaryGroup(fixture.store, done.result.outputs)).toEqual(expected);
        // Through root.json's codec the text root is corrupt, and the pass would skip the namespace and be incomplete.
        const pass = json(
          await finished(spawnCli(['gc', 'run', '--namespace', formatted, '--wait', '--json'], taskQueue)),
        ) as { complete: boolean };
        expect(pass.complete).toBe(true);
      } finally {
        child.kill('SIGTERM');
      }
      const run = await exited;
      expect(run.code, run.stderr).toBe(0);
      expect(run.stdout).toContain(`task queue ${taskQueue}`);
      expect(run.stdout).toContain(`format ${formatModule} (compactor, rootCodec)`);
    },
  );

  it('gc run --dry-run --wait --json reports the pass and deletes nothing', async () => {
    const expired = await writeLease(Date.now() - 10 * settings.timing.leaseExpiryMs);
    const run = json(await cli('gc', 'run', '--dry-run', '--namespace', ns, '--wait', '--json')) as {
      complete: boolean;
      report: {
        dryRun: boolean;
        totals: { namespaces: number; prefixesSeen: number; claimed: number; leasesDeleted: number };
      };
    };
    expect(run.complete).toBe(true);
    expect(run.report.dryRun).toBe(true);
    expect(run.report.totals.namespaces).toBe(1);
    expect(run.report.totals.claimed).toBeGreaterThanOrEqual(1);
    const after = json(await cli('lease', 'show', ns, expired, '--json'));
    expect(after).toMatchObject({ status: 'expired', lease: { status: 'active' } });
  });

  it('gc passes, gc show and gc why read what a pass deleted and why from its manifest', async () => {
    const other = namespaceId(uniqueId('cli-manifest').toLowerCase());
    await updateRoot(fixture.store, other, (root) => root, { codec: jsonRootCodec });
    const job = newJobId();
    const staged = `namespaces/${other}/metadata/compactions/${job}/segments/${newSegmentId()}.seg`;
    await fixture.store.put(staged, new TextEncoder().encode('staged'));
    await fixture.store.put(
      leaseKey(other, job),
      encodeLease(
        createLeaseState({
          jobId: job,
          namespaceId: other,
          ownerId: 'cli-test',
          nowMs: Date.now() - 10 * settings.timing.leaseExpiryMs,
        }),
      ),
    );
    await new Promise((resolve) => setTimeout(resolve, settings.timing.stagingGraceMs + 500));
    const run = json(await cli('gc', 'run', '--namespace', other, '--wait', '--json')) as {
      report: { manifests: string[] };
    };
    expect(run.report.manifests).toHaveLength(1);
    const pass = run.report.manifests[0]?.split('/').at(-2) as string;

    const passes = json(await cli('gc', 'passes', '--namespace', other, '--json')) as {
      passId: string;
      objects: number;
      dryRun: boolean;
      byRule: Record<string, number>;
    }[];
    expect(passes).toEqual([
      expect.objectContaining({ passId: pass, objects: 2, dryRun: false, byRule: { claimed_prefix: 1, lease: 1 } }),
    ]);
    const shown = json(await cli('gc', 'show', pass, '--namespace', other, '--json')) as {
      namespaceId: string;
      lines: { key: string; rule: string }[];
    }[];
    expect(shown).toEqual([
      {
        namespaceId: other,
        lines: [
          expect.objectContaining({ key: leaseKey(other, job), rule: 'lease' }),
          expect.objectContaining({ key: staged, rule: 'claimed_prefix' }),
        ],
      },
    ]);
    const why = await cli('gc', 'why', staged);
    expect(why.code, why.stderr).toBe(0);
    expect(why.stdout).toContain(pass);
    // What the claim saw: an expired lease this pass claimed (its stored status, "active", read as a live job's).
    expect(why.stdout).toMatch(/claimed_prefix +lease expired \(heartbeat \S+\), claimed by this pass/);
    const never = await cli('gc', 'why', leaseKey(other, newJobId()));
    expect(never.code).toBe(3);
    expect(never.stderr).toMatch(/no manifest names/);
  });

  it('gc schedule ensure twice leaves one schedule, updated in place, which describe --json shows', async () => {
    expect((await cli('gc', 'schedule', 'ensure', '--schedule-id', scheduleId, '--cron', '0 3 * * *')).code).toBe(0);
    const ensured = json(
      await cli('gc', 'schedule', 'ensure', '--schedule-id', scheduleId, '--every', '2h', '--dry-run', '--json'),
    );
    expect(ensured).toMatchObject({ scheduleId, every: '2h', pass: { dryRun: true } });
    const described = json(await cli('gc', 'schedule', 'describe', '--schedule-id', scheduleId, '--json'));
    expect(described).toMatchObject({
      scheduleId,
      paused: false,
      taskQueue: worker.taskQueue,
      pass: { dryRun: true },
      cadence: { calendars: [], intervals: [{ everyMs: 2 * 3600_000 }] },
    });
    expect((await cli('gc', 'schedule', 'pause', '--schedule-id', scheduleId, '--note', 'cli test')).code).toBe(0);
    expect(json(await cli('gc', 'schedule', 'describe', '--schedule-id', scheduleId, '--json'))).toMatchObject({
      paused: true,
      note: 'cli test',
    });
    const absent = uniqueId('absent');
    const missing = await cli('gc', 'schedule', 'describe', '--schedule-id', absent);
    expect(missing.code).toBe(3);
    expect(missing.stderr).toBe(
      `no schedule ${absent}: create it with \`compaction-lease gc schedule ensure --schedule-id ${absent}\`\n`,
    );
  });

  it('gc run --wait with no worker on the task queue says so within --worker-timeout: exit 1, one line', async () => {
    const unpolled = uniqueId('cli-unpolled');
    const run = await finished(
      spawnCli(['gc', 'run', '--dry-run', '--namespace', ns, '--wait', '--worker-timeout', '1s'], unpolled),
    );
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(
      new RegExp(
        `^no worker polls task queue ${unpolled} in Temporal namespace default \\(waited 1s\\): start one on it [^\n]*\n$`,
      ),
    );
  });

  it('compact start with no worker on the task queue exits 1 within seconds, naming the queue, and starts no run to hold the group', async () => {
    const unpolled = uniqueId('cli-unpolled');
    const started = Date.now();
    const run = await finished(
      spawnCli(
        ['compact', 'start', '--namespace', ns, '--group', 'attributes', '--wait', '--worker-timeout', '1s'],
        unpolled,
      ),
    );
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(
      new RegExp(
        `^no worker polls task queue ${unpolled} in Temporal namespace default \\(waited 1s\\): start one on it [^\n]*\n$`,
      ),
    );
    expect(Date.now() - started).toBeLessThan(30_000);
    await expect(client.workflow.getHandle(`compaction:${ns}:attributes`).describe()).rejects.toThrow(
      WorkflowNotFoundError,
    );
  });

  it('an invalid namespace is a usage error: exit 2 and one line naming the grammar', async () => {
    const run = await cli('lease', 'list', '--namespace', 'Not/A/Namespace');
    expect(run.code).toBe(2);
    expect(run.stdout).toBe('');
    expect(run.stderr.trim().split('\n')).toEqual([expect.stringContaining('invalid namespace id "Not/A/Namespace"')]);
  });
});
