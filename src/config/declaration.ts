/**
 * Every setting of the package, declared once: its environment variable (none: an option given in
 * code only), its type and bounds, its default and one line saying what it does. Parsing
 * (src/config/environment.ts), the bounds of options given in code, and the docs' settings tables (held
 * to this by test/unit/docs-true.test.ts) are derived from these tables. Pure and import-free (types
 * aside), so workflow code imports its defaults.
 *
 * A default is a value, or `derive`d from other settings' values (their own defaults when unset):
 * {@link applyDefaults} applies both, in the tables' order, so a setting is derived only from settings
 * declared before it.
 */
import type { Timing } from './timing';

/** A whole number from `min` to `max`; `unit` names what it counts, for messages and docs. */
export interface WholeNumber {
  readonly kind: 'whole';
  readonly unit: 'ms' | 'bytes' | 'bytes/s' | 'count';
  readonly min: number;
  readonly max: number;
}
/** One of `values`; an environment value is matched to their text (`ignoreCase`: in any case). */
export interface Choice<V extends string | number = string | number> {
  readonly kind: 'choice';
  readonly values: readonly V[];
  readonly ignoreCase?: boolean;
}
/** Text of `minLength` to `maxLength` characters. */
export interface Text {
  readonly kind: 'text';
  readonly minLength?: number;
  readonly maxLength?: number;
}
/** `true` or `false`. */
export interface Flag {
  readonly kind: 'flag';
}

export type SettingValue = number | string | boolean;

/** The type of a declared setting's value. */
export type SettingType<D> = D extends { kind: 'whole' }
  ? number
  : D extends { kind: 'choice'; values: readonly (infer V)[] }
    ? V
    : D extends { kind: 'flag' }
      ? boolean
      : string;

export type SettingDeclaration = (WholeNumber | Choice | Text | Flag) & {
  /** The environment variable that sets it; absent: an option of code only. */
  readonly env?: `COMPACTION_${string}`;
  /** What it does, in one line. */
  readonly doc: string;
  /** Its value when unset; absent with no `derive`: unset means off (or, where `unsetMeans` says, what it says). */
  readonly default?: SettingValue;
  /** Its value when unset, from the values of settings declared before it. */
  readonly derive?: (values: never) => SettingValue;
  /** What an unset setting without a value default means, where the code, not a value, decides it. */
  readonly unsetMeans?: string;
};

const MAX = Number.MAX_SAFE_INTEGER;
const ms = (min = 1): WholeNumber => ({ kind: 'whole', unit: 'ms', min, max: MAX });
const bytes = (min = 1): WholeNumber => ({ kind: 'whole', unit: 'bytes', min, max: MAX });
const count = (min: number, max = MAX): WholeNumber => ({ kind: 'whole', unit: 'count', min, max });
const text = (minLength = 1, maxLength?: number): Text => ({
  kind: 'text',
  minLength,
  ...(maxLength !== undefined && { maxLength }),
});
type Times = Pick<
  Timing,
  | 'leaseRefreshIntervalMs'
  | 'publicationBudgetMs'
  | 'operationDeadlineMs'
  | 'clockSafetyMarginMs'
  | 'gcMinGraceMs'
  | 'leaseExpiryMs'
  | 'writerBudgetMs'
>;

/**
 * The protocol's timings (spec section 4), in the order their defaults derive; a bad value is a `TimingConfigError`.
 */
