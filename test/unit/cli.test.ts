/** The CLI without servers: argument parsing, exit codes, and lease reads over an embedded store. */
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { ScheduleNotFoundError, ServiceError, WorkflowFailedError, type Client } from '@temporalio/client';
import { ApplicationFailure, RetryState, WorkflowNotFoundError } from '@temporalio/common';
import { msToTs } from '@temporalio/common/lib/time';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { CliError, ExitCode, explainFailure, TemporalUnreachableError } from '../../src/cli/exit-codes';
import { contextFromEnv, type CliContext } from '../../src/cli/context';
import { workerSetupFromEnv } from '../../src/worker/setup';
import { parseCron } from '../../src/cli/gc-schedule';
import { prefixStatus } from '../../src/cli/lease';
import { runCli } from '../../src/cli/program';
import { resolveSettings, SettingsError, TimingConfigError } from '../../src/config';
import {
  familyGroup,
  InvalidKeyError,
  jobId,
  jobPrefix,
  leaseKey,
  namespaceId,
  newJobId,
  newSegmentId,
  stagedSegmentKey,
  type MetadataCompactionId,
} from '../../src/keys';
import { claimLeaseState, createLeaseState, encodeLease } from '../../src/lease';
import { SearchAttributesMissingError } from '../../src/client/search-attributes';
import { WorkflowTaskFailingError } from '../../src/client/waiting';
import { addSegments, jsonRootCodec } from '../../src/root';
import { emptyReport, type GcReport } from '../../src/collector/report';
import { registeredAttributes } from '../support/search-attributes';
import {
  createEmbeddedObjectStore,
  StoreConfigError,
  StoreUnavailableError,
  StoreUnfitError,
  type ObjectStore,
} from '../../src/store';
import { TEST_PASS_ID } from '../support/pass';
import { writeRoot } from '../support/roots';

const settings = resolveSettings({
  timing: {
    leaseRefreshIntervalMs: 400,
    operationDeadlineMs: 200,
    publicationBudgetMs: 400,
    clockSafetyMarginMs: 400,
    leaseExpiryMs: 3600,
  },
  heartbeatTimeoutMs: 2000,
});
const expiry = settings.timing.leaseExpiryMs;
const NOW = 1_000_000;

interface Run {
  readonly code: number;
  readonly stdout: string[];
  readonly stderr: string[];
}

/** A store check as the probe reports one that failed; the exit-code table needs only its shape. */
const unfitCheck = {
  store: 'embedded:x',
  properties: [
    {
      property: 'create-race',
      statement: 'a put-if-absent race of 16 writers has exactly one winner',
      outcome: 'failed',
      detail: '16 of 16 writers were told they created the key',
    },
  ],
  versioning: 'unknown',
  conditionalDelete: 'honoured',
  fit: false,
  durationMs: 1,
} as const;

const stores: ObjectStore[] = [];
const embeddedStore = (): ObjectStore => {
  const store = createEmbeddedObjectStore({ path: join(mkdtempSync(join(tmpdir(), 'cli-')), 'store.sqlite') });
  stores.push(store);
  return store;
};
afterEach(async () => {
  vi.unstubAllEnvs();
  for (const store of stores.splice(0)) await store.close();
});

/**
 * Runs the CLI on a context whose store is `store` (none: any use fails the test) and whose Temporal is `client` (none:
 * any use fails).
 */
async function cli(
  argv: string[],
  store?: ObjectStore,
  client?: Client,
  overrides: Partial<CliContext> = {},
): Promise<Run> {
  const stdout: string[] = [];
  const stderr: string[] = [];
  const ctx: CliContext = {
    out: { line: (t) => stdout.push(t), error: (t) => stderr.push(t) },
    settings: () => settings,
    store: async () => store ?? expect.fail('the command opened the store'),
    storeIdentity: () => undefined,
    rootCodec: async () => jsonRootCodec,
    temporal: () => expect.fail('the command needed Temporal'),
    client: async () => client ?? expect.fail('the command connected to Temporal'),
    taskQueue: () => 'unit',
    collectorTaskQueue: () => 'unit',
    workerSetup: (overrides) => workerSetupFromEnv(process.env, { ...overrides, settings }),
    nowMs: () => NOW,
    close: async () => {},
    ...overrides,
  };
  return { code: await runCli(argv, ctx), stdout, stderr };
}

