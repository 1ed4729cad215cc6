/**
 * examples/metadata-service as a new user builds it: the package packed (`npm pack`, prepack builds
 * it), the tarball and the example's own dependencies (its own @temporalio/*, which the package
 * takes as peers) installed from the registry with install scripts on into a copy of the example,
 * type-checked and compiled by its own tsconfig, then run against the shared Temporal dev server,
 * each time in a Temporal namespace of its own that `npx compaction-lease temporal setup` prepares
 * (`temporal check` before it fails, after it passes): once on the embedded default (node:sqlite,
 * nothing native to build) and once on a fresh MinIO bucket.
 */
import { execFile } from 'node:child_process';
import { cpSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Client } from '@temporalio/client';
import { afterAll, describe, expect, it, inject } from 'vitest';
import { createTestBucket } from '../support/stores';
import { connectClient, freshTemporalNamespace, uniqueId } from '../support/temporal';

const run = promisify(execFile);
const root = join(__dirname, '..', '..');
const example = join(root, 'examples', 'metadata-service');

describe('examples/metadata-service', () => {
  const work = mkdtempSync(join(tmpdir(), 'example-'));
  const namespaces: string[] = [];
  afterAll(async () => {
    rmSync(work, { recursive: true, force: true });
    // The example ensures the default collector schedule in its namespace; its task queue has no worker any more.
    const { client, close } = await connectClient();
    for (const namespace of namespaces)
      await new Client({ connection: client.connection, namespace }).schedule
        .getHandle('compaction-gc')
        .delete()
        .catch(() => undefined);
    await close();
  });

  /**
   * A fresh Temporal namespace, set up as the README says: `temporal check` names what is missing, `temporal setup`
   * registers it.
   */
  const setUpNamespace = async (project: string, env: NodeJS.ProcessEnv): Promise<string> => {
    const { client, close } = await connectClient();
    const namespace = await freshTemporalNamespace(client, 'example-ns').finally(close);
    namespaces.push(namespace);
    const cli = (...args: string[]) =>
      run('npx', ['--no-install', 'compaction-lease', ...args], {
        cwd: project,
        env: { ...env, TEMPORAL_NAMESPACE: namespace },
      }).then(
        (done) => ({ code: 0, ...done }),
        (err: { code: number; stdout: string; stderr: string }) => err,
      );
    const before = await cli('temporal', 'check');
    expect(before.code).toBe(4);
    expect(before.stderr).toMatch(
      /lacks the search attributes CompactionNamespace \(Keyword\), .*`compaction-lease temporal setup`/,
    );
    const setup = await cli('temporal', 'setup');
    expect(setup.code, setup.stderr).toBe(0);
    expect(setup.stdout).toMatch(
      new RegExp(`^registered in Temporal namespace ${namespace}: CompactionNamespace \\(Keyword\\), `),
    );
    const after = await cli('temporal', 'check');
    expect(after.code, after.stderr).toBe(0);
    return namespace;
  };

  it(
    'installs from the packed tarball with one copy of each @temporalio package, type-checks, sets up a Temporal namespace with `npx compaction-lease temporal setup`, and on the embedded store and on S3, in a process that installed its own Temporal Runtime, is refused a start before its worker polls, then publishes a compaction, reads the group back and reports a collector pass',
    { timeout: 600_000 },
    async () => {
      const timed = async <T>(label: string, step: () => Promise<T>): Promise<T> => {
        const started = Date.now();
        const result = await step();
        console.log(`example: ${label} in ${((Date.now() - started) / 1000).toFixed(1)} s`);
        return result;
      };
      const project = join(work, 'metadata-service');
      cpSync(example, project, { recursive: true, filter: (src) => !/[/\\](node_modules|dist|data)$/.test(src) });
      await timed('npm pack', () => run('npm', ['pack', '--pack-destination', work], { cwd: root }));
      const [tarball] = readdirSync(work).filter((f) => f.endsWith('.tgz'));
      renameSync(join(work, tarball as string), join(project, 'compaction-lease.tgz'));
      await timed('npm install', () => run('npm', ['install', '--no-audit', '--no-fund'], { cwd: project }));
      await timed('tsc', () => run('npm', ['run', 'build'], { cwd: project }));
      // Peers: the service's @temporalio/* are the package's, one copy each at the top (a nested second
      // copy of @temporalio/workflow or common breaks instanceof checks and the workflow bundle).
      const { stdout: tree } = await run('npm', ['ls', '--all', '--parseable'], { cwd: project });
      const temporalPackages = tree
        .split('\n')
        .filter((path) => /node_modules[/\\]@temporalio[/\\][^/\\]+$/.test(path));
      expect(temporalPackages.length).toBeGreaterThan(0);
      expect(temporalPackages.filter((path) => !path.startsWith(join(project, 'node_modules', '@temporalio')))).toEqual(
        [],
      );

      const temporal = { PATH: process.env.PATH, TEMPORAL_ADDRESS: inject('temporalAddress') };
      const embedded = {
        ...temporal,
        COMPACTION_TASK_QUEUE: uniqueId('example-tq'),
        TEMPORAL_NAMESPACE: await timed('temporal setup', () => setUpNamespace(project, temporal)),
      };
      const { stdout: onEmbedded, stderr: onEmbeddedErr } = await timed('npm start (embedded)', () =>
        run('npm', ['start', '--silent'], { cwd: project, env: embedded }),
      );
      // The worker loads the package's prebuilt workflow bundle when the service's @temporalio/workflow is the one it
      // holds (its first line names it), and otherwise bundles them itself and warns.
      const bundled = readFileSync(
        join(project, 'node_modules', 'compaction-lease', 'lib', 'workflow-bundle.js'),
        'utf8',
      );
      const installed = (
        JSON.parse(readFileSync(join(project, 'node_modules', '@temporalio', 'workflow', 'package.json'), 'utf8')) as {
          version: string;
        }
      ).version;
      const bundledAtStart = /workflow bundle .* holds @temporalio\/workflow .* bundled at start instead/;
      if (bundled.startsWith(`// @temporalio/workflow ${installed}\n`))
        expect(onEmbeddedErr).not.toMatch(bundledAtStart);
      else expect(onEmbeddedErr).toMatch(bundledAtStart);
      expect(onEmbedded.trim().split('\n')).toEqual([
        `before the worker: NoWorkerPollingError on task queue ${embedded.COMPACTION_TASK_QUEUE}`,
        expect.stringMatching(
          new RegExp(
            `^worker \\S+ on ${inject('temporalAddress')}/${embedded.TEMPORAL_NAMESPACE}, task queue ${embedded.COMPACTION_TASK_QUEUE}, store embedded:data/store.sqlite$`,
          ),
        ),
        'compaction published: 2 inputs, 1 records out',
        'read inode/1 = a2 from 1 segment',
        'collector pass complete: 1 namespaces, 0 objects deleted',
      ]);

      const minio = inject('minio');
      const env = {
        ...temporal,
        TEMPORAL_NAMESPACE: await setUpNamespace(project, temporal),
        COMPACTION_TASK_QUEUE: uniqueId('example-tq'),
        COMPACTION_S3_BUCKET: await createTestBucket(minio),
        COMPACTION_S3_FORCE_PATH_STYLE: 'true',
        AWS_ENDPOINT_URL_S3: minio.endpoint,
        AWS_REGION: minio.region,
        AWS_ACCESS_KEY_ID: minio.accessKey,
        AWS_SECRET_ACCESS_KEY: minio.secretKey,
      };
      const { stdout } = await timed('npm start (S3)', () => run('npm', ['start', '--silent'], { cwd: project, env }));
      expect(stdout.trim().split('\n')).toEqual([
        `before the worker: NoWorkerPollingError on task queue ${env.COMPACTION_TASK_QUEUE}`,
        expect.stringMatching(
          new RegExp(
            `^worker \\S+ on ${inject('temporalAddress')}/${env.TEMPORAL_NAMESPACE}, task queue ${env.COMPACTION_TASK_QUEUE}, store s3://${env.COMPACTION_S3_BUCKET}$`,
          ),
        ),
        'compaction published: 2 inputs, 1 records out',
        'read inode/1 = a2 from 1 segment',
        'collector pass complete: 1 namespaces, 0 objects deleted',
      ]);
    },
  );
});