export const TIMING_SETTINGS = {
  /** @default 300_000 (5 min) */
  leaseRefreshIntervalMs: {
    ...ms(),
    env: 'COMPACTION_LEASE_REFRESH_INTERVAL_MS',
    default: 300_000,
    doc: 'how often a job refreshes its lease',
  },
  /** @default 900_000 (15 min) */
  publicationBudgetMs: {
    ...ms(),
    env: 'COMPACTION_PUBLICATION_BUDGET_MS',
    default: 900_000,
    doc: 'from the refresh at the top of a publication attempt to the root CAS',
  },
  /** @default 150_000 (2.5 min) */
  operationDeadlineMs: {
    ...ms(),
    env: 'COMPACTION_OPERATION_DEADLINE_MS',
    default: 150_000,
    doc: "one store request until its response, the SDK's retries included",
  },
  /** @default 180_000 (3 min) */
  clockSafetyMarginMs: {
    ...ms(),
    env: 'COMPACTION_CLOCK_SAFETY_MARGIN_MS',
    default: 180_000,
    doc: "allowed error between host clocks and the store's `LastModified`",
  },
  /** @default budget + deadline + margin = 1_230_000 */
  gcMinGraceMs: {
    ...ms(),
    env: 'COMPACTION_GC_MIN_GRACE_MS',
    derive: (t: Times) => t.publicationBudgetMs + t.operationDeadlineMs + t.clockSafetyMarginMs,
    doc: "T, the collector's minimum grace: at least budget + deadline + margin",
  },
  /** @default max(5 × refresh, T) = 1_500_000 */
  leaseExpiryMs: {
    ...ms(),
    env: 'COMPACTION_LEASE_EXPIRY_MS',
    derive: (t: Times) => Math.max(5 * t.leaseRefreshIntervalMs, t.gcMinGraceMs),
    doc: 'an active lease is live while `now <= heartbeat_at_ms + expiry`',
  },
  /** @default expiry + T = 2_730_000 */
  stagingGraceMs: {
    ...ms(),
    env: 'COMPACTION_STAGING_GRACE_MS',
    derive: (t: Times) => t.leaseExpiryMs + t.gcMinGraceMs,
    doc: 'minimum age before an unowned staged object may be deleted',
  },
  /** @default expiry + T = 2_730_000 */
  readerGraceMs: {
    ...ms(),
    env: 'COMPACTION_READER_GRACE_MS',
    derive: (t: Times) => t.leaseExpiryMs + t.gcMinGraceMs,
    doc: 'how long a segment a compaction replaced stays after its retirement (spec 6a.2)',
  },
  /** @default 900_000 (15 min) */
  writerBudgetMs: {
    ...ms(),
    env: 'COMPACTION_WRITER_BUDGET_MS',
    default: 900_000,
    doc: "from before a writer's segment PUT until each root CAS that registers it is sent",
  },
  /** @default max(24 h, writer budget + deadline + margin) = 86_400_000 */
  lostWriteGraceMs: {
    ...ms(),
    env: 'COMPACTION_LOST_WRITE_GRACE_MS',
    derive: (t: Times) => Math.max(86_400_000, t.writerBudgetMs + t.operationDeadlineMs + t.clockSafetyMarginMs),
    doc: 'age before a segment the root neither names nor retires goes as a lost write',
  },
} as const satisfies Record<keyof Timing, SettingDeclaration>;

