/** The process-wide Temporal Runtime: log level, and the Prometheus endpoint when configured. */
import { IllegalStateError } from '@temporalio/common';
import { DefaultLogger, Runtime, type LogLevel } from '@temporalio/worker';
import { SettingsError } from '../config';

/** `host:port` to serve `/metrics` on (the SDK's metrics and this package's `compaction_lease_*`). */
export const METRICS_ENV = 'COMPACTION_METRICS_PROMETHEUS';
export const LOG_LEVEL_ENV = 'COMPACTION_LOG_LEVEL';
const LOG_LEVELS: readonly LogLevel[] = ['TRACE', 'DEBUG', 'INFO', 'WARN', 'ERROR'];

/**
 * Installs the Runtime from `COMPACTION_LOG_LEVEL` (default WARN) and `COMPACTION_METRICS_PROMETHEUS`,
 * shut down by SIGINT and SIGTERM. The Runtime is one per process, created by its first connection
 * or worker and fixed from then on. When the process has one already (a service that runs its own
 * Temporal worker), that one is kept and `'existing'` returned; unless either setting is given,
 * which could then not apply: that is a {@link SettingsError}.
 */
export function installRuntime(env: NodeJS.ProcessEnv = process.env): 'installed' | 'existing' {
  const bindAddress = env[METRICS_ENV];
  const level = (env[LOG_LEVEL_ENV] || 'WARN').toUpperCase() as LogLevel;
  if (!LOG_LEVELS.includes(level)) throw new SettingsError(`${LOG_LEVEL_ENV} must be one of ${LOG_LEVELS.join(', ')}, not ${JSON.stringify(env[LOG_LEVEL_ENV])}`);
  try {
    Runtime.install({
      logger: new DefaultLogger(level),
      shutdownSignals: ['SIGINT', 'SIGTERM'],
      ...(bindAddress && { telemetryOptions: { metrics: { prometheus: { bindAddress } } } }),
    });
    return 'installed';
  } catch (err) {
    if (!(err instanceof IllegalStateError)) throw err;
    const given = [LOG_LEVEL_ENV, METRICS_ENV].filter((name) => env[name]);
    if (given.length) {
      throw new SettingsError(
        `${given.join(' and ')} cannot apply: this process already has a Temporal Runtime (installed before the first connection or worker); ` +
          'configure logging and metrics on that Runtime and unset them, or pass `installRuntime: false`',
      );
    }
    return 'existing';
  }
}
