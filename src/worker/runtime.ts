/** The process-wide Temporal Runtime: log level, and the Prometheus endpoint when configured. */
import { IllegalStateError } from '@temporalio/common';
import { DefaultLogger, Runtime, type LogLevel } from '@temporalio/worker';
import { environment, PROCESS_SETTINGS, settingFromEnv, settingSetInEnv, SettingsError } from '../config';

/** `host:port` to serve `/metrics` on (the SDK's metrics and this package's `compaction_lease_*`). */
export const METRICS_ENV = PROCESS_SETTINGS.metricsPrometheus.env;
export const LOG_LEVEL_ENV = PROCESS_SETTINGS.logLevel.env;
/** The level `installRuntime` logs at when `COMPACTION_LOG_LEVEL` is unset. */
export const DEFAULT_LOG_LEVEL: LogLevel = PROCESS_SETTINGS.logLevel.default;

/**
 * How often the workers of a Runtime this package installs tell the server they live (`ListWorkers`,
 * Temporal Server 1.29+). A start or a wait takes a worker whose heartbeats stopped for three of
 * these for dead, sooner than its last poll ages out (75 s); the SDK's default is 60 s.
 */
export const WORKER_HEARTBEAT_INTERVAL_MS = 10_000;

/** The Runtime module of any copy of `@temporalio/worker`, as the module cache names it. */
const RUNTIME_MODULE = /[/\\]@temporalio[/\\]worker[/\\]lib[/\\]runtime\.js$/;

/**
 * Throws a {@link SettingsError} when a second copy of `@temporalio/worker` (another path than the
 * one this package loads) has a Runtime in this process: that Runtime's logger, metrics and
 * settings never reach this package's workers, which would run on a Runtime of their own, silently.
 */
export function requireOneTemporalRuntime(): void {
  const copies = Object.entries(require.cache).filter(([path]) => RUNTIME_MODULE.test(path));
  const ours =
    copies.find(([, module]) => (module?.exports as { Runtime?: unknown } | undefined)?.Runtime === Runtime)?.[0] ??
    '@temporalio/worker';
  for (const [path, module] of copies) {
    const other = (module?.exports as { Runtime?: { _instance?: unknown } } | undefined)?.Runtime;
    if (other === undefined || other === (Runtime as unknown) || other._instance === undefined) continue;
    throw new SettingsError(
      `this process has a Temporal Runtime from a second copy of @temporalio/worker (${path}), which this package's workers (${ours}) cannot see: ` +
        'its logger, metrics and settings would not apply to them. Install @temporalio/* once: list them in your package.json at the version of ' +
        "this package's peer dependencies, then `npm dedupe` (`npm ls @temporalio/worker` shows each copy)",
    );
  }
}

/**
 * Installs the Runtime from `COMPACTION_LOG_LEVEL` (default WARN) and `COMPACTION_METRICS_PROMETHEUS`,
 * shut down by SIGINT and SIGTERM, its workers heartbeating every {@link WORKER_HEARTBEAT_INTERVAL_MS}.
 * The Runtime is one per process, created by its first connection or worker and fixed from then on.
 * When the process has one already (a service that runs its own Temporal worker), that one is kept
 * and `'existing'` returned; unless either setting is given, which could then not apply: that is a
 * {@link SettingsError}, and so is a Runtime of a second copy of `@temporalio/worker` ({@link
 * requireOneTemporalRuntime}).
 */
export function installRuntime(env?: NodeJS.ProcessEnv): 'installed' | 'existing' {
  const bindAddress = settingSetInEnv(PROCESS_SETTINGS, 'metricsPrometheus', env);
  const level = settingFromEnv(PROCESS_SETTINGS, 'logLevel', env);
  requireOneTemporalRuntime();
  try {
    Runtime.install({
      logger: new DefaultLogger(level),
      shutdownSignals: ['SIGINT', 'SIGTERM'],
      workerHeartbeatInterval: WORKER_HEARTBEAT_INTERVAL_MS,
      ...(bindAddress && { telemetryOptions: { metrics: { prometheus: { bindAddress } } } }),
    });
    return 'installed';
  } catch (err) {
    if (!(err instanceof IllegalStateError)) throw err;
    const given = [LOG_LEVEL_ENV, METRICS_ENV].filter((name) => environment(env)[name]);
    if (given.length) {
      throw new SettingsError(
        `${given.join(' and ')} cannot apply: this process already has a Temporal Runtime (installed before the first connection or worker); ` +
          'configure logging and metrics on that Runtime and unset them, or pass `installRuntime: false`',
      );
    }
    return 'existing';
  }
}