/** A worker's own settings beside the timings (`CompactionSettings`); a bad value is a `SettingsError`. */
export const WORKER_SETTINGS = {
  /** @default `{pid}@{hostname}` of the process (applied in src/config/settings.ts, where the process is known) */
  ownerId: {
    ...text(1, 256),
    env: 'COMPACTION_OWNER_ID',
    unsetMeans: '{pid}@{hostname}',
    doc: '`owner_id` written into every lease, for an operator reading it',
  },
  /** @default 67_108_864 (64 MiB) */
  targetSegmentBytes: {
    ...bytes(1024),
    env: 'COMPACTION_TARGET_SEGMENT_BYTES',
    default: 64 * 1024 * 1024,
    doc: 'uncompressed bytes at which an output segment is closed; bounds memory',
  },
  /** @default 128 */
  maxFanIn: {
    ...count(2),
    env: 'COMPACTION_MAX_FAN_IN',
    default: 128,
    doc: 'most sources one merge reads at once; a wider group merges in passes through runs',
  },
  /** @default 2 (v2: more records per CPU-second in fewer bytes; `1` for readers that read only v1) */
  segmentFormat: {
    kind: 'choice',
    values: [1, 2] as const,
    env: 'COMPACTION_SEGMENT_FORMAT',
    default: 2,
    doc: 'the segment format version the reference compactor writes its outputs in',
  },
  /** @default 4_294_967_296 (4 GiB) */
  maxInputSegmentBytes: {
    ...bytes(),
    env: 'COMPACTION_MAX_INPUT_SEGMENT_BYTES',
    default: 4 * 1024 ** 3,
    doc: 'an input segment larger than this (by HEAD) ends the job as `InputTooLarge`',
  },
  /**
   * Refresh interval + operation deadline: a lease keeper then beats once per refresh, when it lands,
   * so a job costs Temporal a heartbeat per refresh. At the defaults (7.5 min) a dead worker's retried
   * keeper still refreshes within half the lease expiry of the death: timeout + keeper retry delay +
   * deadline = 10 min against 12.5.
   * @default refresh + deadline = 450_000
   */
  heartbeatTimeoutMs: {
    ...ms(1000),
    env: 'COMPACTION_HEARTBEAT_TIMEOUT_MS',
    derive: (t: Pick<Timing, 'leaseRefreshIntervalMs' | 'operationDeadlineMs'>) =>
      t.leaseRefreshIntervalMs + t.operationDeadlineMs,
    doc: 'Temporal heartbeat timeout of the long activities: how fast a dead worker is noticed',
  },
  /** @default 3 */
  maxFencedRuns: {
    ...count(0),
    default: 3,
    doc: 'how many times a fenced job runs again as a new job before the workflow reports `fenced`',
  },
  /**
   * Each race costs a root GET, a lease GET, a lease PUT and a root PUT; a lost publication costs its
   * whole compaction. With the waits between races, 200 groups of one namespace publishing in the same
   * second all publish (docs/performance.md).
   * @default 15
   */
  maxRootRaces: {
    ...count(1),
    env: 'COMPACTION_MAX_ROOT_RACES',
    default: 15,
    doc: 'lost root races a publication retries before it reports `superseded`',
  },
  /** @default 100 */
  rootRaceBackoffMs: {
    ...ms(),
    env: 'COMPACTION_ROOT_RACE_BACKOFF_MS',
    default: 100,
    doc: 'after the n-th lost root race a publication waits a random time up to this × 2^(n − 1) (at most the cap)',
  },
  /**
   * Every wait of one publication together stays within one operation deadline (races × cap), of the
   * four its activity's timeout holds beside the budget: the publish activity sends no heartbeat, so
   * only that timeout bounds it.
   * @default min(10_000, deadline / races) = 10_000
   */
  rootRaceBackoffMaxMs: {
    ...ms(0),
    env: 'COMPACTION_ROOT_RACE_BACKOFF_MAX_MS',
    derive: (v: Pick<Timing, 'operationDeadlineMs'> & { maxRootRaces: number }) =>
      Math.min(10_000, Math.floor(v.operationDeadlineMs / v.maxRootRaces)),
    doc: 'the longest wait between two root races of a publication; races × this must fit in one operation deadline',
  },
  /** @default 2_592_000_000 (30 days) */
  manifestRetentionMs: {
    ...ms(),
    env: 'COMPACTION_MANIFEST_RETENTION_MS',
    default: 30 * 86_400_000,
    doc: "how long the collector keeps a pass's deletion manifests",
  },
} as const satisfies Record<string, SettingDeclaration>;

