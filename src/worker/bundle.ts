/**
 * The workflows' code as a worker loads it. `npm run build` bundles them beside the build, so a worker started from
 * it never runs webpack: one bundling at start keeps about 25 MiB of the worker's heap for the life of the process
 * (docs/performance.md). The bundle holds the `@temporalio/workflow` it was built with, which
 * must be the worker's own: built with another, or absent (the sources, under tsx), the worker bundles at start.
 */
import { closeSync, existsSync, openSync, readFileSync, readSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { bundleWorkflowCode, type Logger, type WorkerOptions } from '@temporalio/worker';

/** The bundle's file, beside the build's folders. */
const BUNDLE_FILE = 'workflow-bundle.js';
/** The bundle's first line names the `@temporalio/workflow` it holds. */
const STAMP = '// @temporalio/workflow ';

/** The `@temporalio/workflow` version the bundle at `codePath` holds, from its first line; undefined when unstamped. */
function bundledWorkflowSdkVersion(codePath: string): string | undefined {
  const head = Buffer.alloc(200);
  const fd = openSync(codePath, 'r');
  try {
    const firstLine = head
      .subarray(0, readSync(fd, head, 0, head.length, 0))
      .toString('utf8')
      .split('\n')[0]!;
    return firstLine.startsWith(STAMP) ? firstLine.slice(STAMP.length).trim() : undefined;
  } finally {
    closeSync(fd);
  }
}

/** The `@temporalio/workflow` this process loads: the bundle's must be the same. */
export function installedWorkflowSdkVersion(): string {
  const manifest = require.resolve('@temporalio/workflow/package.json');
  return (JSON.parse(readFileSync(manifest, 'utf8')) as { version: string }).version;
}

/** Where a worker loads its workflows from (the prebuilt bundle, or their folder), and why not a bundle that exists. */
export interface WorkflowSource {
  readonly workerOptions: Pick<WorkerOptions, 'workflowBundle' | 'workflowsPath'>;
  readonly whyNotPrebuilt?: string;
}

/**
 * The prebuilt bundle in `buildDir` when it holds the installed `@temporalio/workflow`, else the workflows' folder
 * (bundled at start); `whyNotPrebuilt` is set when a bundle exists but cannot be used.
 */
export function workflowSource(buildDir: string, workflowsPath: string): WorkflowSource {
  const codePath = join(buildDir, BUNDLE_FILE);
  if (!existsSync(codePath)) return { workerOptions: { workflowsPath } };
  const built = bundledWorkflowSdkVersion(codePath);
  const installed = installedWorkflowSdkVersion();
  if (built === installed) return { workerOptions: { workflowBundle: { codePath } } };
  return {
    workerOptions: { workflowsPath },
    whyNotPrebuilt: `the package's workflow bundle ${codePath} holds @temporalio/workflow ${built ?? '(unnamed)'}, this process loads ${installed}: bundled at start instead (about 25 MiB more of the worker's heap; install the bundle's @temporalio/workflow, or rebuild the package, to use it)`,
  };
}

/** Bundles the workflows of `workflowsPath` into `buildDir`, its first line naming its `@temporalio/workflow`. */
export async function writeWorkflowBundle(buildDir: string, workflowsPath: string, logger?: Logger): Promise<string> {
  const { code } = await bundleWorkflowCode({ workflowsPath, ...(logger && { logger }) });
  const codePath = join(buildDir, BUNDLE_FILE);
  writeFileSync(codePath, `${STAMP}${installedWorkflowSdkVersion()}\n${code}`);
  return codePath;
}