describe('cli arguments', () => {
  it('--help exits 0 and its epilogue lists every exit code', async () => {
    const run = await cli(['--help']);
    expect(run.code).toBe(0);
    const help = run.stdout.join('\n');
    for (const code of Object.values(ExitCode)) expect(help).toMatch(new RegExp(`^  ${code}  `, 'm'));
  });

  it('every subcommand help carries the exit codes too', async () => {
    const run = await cli(['gc', 'schedule', 'ensure', '--help']);
    expect(run.code).toBe(0);
    expect(run.stdout.join('\n')).toContain('4  configuration error');
  });

  it.each([
    [['nope']],
    [['lease', 'list', '--status', 'bogus']],
    [['compact', 'start', '--group', 'g']],
    [['gc', 'schedule', 'ensure', '--cron', '*/5 * * * *', '--every', '1h']],
    [['gc', 'schedule', 'ensure', '--every', 'soon']],
    [['gc', 'schedule', 'ensure', '--every', '0s']],
    [['lease', 'show', 'ns']],
    [['gc']],
  ])('%j is a usage error: exit 2', async (argv) => {
    const run = await cli(argv);
    expect(run.code).toBe(ExitCode.usage);
    expect(run.stdout).toEqual([]);
  });

  it('a usage error prints one line naming the option and pointing at --help', async () => {
    const run = await cli(['lease', 'list', '--status', 'bogus']);
    expect(run.stderr).toHaveLength(1);
    expect(run.stderr[0]).toMatch(/--status.*bogus.*active, expired, reaping.*see --help/);
  });

  it.each([
    [['lease', 'show', 'Bad', 'cmp_0123456789abcdef0123456789abcdef'], 'namespace id'],
    [['lease', 'show', 'ns', 'cmp_1'], 'job id'],
    [['lease', 'list', '--namespace', 'a/b'], 'namespace id'],
    [['compact', 'start', '--namespace', 'ns', '--group', 'Bad Group'], 'family group'],
    [['gc', 'run', '--namespace', 'ok', '--namespace', '../x'], 'namespace id'],
    [['gc', 'schedule', 'ensure', '--namespace', 'UPPER'], 'namespace id'],
  ])('%j is rejected before any store or server is touched: exit 2 naming the %s', async (argv, subject) => {
    const run = await cli(argv);
    expect(run.code).toBe(ExitCode.usage);
    expect(run.stderr).toHaveLength(1);
    expect(run.stderr[0]).toContain(`invalid ${subject}`);
  });
});

