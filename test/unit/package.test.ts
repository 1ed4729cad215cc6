/** What `npm pack` ships: only what a consumer needs (the built library, its docs, the README), never tests, benchmarks or sources; and its docs stand on their own. */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join, posix } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';

const root = join(__dirname, '..', '..');

describe('the packed tarball', () => {
  let packed: string[];
  beforeAll(() => {
    const [pack] = JSON.parse(execFileSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] })) as [{ files: { path: string }[] }];
    packed = pack.files.map((f) => f.path);
  }, 60_000);

  it('holds only lib/, docs/*.md and their screenshots, README.md and package.json', () => {
    const outside = packed.filter((path) => !/^(lib\/.+\.(js|d\.ts)|docs\/[^/]+\.md|docs\/screenshots\/[^/]+\.png|README\.md|package\.json)$/.test(path));
    expect(outside).toEqual([]);
  });

  it('every relative link of its README and docs resolves to a file inside it', () => {
    const broken = packed
      .filter((path) => path.endsWith('.md'))
      .flatMap((doc) =>
        [...readFileSync(join(root, doc), 'utf8').matchAll(/\]\(([^)#\s]+)(?:#[^)\s]*)?\)/g)]
          .map((m) => m[1] as string)
          .filter((target) => !/^[a-z]+:/.test(target))
          .map((target) => ({ doc, target, resolved: posix.normalize(posix.join(dirname(doc), target)) }))
          .filter(({ resolved }) => !packed.includes(resolved)),
      );
    expect(broken).toEqual([]);
  });
});
