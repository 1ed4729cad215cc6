/**
 * The Temporal side of a deployment, checked before work, on the shared dev server: a Temporal
 * namespace registered by the README's commands, one registered by the commands the README used to
 * show (every attribute but GcIncomplete), and one with none. Each used to hang a start or a wait
 * with no message where the user looks (the worker's log only); each now ends in an error, within 10 s.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { Client, ServiceError } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { NativeConnection, Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createActivities } from '../../src/activities';
import { explainFailure } from '../../src/cli/exit-codes';
import { compactionResult, gcPassResult, type GcPassHandle } from '../../src/client';
import { checkSearchAttributes, SEARCH_ATTRIBUTES, searchAttributeCommands } from '../../src/client/search-attributes';
import { WorkflowTaskFailingError } from '../../src/client/waiting';
import { referenceCompactor } from '../../src/compactor';
import { temporalCliPath } from '../../src/devservers';
import { jsonRootCodec } from '../../src/root';
import { createEmbeddedObjectStore, type ObjectStore } from '../../src/store';
import { CompactionGroup, CompactionNamespace } from '../../src/workflows/search-attributes';
import { runCliProcess, type CliRun } from '../support/cli-process';
import {
  connectClient,
  freshTemporalNamespace,
  quickExpirySettings,
  uniqueId,
  workflowBundle,
} from '../support/temporal';

const run = promisify(execFile);
const readme = readFileSync(join(__dirname, '..', '..', 'README.md'), 'utf8');

/** The README's block of `temporal operator search-attribute create` commands, one per line. */
const readmeCommands = (): string[] => {
  const block = [...readme.matchAll(/^```sh\n([\s\S]*?)^```$/gm)]
    .map((m) => m[1] as string)
    .find((b) => b.includes('temporal operator search-attribute create'));
  return (block ?? '').trim().split('\n');
};

