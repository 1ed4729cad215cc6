/** What `npm pack` ships: only what a consumer needs (the built library, its docs, the README), never tests, benchmarks or sources. */
import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';

describe('the packed tarball', () => {
  it('holds only lib/, docs/*.md, README.md and package.json', { timeout: 60_000 }, () => {
    const [pack] = JSON.parse(execFileSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] })) as [{ files: { path: string }[] }];
    const outside = pack.files.map((f) => f.path).filter((path) => !/^(lib\/.+\.(js|d\.ts)|docs\/[^/]+\.md|README\.md|package\.json)$/.test(path));
    expect(outside).toEqual([]);
  });
});
