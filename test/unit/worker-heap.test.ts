/**
 * A worker's memory is mostly its held leases' and what V8 keeps beside them: a young generation
 * grown to 64 MiB a semi-space, an old generation let grow past what it holds live
 * (docs/performance.md). The worker sets V8's flags for both in its running process: the growth,
 * which V8 reads at every full collection (and traces with `--trace-gc-verbose`), and the
 * semi-spaces, which bound the isolates created after it, the workflow threads.
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { PROCESS_SETTINGS } from '../../src/config';

const run = promisify(execFile);
const heapModule = JSON.stringify(join(__dirname, '..', '..', 'src', 'worker', 'heap.ts'));

const GROWTH_ENV = PROCESS_SETTINGS.heapGrowthPercent.env;
const SEMI_SPACE_ENV = PROCESS_SETTINGS.semiSpaceMib.env;
const withoutSettings = ({ [GROWTH_ENV]: _, [SEMI_SPACE_ENV]: __, ...env }: NodeJS.ProcessEnv): NodeJS.ProcessEnv =>
  env;

/** Runs `script` in a node process given `nodeFlags`, after it set its heap flags as a worker does, unless told not. */
async function inWorkerProcess(
  script: string,
  { nodeFlags = [], env = {}, asWorker = true }: { nodeFlags?: string[]; env?: NodeJS.ProcessEnv; asWorker?: boolean },
): Promise<string> {
  const { stdout } = await run(
    process.execPath,
    [...nodeFlags, '--import', 'tsx', '-e', `${asWorker ? `require(${heapModule}).tightenHeap();` : ''} ${script}`],
    { env: { ...withoutSettings(process.env), ...env }, maxBuffer: 64 * 1024 * 1024 },
  );
  return stdout;
}

/** The growth factor V8 traced for the last full collection of such a process. */
async function growthFactor(options: Parameters<typeof inWorkerProcess>[1]): Promise<string | undefined> {
  const stdout = await inWorkerProcess('globalThis.gc();', {
    ...options,
    nodeFlags: ['--expose-gc', '--trace-gc-verbose', ...(options.nodeFlags ?? [])],
  });
  return [...stdout.matchAll(/\[HeapController\] factor (\d+\.\d)/g)].map((m) => m[1]!).at(-1);
}

/** MiB of the young generation of a worker thread that allocated 3 million objects, 20,000 of them live at a time. */
async function threadYoungGenerationMib(options: Parameters<typeof inWorkerProcess>[1]): Promise<number> {
  const thread = `
    const keep = new Array(20000);
    for (let i = 0; i < 3000000; i++) keep[i % keep.length] = { i, s: 'x' + i };
    const young = require('node:v8').getHeapSpaceStatistics().find((s) => s.space_name === 'new_space');
    require('node:worker_threads').parentPort.postMessage(young.space_size);`;
  const script = `new (require('node:worker_threads').Worker)(${JSON.stringify(thread)}, { eval: true })
    .on('message', (bytes) => { console.log(bytes / 2 ** 20); process.exit(0); });`;
  return Number(await inWorkerProcess(script, options));
}

describe("the worker process's old generation growth", () => {
  it('applies to the full collections after it is set, in a process already running', async () => {
    expect(await growthFactor({ env: { [GROWTH_ENV]: '50' } })).toBe('1.5');
  });

  it("is V8's own unless set (the declared default is 0)", async () => {
    expect(PROCESS_SETTINGS.heapGrowthPercent.default).toBe(0);
    const [unset, untouched] = await Promise.all([growthFactor({}), growthFactor({ asWorker: false })]);
    expect(unset).toBeDefined();
    expect(unset).toBe(untouched);
  });

  it('leaves the growth given to node itself', async () => {
    expect(await growthFactor({ nodeFlags: ['--heap-growing-percent=30'], env: { [GROWTH_ENV]: '50' } })).toBe('1.3');
  });

  it("leaves V8's own at 0", async () => {
    const [zero, untouched] = await Promise.all([
      growthFactor({ env: { [GROWTH_ENV]: '0' } }),
      growthFactor({ asWorker: false }),
    ]);
    expect(zero).toBeDefined();
    expect(zero).toBe(untouched);
  });
});

describe("the worker process's young generation", () => {
  it('bounds the threads started after it is set, which V8 otherwise lets grow far larger', async () => {
    const [bounded, untouched] = await Promise.all([
      threadYoungGenerationMib({ env: { [SEMI_SPACE_ENV]: '2' } }),
      threadYoungGenerationMib({ asWorker: false }),
    ]);
    expect(bounded).toBeLessThanOrEqual(2 * 2);
    expect(untouched).toBeGreaterThan(4 * 2);
  });

  it('is the declared default unless set', async () => {
    expect(await threadYoungGenerationMib({})).toBeLessThanOrEqual(2 * PROCESS_SETTINGS.semiSpaceMib.default);
  });
});