/** How a worker process runs and where clients send work; a bad value is a `SettingsError`. */
export const PROCESS_SETTINGS = {
  /** @default 'all' */
  workerRole: {
    kind: 'choice',
    values: ['all', 'compaction', 'collector'] as const,
    env: 'COMPACTION_WORKER_ROLE',
    default: 'all',
    doc: "what a worker serves: every activity, or one role's",
  },
  /** @default 'compaction-lease' */
  taskQueue: {
    ...text(),
    env: 'COMPACTION_TASK_QUEUE',
    default: 'compaction-lease',
    doc: 'task queue of workers, compactions, collector passes and the schedule',
  },
  /** @default the task queue = 'compaction-lease' */
  collectorTaskQueue: {
    ...text(),
    env: 'COMPACTION_COLLECTOR_TASK_QUEUE',
    derive: (v: { taskQueue: string }) => v.taskQueue,
    doc: "task queue a `collector` worker polls and where a pass sends its activities; a client's: the queue the pass starts on",
  },
  /** @default 'run' */
  storeCheck: {
    kind: 'choice',
    values: ['run', 'skip'] as const,
    env: 'COMPACTION_STORE_CHECK',
    default: 'run',
    doc: 'whether a worker probes its store at start and refuses one that fails',
  },
  /**
   * A running job holds one activity slot for its whole life (its work with the lease keeper beside
   * it), so the SDK's default of 100 would cap a worker at 100 jobs, and jobs filling every slot would
   * starve the collector's activities. 10,000 jobs (the scale target, docs/performance.md) take
   * 10,000; the rest is headroom for collector passes. A waiting keeper costs a timer, not a thread.
   * @default 11_000
   */
  activitySlots: {
    ...count(1),
    env: 'COMPACTION_WORKER_ACTIVITY_SLOTS',
    default: 11_000,
    doc: 'activity slots of a worker: jobs per worker ≤ slots minus collector headroom',
  },
  /**
   * The sticky workflow cache. A held job makes no workflow task until its work ends, so evicting it
   * costs one replay of its short history then, while every cached run costs the worker memory (about
   * 200 KiB of RSS each, docs/performance.md); the SDK's default, sized from the heap limit (2,395 at
   * 4 GiB), would make the cache the largest part of a worker holding 10,000 leases. Runs with tasks in
   * flight are the most recently used, so they stay cached; at least the SDK's 40 concurrent workflow tasks.
   * @default 200
   */
  cachedWorkflows: {
    ...count(40),
    env: 'COMPACTION_WORKER_CACHED_WORKFLOWS',
    default: 200,
    doc: 'workflow runs a worker keeps cached between their tasks (the sticky cache)',
  },
  /**
   * How far V8 lets the worker process's old generation grow past what its last full collection left
   * live before it collects again, in percent; 0: V8's own factor (up to 4 on a machine with much memory).
   * Process-wide: the worker sets it when it is created. Off by default: at 10 a compaction spent about a
   * third more CPU a record, and no run of held leases showed the old generation loose (docs/performance.md).
   * @default 0
   */
  heapGrowthPercent: {
    ...count(0, 300),
    env: 'COMPACTION_WORKER_HEAP_GROWTH_PERCENT',
    default: 0,
    doc: "how far the worker process's old generation grows past its live objects before V8 collects again (0: V8's own)",
  },
  /**
   * The most MiB each of the two semi-spaces of V8's young generation takes, in the threads started after the worker
   * sets this (its workflow threads, the compactor pool's) and, given to node as `--max-semi-space-size`
   * (`NODE_OPTIONS`), its main thread.
   * V8 grows them to 64 MiB each without pointer compression while a worker is busy (its ramp, its refreshes) and keeps
   * them resident: more than the old generation a thousand held leases use (docs/performance.md). 0: V8's own.
   * @default 4
   */
  semiSpaceMib: {
    ...count(0, 64),
    env: 'COMPACTION_WORKER_SEMI_SPACE_MIB',
    default: 4,
    doc: "the most MiB of each semi-space of V8's young generation in the worker's threads (0: V8's own)",
  },
  /** @default 'WARN' */
  logLevel: {
    kind: 'choice',
    values: ['TRACE', 'DEBUG', 'INFO', 'WARN', 'ERROR'] as const,
    ignoreCase: true,
    env: 'COMPACTION_LOG_LEVEL',
    default: 'WARN',
    doc: 'the log level of the Temporal Runtime a worker installs',
  },
  /** @default off */
  metricsPrometheus: {
    ...text(),
    env: 'COMPACTION_METRICS_PROMETHEUS',
    doc: '`host:port` of a Prometheus `/metrics` endpoint',
  },
  /** @default the package's formats */
  formatModule: {
    ...text(),
    env: 'COMPACTION_FORMAT_MODULE',
    unsetMeans: "the package's formats",
    doc: 'an ES module whose `compactor` and/or `rootCodec` a worker runs',
  },
  /** @default every 15 min, '*\/15 * * * *' */
  gcCron: {
    ...text(),
    env: 'COMPACTION_GC_CRON',
    default: '*/15 * * * *',
    doc: "the collector schedule's cron expression (the demo's)",
  },
  /**
   * One pool per process: the threads every compaction of the worker merges key ranges and codes blocks on, so one
   * process uses every core whatever its mix of jobs. One core is left to the jobs' own thread, which reads and stores
   * their bytes and, on a pool of one thread, merges: on 2 cores a job on a pool of two used 16–37 % more CPU a record
   * than on a pool of one, and was no faster (docs/performance.md).
   * @default one less than the available parallelism, at least 1 (`os.availableParallelism()`, applied in
   * src/segments/pool.ts)
   */
  compactorThreads: {
    ...count(1, 1024),
    env: 'COMPACTION_COMPACTOR_THREADS',
    unsetMeans: 'one less than the available parallelism, at least 1',
    doc: "threads of the worker's compactor pool, shared by every job's range merges and block codecs",
  },
} as const satisfies Record<string, SettingDeclaration>;

