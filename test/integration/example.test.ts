/**
 * examples/metadata-service as a new user builds it: the package packed (`npm pack`, prepack builds
 * it), the tarball and the example's own dependencies installed from the registry into a copy of
 * the example, type-checked and compiled by its own tsconfig, then run against the shared Temporal
 * dev server and a fresh MinIO bucket. Install scripts are skipped, so the native SQLite of the
 * embedded store is not built (minutes on two cores): the example runs on S3 here.
 */
import { execFile } from 'node:child_process';
import { cpSync, mkdtempSync, readdirSync, renameSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it, inject } from 'vitest';
import { createTestBucket } from '../support/stores';
import { connectClient, uniqueId } from '../support/temporal';

const run = promisify(execFile);
const root = join(__dirname, '..', '..');
const example = join(root, 'examples', 'metadata-service');

describe('examples/metadata-service', () => {
  const work = mkdtempSync(join(tmpdir(), 'example-'));
  afterAll(async () => {
    rmSync(work, { recursive: true, force: true });
    // The example ensures the default collector schedule on the shared server; its task queue has no worker any more.
    const { client, close } = await connectClient();
    await client.schedule.getHandle('compaction-gc').delete().catch(() => undefined);
    await close();
  });

  it('installs from the packed tarball, type-checks, and publishes a compaction and reports a collector pass', { timeout: 600_000 }, async () => {
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
    await timed('npm install', () => run('npm', ['install', '--ignore-scripts', '--no-audit', '--no-fund'], { cwd: project }));
    await timed('tsc', () => run('npm', ['run', 'build'], { cwd: project }));

    const minio = inject('minio');
    const env = {
      PATH: process.env.PATH,
      TEMPORAL_ADDRESS: inject('temporalAddress'),
      COMPACTION_TASK_QUEUE: uniqueId('example-tq'),
      COMPACTION_S3_BUCKET: await createTestBucket(minio),
      COMPACTION_S3_FORCE_PATH_STYLE: 'true',
      AWS_ENDPOINT_URL_S3: minio.endpoint,
      AWS_REGION: minio.region,
      AWS_ACCESS_KEY_ID: minio.accessKey,
      AWS_SECRET_ACCESS_KEY: minio.secretKey,
    };
    const { stdout } = await timed('npm start', () => run('npm', ['start', '--silent'], { cwd: project, env }));
    expect(stdout.trim().split('\n')).toEqual([
      expect.stringMatching(new RegExp(`^worker \\S+ on ${inject('temporalAddress')}/default, task queue ${env.COMPACTION_TASK_QUEUE}, store s3://${env.COMPACTION_S3_BUCKET}$`)),
      'compaction published: 2 inputs, 1 records out',
      'collector pass complete: 1 namespaces, 0 objects deleted',
    ]);
  });
});
