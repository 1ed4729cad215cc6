/**
 * A worker started from the build loads the workflows `npm run build` bundled, and runs no webpack of its own, when
 * the bundle holds the `@temporalio/workflow` the process loads; otherwise it bundles them at start, saying why when a
 * bundle was there.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { WORKFLOWS_PATH } from '../../src/worker';
import { installedWorkflowSdkVersion, workflowSource, writeWorkflowBundle } from '../../src/worker/bundle';

describe('the workflows a worker loads', () => {
  const dirs: string[] = [];
  const buildDir = () => {
    const dir = mkdtempSync(join(tmpdir(), 'bundle-'));
    dirs.push(dir);
    return dir;
  };
  afterEach(() => {
    for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
  });

  it('are the folder, bundled at start, when the build holds no bundle (the sources)', () => {
    const dir = buildDir();
    expect(workflowSource(dir, join(dir, 'workflows'))).toEqual({
      workerOptions: { workflowsPath: join(dir, 'workflows') },
    });
  });

  it('are the bundle the build wrote, stamped with the installed @temporalio/workflow', async () => {
    const dir = buildDir();
    const codePath = await writeWorkflowBundle(dir, WORKFLOWS_PATH);
    const code = readFileSync(codePath, 'utf8');
    expect(code.split('\n')[0]).toBe(`// @temporalio/workflow ${installedWorkflowSdkVersion()}`);
    expect(code).toContain('compactionWorkflow');
    expect(workflowSource(dir, WORKFLOWS_PATH)).toEqual({ workerOptions: { workflowBundle: { codePath } } });
  }, 60_000);

  it('is said in the README with the @temporalio/workflow the build bundles', () => {
    const readme = readFileSync(join(__dirname, '..', '..', 'README.md'), 'utf8').replace(/\s+/g, ' ');
    expect(readme).toContain(`ships them bundled with ${installedWorkflowSdkVersion()},`);
  });

  it.each([
    ['another @temporalio/workflow', '// @temporalio/workflow 0.0.1\nvar __TEMPORAL__;\n', '0.0.1'],
    ['no stamp', 'var __TEMPORAL__;\n', '(unnamed)'],
  ])('are the folder when the bundle holds %s, and the worker says why', (_, code, named) => {
    const dir = buildDir();
    writeFileSync(join(dir, 'workflow-bundle.js'), code);
    const source = workflowSource(dir, join(dir, 'workflows'));
    expect(source.workerOptions).toEqual({ workflowsPath: join(dir, 'workflows') });
    expect(source.whyNotPrebuilt).toContain(`holds @temporalio/workflow ${named}`);
    expect(source.whyNotPrebuilt).toContain(`this process loads ${installedWorkflowSdkVersion()}`);
  });
});
