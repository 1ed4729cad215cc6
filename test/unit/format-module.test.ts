/**
 * A format module (`worker --format`, `COMPACTION_FORMAT_MODULE`) is resolved from the current
 * directory, as a path or a package, and its named exports are checked before a worker starts:
 * anything missing is a FormatModuleError naming the module and what it lacks.
 */
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { FormatModuleError, loadFormatModule } from '../../src/worker/format-module';
import { startWorkerFromEnv } from '../../src/worker/from-env';

/** A folder holding `files` (name → source), as a user's project would. */
function project(files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), 'format-module-'));
  for (const [name, source] of Object.entries(files)) {
    mkdirSync(join(dir, name, '..'), { recursive: true });
    writeFileSync(join(dir, name), source);
  }
  return dir;
}

const codec = 'export const rootCodec = { encode: (root) => new Uint8Array(), decode: () => ({}) };\n';

describe('loadFormatModule', () => {
  it('loads the named exports of a module given by a path from the current directory, and names them for the start line', async () => {
    const format = await loadFormatModule('./test/support/binary-format-module.mts', join(__dirname, '..', '..'));
    expect(typeof format.compactor?.compact).toBe('function');
    expect(typeof format.rootCodec?.decode).toBe('function');
    expect(format.label).toBe('./test/support/binary-format-module.mts (compactor, rootCodec)');
  });

  it('resolves a package name from node_modules of the current directory; an export it lacks stays the default', async () => {
    const dir = project({
      'node_modules/my-format/package.json': JSON.stringify({
        name: 'my-format',
        type: 'module',
        exports: './index.js',
      }),
      'node_modules/my-format/index.js': codec,
    });
    const format = await loadFormatModule('my-format', dir);
    expect(format.compactor).toBeUndefined();
    expect(format.label).toBe('my-format (rootCodec)');
  });

  it('a path to no file names the file it looked for', async () => {
    const dir = project({});
    await expect(loadFormatModule('./format.mjs', dir)).rejects.toThrow(
      `format module "./format.mjs" (COMPACTION_FORMAT_MODULE, worker --format) names no file: ${join(dir, 'format.mjs')} does not exist`,
    );
  });

  it('a package not installed there cannot be resolved, naming the directory', async () => {
    const dir = project({});
    await expect(loadFormatModule('no-such-format', dir)).rejects.toThrow(
      new RegExp(`format module "no-such-format" .*cannot be resolved from ${dir}`),
    );
  });

  it('a module with neither export names what it does export', async () => {
    const dir = project({ 'format.mjs': 'export const compactorr = {};\nexport default {};\n' });
    const err = await loadFormatModule('./format.mjs', dir).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(FormatModuleError);
    expect((err as Error).message).toMatch(
      /exports neither `compactor` nor `rootCodec` \(it exports compactorr, default\).*named exports/,
    );
  });

  it('an export that is not the plug-in names the function it lacks', async () => {
    const dir = project({
      'compactor.mjs': 'export const compactor = { run() {} };\n',
      'codec.mjs': 'export const rootCodec = { encode() {} };\n',
    });
    await expect(loadFormatModule('./compactor.mjs', dir)).rejects.toThrow(
      /exports a `compactor` without a compact function/,
    );
    await expect(loadFormatModule('./codec.mjs', dir)).rejects.toThrow(
      /exports a `rootCodec` without a decode function/,
    );
  });

  it('a module that throws while loading names the file and the error', async () => {
    const dir = project({ 'broken.mjs': "throw new Error('boom');\n" });
    await expect(loadFormatModule('./broken.mjs', dir)).rejects.toThrow(/cannot be loaded from .*broken\.mjs \(boom\)/);
  });

  it('startWorkerFromEnv refuses a COMPACTION_FORMAT_MODULE that is not a format before it connects', async () => {
    const dir = project({ 'format.mjs': 'export const nothing = 1;\n' });
    const env = { COMPACTION_FORMAT_MODULE: join(dir, 'format.mjs'), TEMPORAL_ADDRESS: '127.0.0.1:1' };
    await expect(startWorkerFromEnv({ installRuntime: false, env })).rejects.toThrow(FormatModuleError);
  });
});