/** The S3 store's bucket and the bounds of its client (`S3StoreOptions`); a bad value is a `StoreConfigError`. */
export const S3_SETTINGS = {
  /** @default unset: the embedded store */
  bucket: {
    ...text(),
    env: 'COMPACTION_S3_BUCKET',
    unsetMeans: 'the embedded store',
    doc: 'bucket holding `namespaces/…`; when set, the S3 adapter is used',
  },
  /** @default false */
  forcePathStyle: {
    kind: 'flag',
    env: 'COMPACTION_S3_FORCE_PATH_STYLE',
    default: false,
    doc: '`true` for MinIO and other path-style endpoints',
  },
  /** @default min(operation deadline, 30_000) = 30_000 */
  idleTimeoutMs: {
    ...ms(),
    env: 'COMPACTION_S3_IDLE_TIMEOUT_MS',
    derive: (t: Pick<Timing, 'operationDeadlineMs'>) => Math.min(t.operationDeadlineMs, 30_000),
    doc: 'a response body that moves no byte for this long fails (retryable)',
  },
  /** @default 262_144 (256 KiB) */
  readWindowBytes: {
    ...bytes(),
    env: 'COMPACTION_S3_READ_WINDOW_BYTES',
    default: 256 * 1024,
    doc: 'segments are read as ranged GETs of this size, one ahead of the merge',
  },
  /** @default 32 */
  maxConcurrentReads: {
    ...count(1),
    env: 'COMPACTION_S3_MAX_CONCURRENT_READS',
    default: 32,
    doc: 'window requests in flight at once across all compactions of a worker',
  },
  /**
   * Window reads take at most 32; the rest serve lease keepers' refreshes, output segment writes and the collector.
   * @default 128
   */
  maxSockets: {
    ...count(1),
    env: 'COMPACTION_S3_MAX_SOCKETS',
    default: 128,
    doc: "sockets of the S3 client's keep-alive pool",
  },
  /** @default 1_048_576 (1 MiB/s) */
  minUploadBytesPerSecond: {
    kind: 'whole',
    unit: 'bytes/s',
    min: 1,
    max: MAX,
    env: 'COMPACTION_S3_MIN_UPLOAD_BYTES_PER_S',
    default: 1024 * 1024,
    doc: 'the slowest upload a segment write must survive: its deadline grows by its size at this rate',
  },
  /** @default 4 */
  deleteConcurrency: { ...count(1), default: 4, doc: 'DeleteObjects requests in flight at once' },
} as const satisfies Record<string, SettingDeclaration>;

/** The embedded store (`COMPACTION_S3_BUCKET` unset); a bad value is a `StoreConfigError`. */
export const EMBEDDED_STORE_SETTINGS = {
  /** @default 'data/store.sqlite' */
  path: {
    ...text(),
    env: 'COMPACTION_EMBEDDED_STORE',
    default: 'data/store.sqlite',
    doc: 'SQLite file of the embedded store, relative to the working directory',
  },
} as const satisfies Record<string, SettingDeclaration>;

/**
 * What a collector pass does unless its options say otherwise (`GcOptions`); out of bounds, the pass
 * fails `InvalidInput`. Fixed when the pass starts, so they are part of its input, never the environment.
 */
export const GC_PASS_SETTINGS = {
  /** @default false */
  dryRun: {
    kind: 'flag',
    default: false,
    doc: 'report exactly what a real pass would do, claiming and deleting nothing',
  },
  /** @default 4 */
  namespaceConcurrency: {
    ...count(1, 1000),
    default: 4,
    doc: 'namespaces collected at once, each by its own child workflow',
  },
  /**
   * A page collected in one activity costs a few events; collected command by command (a page whose
   * activity failed for good) one job prefix costs about 12 (bench/reclaim.ts measured 12,043 events for
   * a run with pages of 1,000): 4,000 + 400 × 12 stays under Temporal's 10,000-event comfort limit.
   * @default 100
   */
  prefixesPerPage: { ...count(1, 400), default: 100, doc: 'namespaces or job prefixes per listing page' },
  /**
   * Each prefix in flight holds up to two activities open: far below Temporal's 2,000 pending activities per run.
   * @default 8
   */
  prefixConcurrency: {
    ...count(1, 100),
    default: 8,
    doc: 'job prefixes of one namespace claimed and reclaimed at once',
  },
  /** @default 4000 */
  keysPerFlush: {
    ...count(1, 1_000_000),
    default: 4000,
    doc: 'staged candidates collected before the root is re-read and they are deleted',
  },
} as const satisfies Record<string, SettingDeclaration>;