describe('Temporal set-up checked before work', () => {
  let client: Client;
  let close: () => Promise<void>;
  const stores: ObjectStore[] = [];
  const workers: { stop(): Promise<void> }[] = [];

  beforeAll(async () => {
    ({ client, close } = await connectClient());
  });
  afterAll(async () => {
    for (const worker of workers) await worker.stop();
    for (const store of stores) await store.close();
    await close?.();
  });

  /**
   * Runs lines of the README's shell commands as a user would, against the shared server, for `namespace` instead of
   * `default`.
   */
  const runAsUser = async (lines: readonly string[], namespace: string): Promise<void> => {
    const env = {
      ...process.env,
      TEMPORAL_ADDRESS: inject('temporalAddress'),
      PATH: `${dirname(temporalCliPath())}:${process.env.PATH ?? ''}`,
    };
    for (const line of lines)
      await run('sh', ['-c', line.replace('--namespace default', `--namespace ${namespace}`)], { env });
  };

  const customAttributes = async (namespace: string): Promise<string[]> =>
    Object.keys(
      (await client.connection.operatorService.listSearchAttributes({ namespace })).customAttributes ?? {},
    ).sort();

  /**
   * The CLI in the Temporal namespace `namespace`, on an embedded store of its own, with a queue no worker polls unless
   * given.
   */
  const cli = (namespace: string, args: string[], taskQueue = uniqueId('setup-tq')): Promise<CliRun> =>
    runCliProcess(args, {
      PATH: process.env.PATH,
      TEMPORAL_ADDRESS: inject('temporalAddress'),
      TEMPORAL_NAMESPACE: namespace,
      COMPACTION_TASK_QUEUE: taskQueue,
      COMPACTION_EMBEDDED_STORE: join(mkdtempSync(join(tmpdir(), 'setup-')), 'store.sqlite'),
    });

  /**
   * A worker of the package's workflows and activities in `namespace`, built without the package's
   * start-up check (which would refuse it): what a worker of an earlier version, or one started before
   * the attributes were removed, runs.
   */
  const uncheckedWorker = async (namespace: string): Promise<string> => {
    const taskQueue = uniqueId('unchecked-tq');
    const store = createEmbeddedObjectStore({ path: ':memory:' });
    stores.push(store);
    const connection = await NativeConnection.connect({ address: inject('temporalAddress') });
    const worker = await Worker.create({
      connection,
      namespace,
      taskQueue,
      workflowBundle: await workflowBundle(),
      shutdownGraceTime: '1 second',
      activities: createActivities({
        store,
        settings: quickExpirySettings,
        compactor: referenceCompactor,
        rootCodec: jsonRootCodec,
      }),
    });
    const running = worker.run();
    workers.push({ stop: async () => (worker.shutdown(), await running, await connection.close()) });
    return taskQueue;
  };

  /** The run's workflow task failures as its history records them (the server records the first of a series). */
  const taskFailures = async (workflowId: string, namespace: string) => {
    const { events } = await new Client({ connection: client.connection, namespace }).workflow
      .getHandle(workflowId)
      .fetchHistory();
    return (events ?? []).flatMap((e) =>
      e.workflowTaskFailedEventAttributes
        ? [
            {
              cause: e.workflowTaskFailedEventAttributes.cause,
              message: e.workflowTaskFailedEventAttributes.failure?.message ?? '',
              atMs: Number(e.eventTime?.seconds ?? 0) * 1000 + Math.floor((e.eventTime?.nanos ?? 0) / 1e6),
            },
          ]
        : [],
    );
  };

  it(
    "the README's commands register every attribute of SEARCH_ATTRIBUTES: `temporal check` passes and `temporal setup --print` prints the same commands",
    { timeout: 120_000 },
    async () => {
      const namespace = await freshTemporalNamespace(client, 'readme-ns');
      await runAsUser(readmeCommands(), namespace);
      expect(await customAttributes(namespace)).toEqual(Object.keys(SEARCH_ATTRIBUTES).sort());
      const check = await cli(namespace, ['temporal', 'check']);
      expect(check.code, check.stderr).toBe(0);
      expect(check.stdout).not.toMatch(/MISSING/);
      const printed = await cli(namespace, ['temporal', 'setup', '--print']);
      expect(printed.stdout.trim().split('\n').slice(0, -1)).toEqual(searchAttributeCommands(namespace));
    },
  );

  describe("a namespace registered by the README's old commands, every attribute but GcIncomplete", () => {
    let namespace: string;
    beforeAll(async () => {
      namespace = await freshTemporalNamespace(client, 'old-readme-ns');
      await runAsUser(
        readmeCommands().filter((line) => !line.includes('GcIncomplete')),
        namespace,
      );
      // The hang's condition: the namespace lacks exactly the attribute a pass sets at its end.
      expect(await customAttributes(namespace)).toEqual(
        Object.keys(SEARCH_ATTRIBUTES)
          .filter((name) => name !== 'GcIncomplete')
          .sort(),
      );
    }, 120_000);

    it(
      '`gc run --wait` exits 4 within 10 s naming GcIncomplete and `temporal setup`, and starts nothing, where it hung at the end of its pass',
      { timeout: 60_000 },
      async () => {
        const run = await cli(namespace, ['gc', 'run', '--wait']);
        expect(run.code).toBe(4);
        expect(run.stderr.trim().split('\n')).toEqual([
          expect.stringMatching(
            /^Temporal namespace \S+ lacks the search attributes GcIncomplete \(Bool\) .*`compaction-lease temporal setup`/,
          ),
        ]);
        expect(run.ms).toBeLessThan(10_000);
        const { count } = await client.connection.workflowService.countWorkflowExecutions({
          namespace,
          query: 'WorkflowType = "gcWorkflow"',
        });
        expect(Number(count)).toBe(0);
      },
    );

    it(
      'a pass started anyway (a worker of an earlier version) fails its last workflow task BAD_SEARCH_ATTRIBUTES and stays Running; its wait ends within 10 s of the failure, naming it',
      { timeout: 120_000 },
      async () => {
        const taskQueue = await uncheckedWorker(namespace);
        const scoped = new Client({ connection: client.connection, namespace });
        const workflowId = uniqueId('gc-stuck');
        const handle: GcPassHandle = await scoped.workflow.start('gcWorkflow', {
          workflowId,
          taskQueue,
          args: [{ namespaces: ['none-here'] }],
        });
        const err = await gcPassResult(handle, { onWait: () => {} }).then(
          () => undefined,
          (e: unknown) => e,
        );
        const reportedAtMs = Date.now();
        expect(err).toBeInstanceOf(WorkflowTaskFailingError);
        expect((err as WorkflowTaskFailingError).failureCause).toBe('BAD_SEARCH_ATTRIBUTES');
        expect((err as Error).message).toMatch(
          /stays Running: its workflow task failed \d+ times in a row, BAD_SEARCH_ATTRIBUTES: .*GcIncomplete.*`compaction-lease temporal setup`/,
        );
        // What the server did: the task failed for that cause, the run is still Running with the task retried.
        const [first] = await taskFailures(workflowId, namespace);
        expect(first?.cause).toBe(
          temporal.api.enums.v1.WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_BAD_SEARCH_ATTRIBUTES,
        );
        const described = await handle.describe();
        expect(described.status.name).toBe('RUNNING');
        expect(described.raw.pendingWorkflowTask?.attempt).toBeGreaterThanOrEqual(2);
        expect(reportedAtMs - (first?.atMs ?? 0)).toBeLessThan(10_000);
        await handle.terminate('test over');
      },
    );
  });

  describe('a namespace with no search attributes at all', () => {
    let namespace: string;
    beforeAll(async () => {
      namespace = await freshTemporalNamespace(client, 'bare-ns');
      expect(await customAttributes(namespace)).toEqual([]);
    }, 60_000);

    it(
      '`compact start` exits 4 within 10 s naming every missing attribute and `temporal setup`, not "ServiceError: Failed to start Workflow"',
      { timeout: 60_000 },
      async () => {
        const run = await cli(namespace, ['compact', 'start', '--namespace', 'tenant-7', '--group', 'inodes']);
        expect(run.code).toBe(4);
        const [line] = run.stderr.trim().split('\n');
        for (const name of Object.keys(SEARCH_ATTRIBUTES))
          expect(line).toContain(`${name} (${SEARCH_ATTRIBUTES[name]})`);
        expect(line).toMatch(
          /`compaction-lease temporal setup` .*or on Temporal Cloud `tcld namespace search-attributes add --namespace \S+\.<account> --sa CompactionNamespace=Keyword/,
        );
        expect(run.ms).toBeLessThan(10_000);
      },
    );

    it(
      '`gc run --wait`, `gc schedule ensure` and `trigger` exit 4 within 10 s, and a worker refuses to start there, all naming the missing attributes',
      { timeout: 60_000 },
      async () => {
        const [gc, ensure, trigger, worker] = await Promise.all([
          cli(namespace, ['gc', 'run', '--wait']),
          cli(namespace, ['gc', 'schedule', 'ensure']),
          cli(namespace, ['gc', 'schedule', 'trigger']),
          cli(namespace, ['worker']),
        ]);
        for (const run of [gc, ensure, trigger, worker]) {
          expect(run.code, run.stderr).toBe(4);
          expect(run.stderr).toMatch(
            /lacks the search attributes CompactionNamespace \(Keyword\), .*`compaction-lease temporal setup`/,
          );
        }
        expect(gc.ms).toBeLessThan(10_000);
        await expect(
          new Client({ connection: client.connection, namespace }).schedule.getHandle('compaction-gc').describe(),
        ).rejects.toThrow(/not found/i);
      },
    );

    // Before, the CLI printed this refusal as "ServiceError: Failed to start Workflow": the server's reason was only in
    // its cause.
    it(
      'a start the server refuses, as it did before the check (its search attributes unknown), is explained by its status and message',
      { timeout: 60_000 },
      async () => {
        const scoped = new Client({ connection: client.connection, namespace });
        const refused = await scoped.workflow
          .start('compactionWorkflow', {
            workflowId: uniqueId('refused'),
            taskQueue: uniqueId('refused-tq'),
            args: [{ namespaceId: 'tenant-7', group: 'inodes' }],
            typedSearchAttributes: [
              { key: CompactionNamespace, value: 'tenant-7' },
              { key: CompactionGroup, value: 'inodes' },
            ],
          })
          .then(
            () => undefined,
            (e: unknown) => e,
          );
        expect(refused).toBeInstanceOf(ServiceError);
        expect(explainFailure(refused).line).toMatch(
          /^Failed to start Workflow: Temporal refused it, INVALID_ARGUMENT: .*search attribute Compaction(Namespace|Group)/,
        );
      },
    );

    it(
      'a compaction started anyway stays Running on BAD_SEARCH_ATTRIBUTES; compactionResult ends within 10 s of the failure, naming it',
      { timeout: 120_000 },
      async () => {
        const taskQueue = await uncheckedWorker(namespace);
        const scoped = new Client({ connection: client.connection, namespace });
        const workflowId = uniqueId('compaction-stuck');
        const handle = await scoped.workflow.start('compactionWorkflow', {
          workflowId,
          taskQueue,
          args: [{ namespaceId: 'tenant-7', group: 'inodes' }],
        });
        const err = await compactionResult(handle as Parameters<typeof compactionResult>[0], { onWait: () => {} }).then(
          () => undefined,
          (e: unknown) => e,
        );
        const reportedAtMs = Date.now();
        expect(err).toBeInstanceOf(WorkflowTaskFailingError);
        expect((err as Error).message).toMatch(
          /BAD_SEARCH_ATTRIBUTES: .*no mapping defined for search attribute Compaction/,
        );
        const [first] = await taskFailures(workflowId, namespace);
        expect(first?.cause).toBe(
          temporal.api.enums.v1.WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_BAD_SEARCH_ATTRIBUTES,
        );
        expect((await handle.describe()).status.name).toBe('RUNNING');
        expect(reportedAtMs - (first?.atMs ?? 0)).toBeLessThan(10_000);
        await handle.terminate('test over');
      },
    );

    it(
      '`temporal setup` registers every one, after which `temporal check` passes and a second setup finds nothing to do',
      { timeout: 60_000 },
      async () => {
        const before = await cli(namespace, ['temporal', 'check']);
        expect(before.code).toBe(4);
        expect(before.stdout).toMatch(/GcIncomplete +Bool +MISSING/);
        const setup = await cli(namespace, ['temporal', 'setup']);
        expect(setup.code, setup.stderr).toBe(0);
        expect(setup.stdout).toMatch(
          new RegExp(
            `^registered in Temporal namespace ${namespace}: CompactionNamespace \\(Keyword\\), .*GcIncomplete \\(Bool\\)\\n$`,
          ),
        );
        expect(await customAttributes(namespace)).toEqual(Object.keys(SEARCH_ATTRIBUTES).sort());
        const after = await cli(namespace, ['temporal', 'check', '--json']);
        expect(after.code, after.stderr).toBe(0);
        expect(JSON.parse(after.stdout)).toEqual({ namespace, mismatches: [], source: 'operator API' });
        expect((await cli(namespace, ['temporal', 'setup'])).stdout).toBe(
          `Temporal namespace ${namespace} had every search attribute already\n`,
        );
      },
    );
  });

  it(
    'where the operator API is refused (Temporal Cloud), the visibility queries the server validates find the same missing attributes and wrong types',
    { timeout: 60_000 },
    async () => {
      const namespace = await freshTemporalNamespace(client, 'query-ns');
      await client.connection.operatorService.addSearchAttributes({
        namespace,
        searchAttributes: {
          CompactionNamespace: temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
          GcDryRun: temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
        },
      });
      const refused = Object.assign(new Error('Request unauthorized.'), {
        code: 7,
        details: 'Request unauthorized.',
        metadata: {},
      });
      const cloudLike = {
        workflowService: client.connection.workflowService,
        operatorService: { listSearchAttributes: () => Promise.reject(refused) },
      } as unknown as Client['connection'];
      const check = await checkSearchAttributes(cloudLike, namespace);
      expect(check.source).toBe('visibility queries');
      expect(check.mismatches).toEqual(
        [
          ...Object.entries(SEARCH_ATTRIBUTES)
            .filter(([name]) => name !== 'CompactionNamespace' && name !== 'GcDryRun')
            .map(([name, expected]) => ({ name, expected })),
          { name: 'GcDryRun', expected: 'Bool', registered: 'Keyword' },
        ].sort(
          (a, b) => Object.keys(SEARCH_ATTRIBUTES).indexOf(a.name) - Object.keys(SEARCH_ATTRIBUTES).indexOf(b.name),
        ),
      );
    },
  );
});
