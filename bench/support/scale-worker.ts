/**
 * The scale benchmark's worker process: src/worker/main.ts's worker (configured by the environment
 * alone; from the package's build in the folder `SCALE_BUILT` names, if set) with the test compactor,
 * so every job stays in the compacting phase and only its lease keeper works. `SCALE_HOLD_MS` is how
 * long a job's work lasts (default: until cancelled);
 * `SCALE_PUBLISH` makes the job write one output when its work ends, so a group of several inputs
 * publishes; `SCALE_WORKER_OPTIONS` (JSON) overrides worker options, to measure alternatives to the defaults;
 * `SCALE_BARE` replaces the workflows and activities by the bare floor's (./bare-hold: an activity that
 * only heartbeats and waits), the worker otherwise built alike. On SIGUSR2 the worker prints
 * {@link MEMORY_LINE}, after writing a V8 heap snapshot to `SCALE_HEAP_SNAPSHOT` when that is set.
 */
import { join } from 'node:path';
import { getHeapSpaceStatistics, writeHeapSnapshot, type HeapInfo, type HeapSpaceInfo } from 'node:v8';
import threads from 'node:worker_threads';
import type { WorkerOptions } from '@temporalio/worker';
import type { Compactor } from '../../src/compactor';
import { bareHoldActivities } from './bare-hold/activity';

/** The package's modules the worker runs, loaded from one place only (src/worker/main.ts's, and no more). */
interface WorkerModules {
  readonly fromEnv: typeof import('../../src/worker/from-env');
  readonly config: typeof import('../../src/config');
  readonly waiting: typeof import('../../src/compactor/waiting');
}

/**
 * The package's modules from its build (the folder `SCALE_BUILT` names: the code a user installs) or from its
 * sources under tsx, which gives every closure created per call a name property of its own (esbuild's `keepNames`).
 */
function workerModules(): WorkerModules {
  const root = process.env.SCALE_BUILT || join(__dirname, '..', '..', 'src');
  /* eslint-disable @typescript-eslint/no-require-imports -- the folder is chosen at run time */
  return {
    fromEnv: require(join(root, 'worker', 'from-env')) as WorkerModules['fromEnv'],
    config: require(join(root, 'config')) as WorkerModules['config'],
    waiting: require(join(root, 'compactor', 'waiting')) as WorkerModules['waiting'],
  };
  /* eslint-enable @typescript-eslint/no-require-imports */
}

/** `compactor`, then one output of one record: a job whose group has several inputs publishes it. */
function writingOneOutput(compactor: Compactor): Compactor {
  /* eslint-disable @typescript-eslint/no-require-imports -- loaded only by a worker that publishes */
  const { outputSegmentKey } = require('../../src/compactor') as typeof import('../../src/compactor');
  const { encodeSegment } = require('../../src/segments') as typeof import('../../src/segments');
  /* eslint-enable @typescript-eslint/no-require-imports */
  return {
    async compact(attempt) {
      await compactor.compact(attempt);
      const key = outputSegmentKey(attempt.job, 0);
      const bytes = encodeSegment([{ key: 'k', seq: 1, value: 'v' }]);
      await attempt.store.put(key, bytes);
      return { outputs: [key], recordsOut: 1, bytesOut: bytes.byteLength };
    },
  };
}

/** The line a parent waits for before it starts work. */
export const READY_LINE = 'scale worker ready';
/** The line reporting the worker's memory ({@link WorkerMemory} as JSON follows), after its heap snapshot if asked. */
export const MEMORY_LINE = 'scale worker memory';

/** The main thread's memory and each other thread's V8 heap (the SDK runs workflows in worker threads). */
export interface WorkerMemory {
  readonly main: NodeJS.MemoryUsage;
  /** The main thread's heap by space (young generation, old, code, large objects), before any snapshot. */
  readonly spaces: HeapSpaceInfo[];
  readonly threads: HeapInfo[];
}

/**
 * The worker threads started from here on, for their heap statistics: the SDK looks up `Worker` on the module when it
 * starts its workflow threads, after this has run.
 */
function trackThreads(): threads.Worker[] {
  const started: threads.Worker[] = [];
  const Original = threads.Worker;
  threads.Worker = class extends Original {
    constructor(...args: ConstructorParameters<typeof threads.Worker>) {
      super(...args);
      started.push(this);
    }
  };
  return started;
}

if (require.main === module) {
  const holdMs = process.env.SCALE_HOLD_MS ? Number(process.env.SCALE_HOLD_MS) : Infinity;
  const { fromEnv, config, waiting: compactors } = workerModules();
  const settings = config.settingsFromEnv();
  const bare: Partial<WorkerOptions> = process.env.SCALE_BARE
    ? {
        workflowsPath: join(__dirname, 'bare-hold', 'workflows.ts'),
        activities: bareHoldActivities(settings.timing.leaseRefreshIntervalMs),
      }
    : {};
  const workerOptions = {
    ...bare,
    ...(JSON.parse(process.env.SCALE_WORKER_OPTIONS || '{}') as Partial<WorkerOptions>),
  };
  const snapshotPath = process.env.SCALE_HEAP_SNAPSHOT;
  const started = trackThreads();
  process.on('SIGUSR2', () => {
    const spaces = getHeapSpaceStatistics();
    void Promise.all(started.filter((t) => t.threadId >= 0).map((t) => t.getHeapStatistics())).then((heaps) => {
      if (snapshotPath) writeHeapSnapshot(snapshotPath);
      const memory: WorkerMemory = { main: process.memoryUsage(), spaces, threads: heaps };
      console.log(`${MEMORY_LINE}: ${JSON.stringify(memory)}`);
    });
  });
  const waiting = compactors.waitingCompactor({ holdMs, beatEveryMs: settings.heartbeatTimeoutMs / 3 });
  // As src/worker/main.ts serves (lib/ holds no such module: no entry point reaches it).
  fromEnv
    .startWorkerFromEnv({
      compactor: process.env.SCALE_PUBLISH ? writingOneOutput(waiting) : waiting,
      workerOptions,
      log: (line) => console.log(`${READY_LINE}: ${line}`),
    })
    .then(fromEnv.serveUntilStopped)
    .catch((err: unknown) => {
      console.error(err instanceof Error ? `${err.name}: ${err.message}` : err);
      process.exit(1);
    });
}