/** How clients start work. */
export const CLIENT_SETTINGS = {
  /**
   * A start looks for a live worker on its queue this long before it fails, the library's and the
   * CLI's alike: a worker that polls is seen at once, so the wait only delays the failure; but a worker
   * started beside its client (a second terminal, a deployment's first minute) polls only once its
   * workflow code is bundled, which takes a few seconds; a start refused too early says so and how
   * to wait longer (`workerTimeoutMs`, `--worker-timeout`).
   * @default 5_000 (5 s)
   */
  workerTimeoutMs: {
    ...ms(0),
    default: 5_000,
    doc: 'how long a start looks for a live worker before it fails, starting nothing',
  },
  /** @default 500 */
  workerPollIntervalMs: {
    ...ms(),
    default: 500,
    doc: 'how often `waitForWorker` asks the server which workers poll the queue',
  },
  /** @default 5_000 (5 s) */
  watchIntervalMs: {
    ...ms(),
    default: 5_000,
    doc: 'how often a wait for a run describes it: a failing workflow task is reported within this plus about 1 s',
  },
} as const satisfies Record<string, SettingDeclaration>;

/** A setting's value once defaulted: unset only where nothing is declared to apply. */
export type DefaultedSetting<D> = D extends { default: SettingValue } | { derive: unknown }
  ? SettingType<D>
  : SettingType<D> | undefined;

/** Every table, each setting of the package in one of them. */
export const SETTING_TABLES = [
  TIMING_SETTINGS,
  WORKER_SETTINGS,
  PROCESS_SETTINGS,
  S3_SETTINGS,
  EMBEDDED_STORE_SETTINGS,
  GC_PASS_SETTINGS,
  CLIENT_SETTINGS,
] as const;

/** Settings by name, in the order their defaults derive. */
export type SettingTable = Readonly<Record<string, SettingDeclaration>>;

/** The environment variable of each setting of `table` that has one. */
export const envNames = <T extends SettingTable>(
  table: T,
): { readonly [K in keyof T as T[K]['env'] extends string ? K : never]: T[K]['env'] } =>
  Object.freeze(
    Object.fromEntries(
      Object.entries(table).flatMap(([name, declared]) => (declared.env ? [[name, declared.env]] : [])),
    ),
  ) as never;

/**
 * The settings of `table` with every unset one defaulted, in the table's order: `given` where set,
 * else its value default, else derived from the values before it (and `context`, settings of other
 * tables it derives from). The one place defaults apply; unset settings without a default stay unset.
 */
export function applyDefaults<T extends SettingTable>(
  table: T,
  given: { readonly [K in keyof T]?: SettingValue | undefined },
  context: object = {},
): { [K in keyof T]: DefaultedSetting<T[K]> } {
  const values: Record<string, SettingValue | undefined> = { ...(context as Record<string, SettingValue>) };
  for (const [name, declared] of Object.entries(table)) {
    const derive = declared.derive as ((values: Record<string, SettingValue | undefined>) => SettingValue) | undefined;
    values[name] = given[name] ?? declared.default ?? derive?.(values);
  }
  return Object.fromEntries(Object.keys(table).map((name) => [name, values[name]])) as {
    [K in keyof T]: DefaultedSetting<T[K]>;
  };
}

/** The value of every setting with an environment variable when nothing is set, by variable: the docs' defaults. */
export function defaultsByVariable(): Map<string, SettingValue | undefined> {
  const timing = applyDefaults(TIMING_SETTINGS, {});
  const found = new Map<string, SettingValue | undefined>();
  for (const table of SETTING_TABLES) {
    const values: Record<string, SettingValue | undefined> = applyDefaults(table, {}, timing);
    for (const [name, declared] of Object.entries(table)) if (declared.env) found.set(declared.env, values[name]);
  }
  return found;
}
