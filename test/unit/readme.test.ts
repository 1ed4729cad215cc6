/**
 * The README's TypeScript (and docs/readers.md's) is code that compiles, and its library section is the example CI runs
 * (test/integration/example.test.ts).
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import {
  cloudSearchAttributeCommand,
  SEARCH_ATTRIBUTES,
  searchAttributeCommands,
} from '../../src/client/search-attributes';
import { SETTINGS_ENV, TIMING_ENV } from '../../src/config';
import { S3_ENV } from '../../src/store';

const root = join(__dirname, '..', '..');
const readme = readFileSync(join(root, 'README.md'), 'utf8');
const tsBlocksOf = (markdown: string): string[] =>
  [...markdown.matchAll(/^```ts\n([\s\S]*?)^```$/gm)].map((m) => m[1] as string);
const tsBlocks = [...tsBlocksOf(readme), ...tsBlocksOf(readFileSync(join(root, 'docs', 'readers.md'), 'utf8'))];

describe('README', () => {
  it('shows examples/metadata-service/src/main.ts as its library snippet, unchanged', () => {
    const section = readme.slice(readme.indexOf('## Using it from a metadata service'));
    const [snippet] = [...section.matchAll(/^```ts\n([\s\S]*?)^```$/gm)].map((m) => m[1]);
    expect(snippet).toBe(readFileSync(join(root, 'examples', 'metadata-service', 'src', 'main.ts'), 'utf8'));
  });

  it('lists every environment setting of a worker in its configuration table', () => {
    const table = readme.slice(readme.indexOf('## Configuration'));
    const documented = new Set([...table.matchAll(/^\| `([A-Z0-9_]+)` \|/gm)].map((m) => m[1]));
    const settings = [...Object.values(SETTINGS_ENV), ...Object.values(TIMING_ENV), ...Object.values(S3_ENV)];
    expect(settings.filter((name) => !documented.has(name))).toEqual([]);
  });

  it('registers by hand exactly the search attributes of SEARCH_ATTRIBUTES, each with its type, with the Temporal CLI and with tcld', () => {
    const shBlocks = [...readme.matchAll(/^```sh\n([\s\S]*?)^```$/gm)].map((m) => m[1] as string);
    const manual = shBlocks.filter((block) => block.includes('temporal operator search-attribute create'));
    expect(manual).toEqual([`${searchAttributeCommands('default').join('\n')}\n`]);
    expect(shBlocks.filter((block) => block.includes('tcld '))).toEqual([
      `${cloudSearchAttributeCommand('default')}\n`,
    ]);
    expect(searchAttributeCommands('default')).toHaveLength(Object.keys(SEARCH_ATTRIBUTES).length);
  });

  it('has TypeScript blocks, and each type-checks as an ES module importing the package', { timeout: 120_000 }, () => {
    expect(tsBlocks.length).toBeGreaterThan(0);
    const dir = mkdtempSync(join(tmpdir(), 'readme-'));
    const files = tsBlocks.map((code, i) => {
      const file = join(dir, `block-${i}.mts`);
      writeFileSync(file, code);
      return file;
    });
    const program = ts.createProgram(files, {
      target: ts.ScriptTarget.ES2022,
      module: ts.ModuleKind.ESNext,
      moduleResolution: ts.ModuleResolutionKind.Bundler,
      strict: true,
      noEmit: true,
      skipLibCheck: true,
      types: ['node'],
      typeRoots: [join(root, 'node_modules', '@types')],
      // The example imports the service's own @temporalio/* (the package's peers) beside the package.
      paths: {
        'compaction-lease': [join(root, 'src', 'index.ts')],
        'compaction-lease/errors': [join(root, 'src', 'error-classes.ts')],
        '@temporalio/*': [join(root, 'node_modules', '@temporalio', '*')],
      },
    });
    const errors = ts
      .getPreEmitDiagnostics(program)
      .map((d) => `${d.file?.fileName ?? ''}: ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`);
    expect(errors).toEqual([]);
  });
});