describe('cli exit codes', () => {
  const failure = (type: string) =>
    new WorkflowFailedError(
      'Workflow execution failed',
      ApplicationFailure.nonRetryable('no', type),
      RetryState.NON_RETRYABLE_FAILURE,
    );
  it.each([
    [new InvalidKeyError('namespace id', 'X', 'bad'), ExitCode.usage],
    [new StoreConfigError('COMPACTION_S3_BUCKET', 'COMPACTION_S3_BUCKET is not set'), ExitCode.config],
    [new TimingConfigError('unsafe timing'), ExitCode.config],
    [new SettingsError('invalid settings'), ExitCode.config],
    [new TemporalUnreachableError('127.0.0.1:7233', false, new Error('refused')), ExitCode.config],
    [new ScheduleNotFoundError('missing', 'compaction-gc'), ExitCode.notFound],
    [new CliError(ExitCode.notFound, 'no lease'), ExitCode.notFound],
    [failure('InvalidInput'), ExitCode.usage],
    [failure('RootMissing'), ExitCode.notFound],
    [failure('GcPassIncomplete'), ExitCode.failed],
    [new StoreUnavailableError('k', 'timeout'), ExitCode.failed],
    [new StoreUnfitError(unfitCheck, unfitCheck.properties[0]!), ExitCode.unfitStore],
    [new Error('anything else'), ExitCode.failed],
  ])('%s exits %i', (err, code) => {
    const explained = explainFailure(err);
    expect(explained.exitCode).toBe(code);
    expect(explained.line).not.toContain('\n');
  });

  it('an unreachable Temporal names the setting to change', () => {
    expect(explainFailure(new TemporalUnreachableError('127.0.0.1:7233', false, new Error('refused'))).line).toContain(
      'set TEMPORAL_ADDRESS',
    );
  });

  /** A gRPC error as the client's connection throws it. */
  const grpcError = (code: number, details: string) =>
    Object.assign(new Error(`${code} ${details}`), { code, details, metadata: {} });

  // Before, a refused start printed only "ServiceError: Failed to start Workflow" (exit 1): the reason was in its
  // cause.
  it("a start the server refused prints what it is, the server's status and its message: the SDK's ServiceError alone names neither", () => {
    const refused = new ServiceError('Failed to start Workflow', {
      cause: grpcError(3, 'Namespace default has no mapping defined for search attribute CompactionGroup'),
    });
    expect(explainFailure(refused)).toEqual({
      exitCode: ExitCode.usage,
      line: 'Failed to start Workflow: Temporal refused it, INVALID_ARGUMENT: Namespace default has no mapping defined for search attribute CompactionGroup',
    });
    expect(
      explainFailure(new ServiceError('Failed to start Workflow', { cause: grpcError(7, 'Request unauthorized.') })),
    ).toEqual({
      exitCode: ExitCode.config,
      line: 'Failed to start Workflow: Temporal refused it, PERMISSION_DENIED: Request unauthorized.',
    });
    expect(explainFailure(grpcError(3, 'invalid cron')).line).toBe(
      'Temporal refused it, INVALID_ARGUMENT: invalid cron',
    );
  });

  it('a namespace without the search attributes is a configuration error naming them and the command that registers them; a failing workflow task names its cause', () => {
    const missing = explainFailure(
      new SearchAttributesMissingError('default', [{ name: 'GcIncomplete', expected: 'Bool' }]),
    );
    expect(missing.exitCode).toBe(ExitCode.config);
    expect(missing.line).toBe(
      "Temporal namespace default lacks the search attributes GcIncomplete (Bool) that this package's workflows set: register them with `compaction-lease temporal setup` " +
        '(self-hosted or dev server, TEMPORAL_NAMESPACE=default), or on Temporal Cloud `tcld namespace search-attributes add --namespace default.<account> --sa GcIncomplete=Bool`',
    );
    const retyped = explainFailure(
      new SearchAttributesMissingError('default', [{ name: 'GcDryRun', expected: 'Bool', registered: 'Keyword' }]),
    );
    expect(retyped.line).toMatch(
      /^Temporal namespace default has GcDryRun as Keyword, not Bool: a search attribute keeps its type, so remove it/,
    );
    const stuck = explainFailure(
      new WorkflowTaskFailingError({
        workflowId: 'compaction:a:b',
        runId: 'r1',
        failureCause: 'BAD_SEARCH_ATTRIBUTES',
        failure: 'BadSearchAttributes: no mapping for X',
        attempt: 2,
      }),
    );
    expect(stuck).toEqual({
      exitCode: ExitCode.failed,
      line:
        'workflow compaction:a:b (run r1) stays Running: its workflow task failed 2 times in a row, BAD_SEARCH_ATTRIBUTES: BadSearchAttributes: no mapping for X; ' +
        'register the search attributes (`compaction-lease temporal setup`, or `registerSearchAttributes`): the server retries the task and the run goes on',
    });
  });
});

describe('cli store check', () => {
  /** The embedded store whose `LastModified` runs an hour behind: a store clock the age rules cannot trust. */
  const hourBehind = (store: ObjectStore): ObjectStore =>
    Object.assign(Object.create(store) as ObjectStore, {
      get: async (key: string) => ({ ...(await store.get(key)), lastModified: new Date(Date.now() - 3_600_000) }),
    });

  it('prints the store, its versioning, what it does with a conditional delete and one row per property, all held: exit 0', async () => {
    const store = embeddedStore();
    const run = await cli(['store', 'check'], store);
    expect(run.code, run.stderr.join('\n')).toBe(0);
    expect(run.stdout[0]).toMatch(new RegExp(`^store {2,}${store.description}$`));
    expect(run.stdout).toContainEqual(expect.stringMatching(/^versioning {2,}off: deletions free the storage$/));
    expect(run.stdout).toContainEqual(expect.stringMatching(/^conditional delete {2,}honoured: /));
    expect(run.stdout.find((l) => l.startsWith('PROPERTY'))).toMatch(/^PROPERTY\s+RESULT\s+DETAIL$/);
    expect(run.stdout.filter((l) => /^\S+\s+held\s/.test(l))).toHaveLength(7);
  });

  it('--json gives the typed result; a failed property exits 5 with one line naming it and the store', async () => {
    const store = embeddedStore();
    const run = await cli(['store', 'check', '--json'], hourBehind(store));
    expect(run.code).toBe(ExitCode.unfitStore);
    const check = JSON.parse(run.stdout.join('\n'));
    expect(check).toMatchObject({ store: store.description, fit: false, versioning: 'unversioned' });
    expect(check.properties.find((p: { property: string }) => p.property === 'clock-skew')).toMatchObject({
      outcome: 'failed',
    });
    expect(run.stderr).toEqual([
      expect.stringMatching(new RegExp(`^store ${store.description} failed the store check: clock-skew`)),
    ]);
  });
});

