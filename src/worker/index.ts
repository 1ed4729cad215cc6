/** A worker of the package's workflows and of the activities of its role (every one by default), on one task queue. */
import { join } from 'node:path';
import { NativeConnection, Runtime, Worker, type WorkerOptions } from '@temporalio/worker';
import { createActivities } from '../activities';
import { requireSearchAttributes } from '../client/search-attributes';
import { referenceCompactor, type Compactor } from '../compactor';
import { jsonRootCodec, type RootCodec } from '../root';
import {
  heartbeatEveryMs,
  PROCESS_SETTINGS,
  settingFromEnv,
  settingSetInEnv,
  workerRoleFromEnv,
  type CompactionSettings,
  type WorkerRole,
} from '../config';
import { requireFitStore, verifyStore, type ObjectStore } from '../store';
import { retryInconclusive } from '../store/probe';
import { temporalTarget } from './connect';
import { workflowSource } from './bundle';
import { tightenHeap } from './heap';
import { requireOneTemporalRuntime } from './runtime';
import { roleTaskQueueFromEnv } from './task-queue';

export {
  COLLECTOR_TASK_QUEUE_ENV,
  collectorTaskQueueFromEnv,
  DEFAULT_TASK_QUEUE,
  roleTaskQueueFromEnv,
  TASK_QUEUE_ENV,
  taskQueueFromEnv,
} from './task-queue';
export {
  installRuntime,
  LOG_LEVEL_ENV,
  METRICS_ENV,
  requireOneTemporalRuntime,
  WORKER_HEARTBEAT_INTERVAL_MS,
} from './runtime';
export { temporalTarget, type TemporalTarget } from './connect';
export { FORMAT_MODULE_ENV, FormatModuleError, loadFormatModule, type FormatModule } from './format-module';

/**
 * A worker's store, settings, Temporal connection and plug-ins; every option not given is read as the environment says.
 */
export interface CreateWorkerOptions {
  /** The object store its activities work on; the caller closes it after the worker stops. */
  readonly store: ObjectStore;
  /** Timings and bounds, from {@link resolveSettings} or {@link settingsFromEnv}. */
  readonly settings: CompactionSettings;
  /** The Temporal connection it polls through, the caller's to close. */
  readonly connection: NativeConnection;
  /** Default: the Temporal namespace the environment names (`TEMPORAL_NAMESPACE`, profile), else `default`. */
  readonly namespace?: string;
  /** Which activities it registers (see {@link WorkerRole}). Default: `COMPACTION_WORKER_ROLE`, else `all`. */
  readonly role?: WorkerRole;
  /**
   * Default: the role's queue: `COMPACTION_COLLECTOR_TASK_QUEUE` for a collector, otherwise (and when that is unset)
   * `COMPACTION_TASK_QUEUE`, else `compaction-lease`: the queue `startCompaction` and the CLI start on.
   */
  readonly taskQueue?: string;
  /**
   * The segment format's compactor (docs/plugins.md); default `referenceCompactor` (`.mseg`). Every
   * worker of a deployment that runs compactions must have the same one.
   */
  readonly compactor?: Compactor;
  /**
   * The root's codec (docs/plugins.md); default `jsonRootCodec` (`root.json`). Compactions publish with it and the
   * collector reads references and retirements with it: every worker of a deployment needs the same.
   */
  readonly rootCodec?: RootCodec;
  /**
   * Passed through to `Worker.create` (slots, cache, identity, bundle, …) over `COMPACTION_WORKER_ACTIVITY_SLOTS` and
   * `COMPACTION_WORKER_CACHED_WORKFLOWS`.
   */
  readonly workerOptions?: Partial<WorkerOptions>;
  /** Where the one line naming the worker's task queue and store goes; default `console.log`. */
  readonly log?: (line: string) => void;
  /** Names the Temporal server in that line (e.g. `127.0.0.1:7233/default`). */
  readonly serverLabel?: string;
  /**
   * Names the format module the plug-ins came from in that line ({@link FormatModule.label}); unset, plug-ins given in
   * code are named as such.
   */
  readonly formatLabel?: string;
  /**
   * `run`: the store probe (`verifyStore`) before the worker is created, and no worker on a store that
   * fails a property; `skip`: for a store verified out of band. Default: `COMPACTION_STORE_CHECK`, else `run`.
   */
  readonly storeCheck?: StoreCheckMode;
}

export const STORE_CHECK_ENV = PROCESS_SETTINGS.storeCheck.env;
export const STORE_CHECK_MODES = PROCESS_SETTINGS.storeCheck.values;
export type StoreCheckMode = (typeof STORE_CHECK_MODES)[number];

/** The mode `COMPACTION_STORE_CHECK` names, `run` when unset; any other value is a `SettingsError`. */
export function storeCheckFromEnv(env?: NodeJS.ProcessEnv): StoreCheckMode {
  return settingFromEnv(PROCESS_SETTINGS, 'storeCheck', env);
}

/**
 * Activity slots of a worker unless `COMPACTION_WORKER_ACTIVITY_SLOTS` says otherwise (why so many: {@link
 * PROCESS_SETTINGS}).
 */
export const DEFAULT_ACTIVITY_SLOTS = PROCESS_SETTINGS.activitySlots.default;

