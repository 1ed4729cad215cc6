/**
 * What `npm pack` ships: only what a consumer needs (the built library, its docs, the README), never tests, benchmarks
 * or sources; and its docs stand on their own.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join, posix } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';

const root = join(__dirname, '..', '..');

describe('the packed tarball', () => {
  let packed: string[];
  beforeAll(() => {
    const [pack] = JSON.parse(
      execFileSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], {
        cwd: root,
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'ignore'],
      }),
    ) as [{ files: { path: string }[] }];
    packed = pack.files.map((f) => f.path);
  }, 60_000);

  it('holds only lib/, docs/*.md and their screenshots, README.md and package.json', () => {
    const outside = packed.filter(
      (path) =>
        !/^(lib\/.+\.(js|d\.ts)|docs\/[^/]+\.md|docs\/screenshots\/[^/]+\.png|README\.md|package\.json)$/.test(path),
    );
    expect(outside).toEqual([]);
  });

  it("its README reads right for a consumer: up to its contributors' part, no path into the source repository, no `npm run`, and the command is `npx compaction-lease`", () => {
    const readme = readFileSync(join(root, 'README.md'), 'utf8');
    const contributors = readme.indexOf('## Working on the package');
    expect(contributors).toBeGreaterThan(0);
    const consumer = readme.slice(0, contributors);
    const pointers = [
      ...consumer.matchAll(/(?<![\w/.-])(src|test|scripts|examples|bench|etc|\.ci)\/[\w./-]*|npm run \w+|npx tsx/g),
    ].map((m) => m[0]);
    expect(pointers).toEqual([]);
    expect(consumer).toMatch(/^npx compaction-lease temporal setup/m);
    expect(readme.slice(contributors)).toMatch(/not in the\s+installed package/);
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