describe('cli lease reads', () => {
  const ns = namespaceId('unit');
  const writeLease = (store: ObjectStore, job = newJobId(), heartbeatAtMs = NOW, claimed = false) => {
    const lease = createLeaseState({ jobId: job, namespaceId: ns, ownerId: 'w1', nowMs: heartbeatAtMs });
    return store
      .put(leaseKey(ns, job), encodeLease(claimed ? claimLeaseState(lease, TEST_PASS_ID, Date.now()) : lease))
      .then(() => job);
  };

  it("a lease is active at heartbeat + expiry and expired 1 ms later, the collector's own rule", () => {
    const lease = createLeaseState({ jobId: newJobId(), namespaceId: ns, ownerId: 'w', nowMs: 5000 });
    expect(prefixStatus({ lease }, 5000 + expiry, expiry)).toBe('active');
    expect(prefixStatus({ lease }, 5001 + expiry, expiry)).toBe('expired');
    expect(prefixStatus({ lease: claimLeaseState(lease, TEST_PASS_ID, Date.now()) }, 0, expiry)).toBe('reaping');
    expect(prefixStatus({ missing: true }, 0, expiry)).toBe('orphaned');
    expect(prefixStatus({ corrupt: 'x' }, 0, expiry)).toBe('corrupt');
  });

  it('lease show of a missing lease exits 3 and says what remains under the prefix', async () => {
    const store = embeddedStore();
    const job = newJobId();
    await store.put(stagedSegmentKey(ns, job, newSegmentId(), 'seg'), new Uint8Array(10));
    const run = await cli(['lease', 'show', ns, job], store);
    expect(run.code).toBe(ExitCode.notFound);
    expect(run.stderr).toHaveLength(1);
    expect(run.stderr[0]).toContain('1 objects (10 bytes) remain');
  });

  /** A job whose staged segment the namespace root names: it published. */
  const publishJob = async (store: ObjectStore, job: MetadataCompactionId) => {
    const output = stagedSegmentKey(ns, job, newSegmentId(), 'mseg');
    await store.put(output, new Uint8Array(10));
    await store.put(stagedSegmentKey(ns, job, newSegmentId(), 'inputs'), new Uint8Array(5));
    // As its publication names it: the package's writer names only input segments.
    await writeRoot(store, ns, (root) => addSegments(root, familyGroup('g'), [output]));
    return output;
  };

  // Before, a published job read "active", then "orphaned" once its lease was gone, and show said the collector would
  // reclaim its outputs.
  it('a job whose outputs the root names is published, live lease or none, and show says which of its objects stay and which go', async () => {
    const store = embeddedStore();
    const job = await writeLease(store);
    await publishJob(store, job);
    const shown = JSON.parse((await cli(['lease', 'show', ns, job, '--json'], store)).stdout.join('\n'));
    expect(shown).toMatchObject({
      status: 'published',
      leaseStatus: 'active',
      live: true,
      published: { current: 1, retired: 0 },
      objects: { count: 3 },
    });
    const text = await cli(['lease', 'show', ns, job], store);
    expect(text.stdout).toContain(`status     published, lease active (live) at ${new Date(NOW).toISOString()}`);
    expect(text.stdout.find((l) => l.startsWith('objects'))).toMatch(
      /: 1 of them named by the namespace root \(1 current, 0 retired and kept for readers\): they stay while it names them; the collector reclaims the other 2 once no live lease owns them$/,
    );
    const orphan = await writeLease(store, newJobId(), NOW - expiry - 1);
    const listed = JSON.parse((await cli(['lease', 'list', '--json'], store)).stdout.join('\n')) as {
      jobId: string;
      status: string;
      leaseStatus: string;
    }[];
    expect(listed.map(({ jobId: j, status, leaseStatus }) => [j, status, leaseStatus]).sort()).toEqual(
      [
        [job, 'published', 'active'],
        [orphan, 'expired', 'expired'],
      ].sort(),
    );
    expect(
      JSON.parse((await cli(['lease', 'list', '--status', 'published', '--json'], store)).stdout.join('\n')),
    ).toEqual([expect.objectContaining({ jobId: job })]);

    // Its lease claimed and deleted by the collector: published still, and show no longer says the collector reclaims
    // its outputs.
    await store.deleteMany([leaseKey(ns, job)]);
    expect(JSON.parse((await cli(['lease', 'list', '--json'], store)).stdout.join('\n'))).toContainEqual(
      expect.objectContaining({ jobId: job, status: 'published', leaseStatus: 'orphaned' }),
    );
    const gone = await cli(['lease', 'show', ns, job], store);
    expect(gone.code).toBe(ExitCode.notFound);
    expect(gone.stderr[0]).toMatch(
      /remain under \S+, 1 of them named by the namespace root \(1 current, 0 retired and kept for readers\): they stay while it names them; the collector reclaims the other 1 once/,
    );
  });

  it('lease show --json gives the decoded lease, live at now, and the objects under the prefix', async () => {
    const store = embeddedStore();
    const job = await writeLease(store);
    await store.put(stagedSegmentKey(ns, job, newSegmentId(), 'seg'), new Uint8Array(100));
    const run = await cli(['lease', 'show', ns, job, '--json'], store);
    expect(run.code).toBe(0);
    const shown = JSON.parse(run.stdout.join('\n'));
    expect(shown).toMatchObject({
      status: 'active',
      live: true,
      nowMs: NOW,
      expiresAtMs: NOW + expiry,
      lease: { job_id: job, owner_id: 'w1' },
    });
    expect(shown.objects.count).toBe(2);
    expect(shown.objects.bytes).toBeGreaterThan(100);
  });

  it('lease list --status keeps only prefixes in that state, as one JSON array', async () => {
    const store = embeddedStore();
    const live = await writeLease(store);
    const expired = await writeLease(store, newJobId(), NOW - expiry - 1);
    await writeLease(store, newJobId(), NOW, true);
    const all = await cli(['lease', 'list', '--json'], store);
    expect(JSON.parse(all.stdout.join('\n'))).toHaveLength(3);
    const run = await cli(['lease', 'list', '--namespace', ns, '--status', 'expired', '--json'], store);
    expect(run.code).toBe(0);
    expect(JSON.parse(run.stdout.join('\n'))).toEqual([
      expect.objectContaining({ jobId: jobId(expired), status: 'expired', ownerId: 'w1' }),
    ]);
    const table = await cli(['lease', 'list'], store);
    expect(table.stdout[0]).toMatch(/^NAMESPACE\s+JOB\s+STATUS\s+HEARTBEAT\s+OWNER$/);
    expect(table.stdout.find((l) => l.includes(live))).toMatch(/\bactive\b/);
  });

  it('lease list lines its columns up across namespaces, which it lists a page at a time', async () => {
    const store = embeddedStore();
    for (const name of ['aaa-a-longer-namespace-name', 'zz']) {
      const job = newJobId();
      await store.put(
        leaseKey(namespaceId(name), job),
        encodeLease(createLeaseState({ jobId: job, namespaceId: namespaceId(name), ownerId: 'w1', nowMs: NOW })),
      );
    }
    const table = await cli(['lease', 'list'], store);
    expect(table.stdout).toHaveLength(3);
    const jobColumn = table.stdout.map((line) => line.search(/\b(JOB|cmp_)/));
    expect(new Set(jobColumn).size).toBe(1);
  });
});

