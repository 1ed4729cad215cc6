/**
 * The package's three entry points as a consumer loads them: `npm pack` (prepack builds it), the
 * tarball installed into an empty project with its peers from the registry, then `compaction-lease`,
 * `compaction-lease/errors` and `compaction-lease/testing` loaded by `require` and by ESM `import`. And the
 * tarball's lib/ holds only what an entry point reaches (the main entry, ./errors, ./testing, the CLI,
 * and the workflows a worker bundles by path), following the built files' own imports.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, posix, relative } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const run = promisify(execFile);
const root = join(__dirname, '..', '..');

/** A name of each entry, and a name each must not have: a test helper stays out of the main entry. */
const PROBE = `
  const main = ENTRY('compaction-lease');
  const testing = ENTRY('compaction-lease/testing');
  const errors = ENTRY('compaction-lease/errors');
  console.log(JSON.stringify({
    main: [typeof main.startCompaction, typeof main.writeInputSegment, typeof main.shrunkTiming, typeof main.RootCorruptError],
    errors: [typeof errors.RootCorruptError, errors.NoWorkerPollingError.prototype instanceof errors.TypedError, typeof errors.startCompaction],
    testing: [typeof testing.startTemporalDevServer, typeof testing.shrunkTiming, typeof testing.checkFormat, typeof testing.startCompaction],
  }));
`;
const EXPECTED = {
  main: ['function', 'function', 'undefined', 'undefined'],
  errors: ['function', true, 'undefined'],
  testing: ['function', 'function', 'function', 'undefined'],
};

/** Every file of `lib` reached from `entries` through the relative imports of the built .js and .d.ts files. */
function reachedFiles(lib: string, entries: readonly string[]): Set<string> {
  const reached = new Set<string>();
  const pending = entries.flatMap((entry) => [`${entry}.js`, `${entry}.d.ts`]);
  while (pending.length > 0) {
    const file = pending.pop() as string;
    if (reached.has(file) || !existsSync(join(lib, file))) continue;
    reached.add(file);
    const text = readFileSync(join(lib, file), 'utf8');
    for (const m of text.matchAll(/(?:require\(|from |import\()["'](\.{1,2}\/[^"']+)["']/g)) {
      const target = posix.normalize(posix.join(posix.dirname(file), (m[1] as string).replace(/\.js$/, '')));
      const candidates = [target, `${target}/index`];
      for (const base of candidates) pending.push(`${base}.js`, `${base}.d.ts`);
    }
  }
  return reached;
}

function filesUnder(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => relative(dir, join(entry.parentPath, entry.name)).split('\\').join('/'));
}

describe('the packed package', () => {
  const work = mkdtempSync(join(tmpdir(), 'package-entries-'));
  const project = join(work, 'consumer');
  afterAll(() => rmSync(work, { recursive: true, force: true }));

  beforeAll(async () => {
    await run('npm', ['pack', '--pack-destination', work], { cwd: root });
    const [tarball] = readdirSync(work).filter((f) => f.endsWith('.tgz'));
    await run('mkdir', [project]);
    writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'consumer', version: '0.0.0', private: true }));
    await run('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', join(work, tarball as string)], {
      cwd: project,
    });
  }, 600_000);

  it('loads compaction-lease, compaction-lease/errors and compaction-lease/testing by require, on Node 24', async () => {
    const { stdout } = await run('node', ['-e', `const ENTRY = require;${PROBE}`], { cwd: project });
    expect(process.version).toMatch(/^v24\./);
    expect(JSON.parse(stdout)).toEqual(EXPECTED);
  });

  it('loads all three by ESM import, every name of the CommonJS build found by Node', async () => {
    const esm = `const ENTRY = (name) => modules[name];\nconst modules = { 'compaction-lease': await import('compaction-lease'), 'compaction-lease/errors': await import('compaction-lease/errors'), 'compaction-lease/testing': await import('compaction-lease/testing') };${PROBE}`;
    const { stdout } = await run('node', ['--input-type=module', '-e', esm], { cwd: project });
    expect(JSON.parse(stdout)).toEqual(EXPECTED);
    const named = `import { startCompaction } from 'compaction-lease'; import { startMinio } from 'compaction-lease/testing'; console.log(typeof startCompaction, typeof startMinio);`;
    expect((await run('node', ['--input-type=module', '-e', named], { cwd: project })).stdout.trim()).toBe(
      'function function',
    );
  });

  it('ships in lib/ only what the entry points, the CLI and the bundled workflows reach', () => {
    const lib = join(project, 'node_modules', 'compaction-lease', 'lib');
    const pkg = JSON.parse(readFileSync(join(lib, '..', 'package.json'), 'utf8')) as {
      bin: Record<string, string>;
      exports: Record<string, { default?: string }>;
    };
    const entries = [
      ...Object.values(pkg.exports).flatMap((e) => (typeof e === 'object' && e.default ? [e.default] : [])),
      ...Object.values(pkg.bin),
      // The workflows: the build's bundle, which a worker loads by path, and their folder (WORKFLOWS_PATH), which it
      // bundles at start when the bundle holds another @temporalio/workflow (src/worker/bundle.ts).
      'lib/workflow-bundle.js',
      'lib/workflows/index.js',
    ].map((file) => posix.relative('lib', posix.normalize(file)).replace(/\.js$/, ''));
    expect(entries).toEqual(expect.arrayContaining(['index', 'error-classes', 'testing', 'cli/index']));
    const reached = reachedFiles(lib, entries);
    const shipped = filesUnder(lib);
    expect(shipped.filter((file) => !reached.has(file))).toEqual([]);
    // The walk found what it should: the servers ./testing starts, and not those only this repository's tests and
    // scripts start.
    expect(shipped).toEqual(
      expect.arrayContaining([
        'testing.js',
        'devservers/temporal.js',
        'devservers/minio.js',
        'workflows/gc.js',
        'workflow-bundle.js',
      ]),
    );
    expect(shipped.filter((file) => /^(main|worker\/main|devservers\/(index|moto|seaweedfs))\./.test(file))).toEqual(
      [],
    );
  });
});