/**
 * Workflow runs a worker keeps cached unless `COMPACTION_WORKER_CACHED_WORKFLOWS` says otherwise (why so few: {@link
 * PROCESS_SETTINGS}).
 */
export const DEFAULT_CACHED_WORKFLOWS = PROCESS_SETTINGS.cachedWorkflows.default;

/** The workflows' folder, for `bundleWorkflowCode` and replay. */
export const WORKFLOWS_PATH = join(__dirname, '..', 'workflows');

/** The folder of the package's modules (lib/ in the build): its workflow bundle is written there by `npm run build`. */
const BUILD_DIR = join(__dirname, '..');

/**
 * A worker of every workflow and its role's activities: the Temporal namespace's search attributes
 * checked first (`SearchAttributesMissingError`), then its store's access verified and the store
 * probed (a {@link StoreUnfitError} names the property it failed). Unset options mean
 * what they mean to the CLI and the worker process (role, task queue, namespace, activity slots from the
 * environment), and the store it writes to is logged once: an unset `COMPACTION_S3_BUCKET` means a local file.
 */
export async function createWorker(options: CreateWorkerOptions): Promise<Worker> {
  // A Runtime of another copy of the SDK would be ignored by this worker, its settings with it.
  requireOneTemporalRuntime();
  const namespace = options.namespace ?? temporalTarget().namespace;
  // A namespace without the attributes the workflows upsert fails every such workflow task, and the runs wait for ever.
  await requireSearchAttributes(options.connection, namespace);
  // Its bucket check too is retried on an inconclusive answer: one slow HEAD under load is no verdict on the
  // credentials.
  await retryInconclusive(() => options.store.verifyAccess());
  // Before any activity can run: every lease and root write rests on the store honouring its conditions.
  if ((options.storeCheck ?? storeCheckFromEnv()) === 'run') {
    requireFitStore(
      await verifyStore(options.store, { clockSafetyMarginMs: options.settings.timing.clockSafetyMarginMs }),
    );
  }
  const role = options.role ?? workerRoleFromEnv();
  const taskQueue = options.taskQueue ?? roleTaskQueueFromEnv(role);
  // Process-wide, before Worker.create starts the workflow threads (whose young generation it bounds) and before the
  // first lease: a worker's memory is mostly its held leases' and what V8 keeps beside them (docs/performance.md).
  tightenHeap();
  const workflows = options.workerOptions?.workflowBundle ? undefined : workflowSource(BUILD_DIR, WORKFLOWS_PATH);
  // A warning on the Runtime's logger (stderr by default), not a line of the worker's own output.
  if (workflows?.whyNotPrebuilt) Runtime.instance().logger.warn(workflows.whyNotPrebuilt);
  const worker = await Worker.create({
    connection: options.connection,
    namespace,
    taskQueue,
    // The build's prebuilt bundle, else the workflows' folder (index.ts in the sources), bundled at start.
    ...workflows?.workerOptions,
    // The one place the plug-ins' defaults apply: every activity below takes both explicitly.
    activities: createActivities(
      {
        store: options.store,
        settings: options.settings,
        compactor: options.compactor ?? referenceCompactor,
        rootCodec: options.rootCodec ?? jsonRootCodec,
      },
      role,
    ),
    // One heartbeat RPC per beat interval and activity, however often the work calls heartbeat (per record
    // batch): every one is a billable action. Cancellation reaches an activity only with a heartbeat that
    // is sent, so a job's activity stops up to one beat interval after the workflow asked it to.
    maxHeartbeatThrottleInterval: heartbeatEveryMs(options.settings),
    maxConcurrentActivityTaskExecutions: DEFAULT_ACTIVITY_SLOTS,
    maxCachedWorkflows: DEFAULT_CACHED_WORKFLOWS,
    ...workerOptionsFromEnv(),
    ...options.workerOptions,
  });
  const log = options.log ?? console.log;
  // Plug-ins are named however they came: a worker reading roots with an unexpected codec shows it here first.
  const inCode = [options.compactor && 'compactor', options.rootCodec && 'rootCodec'].filter(Boolean);
  const format = options.formatLabel ?? (inCode.length ? `given in code (${inCode.join(', ')})` : undefined);
  // A single role is named: in a two-role deployment it tells which credentials the worker should hold.
  log(
    `worker ${options.settings.ownerId}${role === 'all' ? '' : ` (role ${role})`} on ${options.serverLabel ?? `Temporal namespace ${namespace}`}, task queue ${taskQueue}, store ${options.store.description}${format ? `, format ${format}` : ''}`,
  );
  return worker;
}

export const ACTIVITY_SLOTS_ENV = PROCESS_SETTINGS.activitySlots.env;
export const CACHED_WORKFLOWS_ENV = PROCESS_SETTINGS.cachedWorkflows.env;

/**
 * The worker options an operator sets in the environment; a value out of its declared bounds is a `SettingsError`.
 */
export function workerOptionsFromEnv(env?: NodeJS.ProcessEnv): Partial<WorkerOptions> {
  const slots = settingSetInEnv(PROCESS_SETTINGS, 'activitySlots', env);
  const cached = settingSetInEnv(PROCESS_SETTINGS, 'cachedWorkflows', env);
  return {
    ...(slots !== undefined && { maxConcurrentActivityTaskExecutions: slots }),
    ...(cached !== undefined && { maxCachedWorkflows: cached }),
  };
}
