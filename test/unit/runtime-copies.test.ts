/**
 * A service whose node_modules holds a second copy of @temporalio/worker (a version outside the peer
 * range, or a nested install) installs its Runtime through that copy; this package's workers, built
 * by its own copy, would run on a Runtime of their own, the service's logger and metrics silently
 * ignored. installRuntime and createWorker refuse it, naming both copies and the fix.
 */
import { execFile } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';

const run = promisify(execFile);
const root = join(__dirname, '..', '..');
const modules = join(root, 'node_modules');

/** A project whose node_modules links every package of this one's, except a real second copy of @temporalio/worker. */
function projectWithSecondWorkerCopy(): string {
  const dir = mkdtempSync(join(tmpdir(), 'runtime-copies-'));
  const own = join(dir, 'node_modules');
  mkdirSync(join(own, '@temporalio'), { recursive: true });
  for (const entry of readdirSync(modules))
    if (entry !== '@temporalio') symlinkSync(join(modules, entry), join(own, entry));
  for (const entry of readdirSync(join(modules, '@temporalio'))) {
    if (entry === 'worker')
      cpSync(join(modules, '@temporalio', 'worker'), join(own, '@temporalio', 'worker'), {
        recursive: true,
        dereference: true,
      });
    else symlinkSync(join(modules, '@temporalio', entry), join(own, '@temporalio', entry));
  }
  return dir;
}

describe('a Temporal Runtime installed through a second copy of @temporalio/worker', () => {
  const dir = projectWithSecondWorkerCopy();
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it(
    'is refused by installRuntime and createWorker, naming both copies and the fix; with one copy, installRuntime installs',
    { timeout: 60_000 },
    async () => {
      const script = join(dir, 'service.ts');
      writeFileSync(
        script,
        `
      const report = async (what: string, fn: () => unknown) => {
        try { console.log(what, 'ok', String(await fn())); } catch (err) { console.log(what, (err as Error).name, (err as Error).message); }
      };
      const { installRuntime } = require(${JSON.stringify(join(root, 'src', 'worker', 'runtime.ts'))});
      const { createWorker } = require(${JSON.stringify(join(root, 'src', 'worker', 'index.ts'))});
      if (process.argv.includes('--second-copy')) {
        // The service's own copy, the one its node_modules resolves first.
        const copy = require('@temporalio/worker');
        copy.Runtime.install({ logger: new copy.DefaultLogger('ERROR') });
      }
      void report('installRuntime', () => installRuntime({})).then(() =>
        // Refused before it touches its connection or store.
        process.argv.includes('--second-copy') ? report('createWorker', () => createWorker({ store: {}, settings: {}, connection: {} })) : undefined,
      );
      `,
      );
      const withCopy = await run(process.execPath, ['--import', 'tsx', script, '--second-copy'], { cwd: root });
      const [installed, created] = withCopy.stdout.trim().split('\n');
      expect(created).toMatch(
        /^createWorker SettingsError this process has a Temporal Runtime from a second copy of @temporalio\/worker/,
      );
      expect(installed).toMatch(
        new RegExp(
          `^installRuntime SettingsError this process has a Temporal Runtime from a second copy of @temporalio/worker \\(${dir.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}/node_modules/@temporalio/worker/lib/runtime\\.js\\), ` +
            "which this package's workers \\(\\S+/node_modules/@temporalio/worker/lib/runtime\\.js\\) cannot see: .*`npm dedupe`",
        ),
      );
      const alone = await run(process.execPath, ['--import', 'tsx', script], { cwd: root });
      expect(alone.stdout.trim()).toBe('installRuntime ok installed');
    },
  );
});