describe('cli small frictions', () => {
  it('--version prints the package version and exits 0', async () => {
    const run = await cli(['--version']);
    expect(run.code).toBe(0);
    expect(run.stdout).toEqual([(JSON.parse(readFileSync('package.json', 'utf8')) as { version: string }).version]);
  });

  it('gc schedule ensure --cron with a malformed expression is a usage error before Temporal is asked', async () => {
    const run = await cli(['gc', 'schedule', 'ensure', '--cron', 'not a cron']);
    expect(run.code).toBe(ExitCode.usage);
    expect(run.stderr.join('\n')).toMatch(/"not a cron" is not a cron expression/);
  });

  it.each(['*/15 * * * *', '0 0 * * 1-5', '@daily', '0 */2 * * * *'])(
    'gc schedule accepts the cron expression %s',
    (expr) => {
      expect(parseCron(expr)).toBe(expr);
    },
  );
});

describe('cli operator paths', () => {
  const ns = namespaceId('unit');
  const corruptLease = async (store: ObjectStore) => {
    const job = newJobId();
    const { etag } = await store.put(leaseKey(ns, job), new TextEncoder().encode('{"half a lease'));
    return { job, etag, key: leaseKey(ns, job) };
  };

  it("lease show --raw prints a corrupt lease's bytes as stored, with its ETag", async () => {
    const store = embeddedStore();
    const { job, etag, key } = await corruptLease(store);
    const run = await cli(['lease', 'show', ns, job, '--raw', '--json'], store);
    expect(run.code).toBe(0);
    expect(JSON.parse(run.stdout.join('\n'))).toMatchObject({ key, etag, size: 14, body: '{"half a lease' });
    const text = await cli(['lease', 'show', ns, job, '--raw'], store);
    expect(text.stdout).toContain('{"half a lease');
    expect(text.stdout).toContainEqual(
      expect.stringMatching(new RegExp(`^etag\\s+${etag.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}$`)),
    );
  });

  it('lease delete removes a corrupt lease read at that ETag, and says how to unpause the schedule', async () => {
    const store = embeddedStore();
    const { job, etag, key } = await corruptLease(store);
    const run = await cli(['lease', 'delete', ns, job, '--etag', etag], store);
    expect(run.code, run.stderr.join('\n')).toBe(0);
    expect(run.stdout).toEqual([
      `deleted corrupt lease ${key}; what is under ${jobPrefix(ns, job)} is now orphaned and the collector reclaims it after the staging grace`,
      `then: compaction-lease gc schedule unpause --note "deleted corrupt lease ${key}"`,
    ]);
    await expect(store.head(key)).rejects.toThrow('not found');
  });

  it('lease delete of a corrupt lease whose ETag changed exits 1 and deletes nothing', async () => {
    const store = embeddedStore();
    const { job, etag, key } = await corruptLease(store);
    const run = await cli(['lease', 'delete', ns, job, '--etag', 'stale'], store);
    expect(run.code).toBe(ExitCode.failed);
    expect(run.stderr).toEqual([
      `lease ${key} has ETag ${etag}, not stale: it changed since it was read; read it again with \`compaction-lease lease show ${ns} ${job} --raw\``,
    ]);
    expect((await store.head(key)).etag).toBe(etag);
  });

  it('lease delete of a valid lease exits 2: only corrupt leases are deleted by hand', async () => {
    const store = embeddedStore();
    const job = newJobId();
    const { etag } = await store.put(
      leaseKey(ns, job),
      encodeLease(createLeaseState({ jobId: job, namespaceId: ns, ownerId: 'w1', nowMs: NOW })),
    );
    const run = await cli(['lease', 'delete', ns, job, '--etag', etag], store);
    expect(run.code).toBe(ExitCode.usage);
    expect(run.stderr).toEqual([
      `lease ${leaseKey(ns, job)} is active, not corrupt: \`lease delete\` removes only corrupt leases; the collector claims expired ones and a live one belongs to its job`,
    ]);
  });

  it('lease delete of a missing lease exits 3', async () => {
    const job = newJobId();
    const run = await cli(['lease', 'delete', ns, job, '--etag', 'x'], embeddedStore());
    expect(run.code).toBe(ExitCode.notFound);
    expect(run.stderr).toEqual([
      `no lease at ${leaseKey(ns, job)}. List the namespace's jobs with \`compaction-lease lease list --namespace ${ns}\``,
    ]);
  });

  it.each([
    [['lease', 'list']],
    [['lease', 'show', 'unit', 'cmp_0123456789abcdef0123456789abcdef']],
    [['lease', 'delete', 'unit', 'cmp_0123456789abcdef0123456789abcdef', '--etag', 'x']],
  ])('%j on an embedded store that does not exist exits 4 and creates nothing', async (argv) => {
    const path = join(mkdtempSync(join(tmpdir(), 'cli-missing-')), 'no', 'such', 'store.sqlite');
    const stderr: string[] = [];
    const code = await runCli(
      argv,
      contextFromEnv({ COMPACTION_EMBEDDED_STORE: path }, { line: () => {}, error: (t) => stderr.push(t) }),
    );
    expect(code).toBe(ExitCode.config);
    expect(stderr).toEqual([
      `no embedded store at ${path} (COMPACTION_S3_BUCKET is unset, so the store is the SQLite file COMPACTION_EMBEDDED_STORE): point COMPACTION_EMBEDDED_STORE at the file your workers use, or set COMPACTION_S3_BUCKET`,
    ]);
    expect(existsSync(dirname(dirname(path)))).toBe(false);
  });

  it("a missing schedule is named by its id, not the scheduler's internal workflow id", () => {
    const err = new ScheduleNotFoundError('workflow not found for ID: temporal-sys-scheduler:nightly', 'nightly');
    expect(explainFailure(err)).toEqual({
      exitCode: ExitCode.notFound,
      line: 'no schedule nightly: create it with `compaction-lease gc schedule ensure --schedule-id nightly`',
    });
    expect(explainFailure(new ScheduleNotFoundError('…', 'compaction-gc')).line).toBe(
      'no schedule compaction-gc: create it with `compaction-lease gc schedule ensure`',
    );
  });

  /** A poller the server saw `agoMs` before now. */
  const poller = (identity: string, agoMs = 0) => ({ identity, lastAccessTime: msToTs(Date.now() - agoMs) });

  /**
   * A client on which workflows start (recorded in `started`), `pollers` poll every task queue, no
   * workflow runs yet unless `running` gives its task queue, and every result is `result`.
   */
  const fakeClient = (
    pollers: ReturnType<typeof poller>[],
    result: () => Promise<unknown>,
    running?: { taskQueue: string },
  ) => {
    const started: string[] = [];
    const getHandle = (workflowId: string) => ({
      describe: async () => {
        if (!running) throw new WorkflowNotFoundError('not found', workflowId, undefined);
        return { status: { name: 'RUNNING' }, taskQueue: running.taskQueue };
      },
    });
    // A namespace with every search attribute, and a server that lists no worker heartbeats.
    const workflowService = {
      describeTaskQueue: async () => ({ pollers }),
      listWorkers: async () => ({ workersInfo: [] }),
    };
    const operatorService = { listSearchAttributes: async () => ({ customAttributes: registeredAttributes() }) };
    const client = {
      options: { namespace: 'default' },
      connection: { workflowService, operatorService },
      workflow: {
        start: async (_type: string, options: { workflowId: string }) => (
          started.push(options.workflowId),
          {
            workflowId: options.workflowId,
            firstExecutionRunId: 'run-1',
            result,
            client: { getHandle, workflowService, options: { namespace: 'default' } },
          }
        ),
        getHandle,
      },
      workflowService,
    } as unknown as Client;
    return Object.assign(client, { started });
  };

  it.each([
    [['gc', 'run', '--dry-run', '--wait', '--worker-timeout', '0s']],
    [['gc', 'run', '--dry-run', '--worker-timeout', '0s']],
    [['compact', 'start', '--namespace', 'unit', '--group', 'inodes', '--wait', '--worker-timeout', '0s']],
    [['compact', 'start', '--namespace', 'unit', '--group', 'inodes', '--worker-timeout', '0s']],
  ])(
    '%j with no worker polling the task queue exits 1 naming the queue and starts nothing, instead of leaving a run waiting forever',
    async (argv) => {
      const client = fakeClient([], () => new Promise(() => {}));
      const run = await cli(argv, undefined, client);
      expect(run.code).toBe(ExitCode.failed);
      expect(run.stderr).toEqual([
        'no worker polls task queue unit in Temporal namespace default (waited 0s): start one on it (`compaction-lease worker` with COMPACTION_TASK_QUEUE=unit), ' +
          'or point COMPACTION_TASK_QUEUE at the queue your workers poll',
      ]);
      expect(client.started).toEqual([]);
    },
  );

  it('a worker the server last saw polling more than 75 s ago is a stopped one: no live worker, nothing started', async () => {
    const client = fakeClient([poller('stopped', 80_000)], () => new Promise(() => {}));
    const run = await cli(
      ['compact', 'start', '--namespace', 'unit', '--group', 'inodes', '--worker-timeout', '0s'],
      undefined,
      client,
    );
    expect(run.code).toBe(ExitCode.failed);
    expect(run.stderr).toEqual([expect.stringMatching(/^no worker polls task queue unit /)]);
    expect(client.started).toEqual([]);
  });

  it('compact start of a group that already runs on a queue no worker polls names that queue and the run, not the queue asked for', async () => {
    const client = fakeClient([], () => new Promise(() => {}), { taskQueue: 'elsewhere' });
    const run = await cli(
      ['compact', 'start', '--namespace', 'unit', '--group', 'inodes', '--worker-timeout', '0s'],
      undefined,
      client,
    );
    expect(run.code).toBe(ExitCode.failed);
    expect(run.stderr).toEqual([
      'no worker polls task queue elsewhere in Temporal namespace default (waited 0s): compaction:unit:inodes already runs there and waits for one; ' +
        'start a worker on it (`compaction-lease worker` with COMPACTION_TASK_QUEUE=elsewhere), or terminate that run to start on another queue',
    ]);
  });

  it('--no-worker-check starts without looking for a worker', async () => {
    const client = fakeClient([], () => new Promise(() => {}));
    const run = await cli(
      ['compact', 'start', '--namespace', 'unit', '--group', 'inodes', '--no-worker-check'],
      undefined,
      client,
    );
    expect(run.code).toBe(ExitCode.ok);
    expect(client.started).toEqual(['compaction:unit:inodes']);
  });

  it("gc run with a collector queue of its own that no worker polls for activities exits 1 naming that queue and the collector's role, starting nothing", async () => {
    const client = fakeClient([poller('w1')], () => new Promise(() => {}));
    // Workflow tasks of the start queue are polled; nothing polls the collector's queue.
    client.workflowService.describeTaskQueue = (async (request: { taskQueue: { name: string } }) => ({
      pollers: request.taskQueue.name === 'unit' ? [poller('w1')] : [],
    })) as unknown as typeof client.workflowService.describeTaskQueue;
    const run = await cli(['gc', 'run', '--wait', '--worker-timeout', '0s'], undefined, client, {
      collectorTaskQueue: () => 'unit-gc',
    });
    expect(run.code).toBe(ExitCode.failed);
    expect(run.stderr).toEqual([
      "no worker polls task queue unit-gc for the collector's activities in Temporal namespace default (waited 0s): start one on it " +
        '(`compaction-lease worker --role collector` with COMPACTION_COLLECTOR_TASK_QUEUE=unit-gc), or point COMPACTION_COLLECTOR_TASK_QUEUE at the queue your workers poll',
    ]);
    expect(client.started).toEqual([]);
  });

  it('worker --role accepts only the three roles, as a usage error', async () => {
    const run = await cli(['worker', '--role', 'gc']);
    expect(run.code).toBe(ExitCode.usage);
    expect(run.stderr).toHaveLength(1);
    expect(run.stderr[0]).toMatch(/--role.*gc.*all, compaction, collector.*see --help/);
  });

  it('worker --format naming a module that is not there exits 4 with one line naming it, before the store or Temporal is touched', async () => {
    const run = await cli(['worker', '--format', './no-such-format.mjs']);
    expect(run.code).toBe(ExitCode.config);
    expect(run.stderr).toHaveLength(1);
    expect(run.stderr[0]).toMatch(
      /format module "\.\/no-such-format\.mjs" .*names no file: .*no-such-format\.mjs does not exist/,
    );
  });

  it('worker reads the format module from COMPACTION_FORMAT_MODULE when --format is not given', async () => {
    vi.stubEnv('COMPACTION_FORMAT_MODULE', './no-such-env-format.mjs');
    const run = await cli(['worker']);
    expect(run.code).toBe(ExitCode.config);
    expect(run.stderr).toEqual([
      expect.stringMatching(
        /format module "\.\/no-such-env-format\.mjs" \(COMPACTION_FORMAT_MODULE, worker --format\)/,
      ),
    ]);
  });

  it('gc run --wait prints each corrupt lease once, key and reason, and exits 1 for the incomplete pass', async () => {
    const key = leaseKey(ns, newJobId());
    const reason = `lease ${key} is corrupt: not JSON`;
    const empty = emptyReport(NOW, false);
    const report: GcReport = {
      ...empty,
      corruptNamespaces: [ns],
      corruptLeases: [{ key, reason }],
      totals: { ...empty.totals, namespaces: 1, prefixesSeen: 1, corrupt: 1 },
    };
    const failed = new WorkflowFailedError(
      'failed',
      ApplicationFailure.create({ type: 'GcPassIncomplete', message: 'incomplete', details: [report] }),
      RetryState.NON_RETRYABLE_FAILURE,
    );
    const run = await cli(
      ['gc', 'run', '--wait'],
      undefined,
      fakeClient([poller('w1')], () => Promise.reject(failed)),
    );
    expect(run.code).toBe(ExitCode.failed);
    expect(run.stdout.filter((l) => l.includes(key))).toEqual([`corrupt lease  ${reason}`]);
    expect(run.stderr).toEqual([
      `collector pass compaction-gc-run-${new Date(NOW).toISOString()} incomplete (1 corrupt leases, 0 failed prefixes, 0 failed namespaces, 0 namespaces skipped for their root): see docs/operations.md, then run it again`,
    ]);
  });
});
