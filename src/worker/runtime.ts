/** The process-wide Temporal Runtime: log level, and the Prometheus endpoint when configured. */
import { DefaultLogger, Runtime, type LogLevel } from '@temporalio/worker';
import { SettingsError } from '../config';

/** `host:port` to serve `/metrics` on (the SDK's metrics and this package's `compaction_lease_*`). */
export const METRICS_ENV = 'COMPACTION_METRICS_PROMETHEUS';
export const LOG_LEVEL_ENV = 'COMPACTION_LOG_LEVEL';
const LOG_LEVELS: readonly LogLevel[] = ['TRACE', 'DEBUG', 'INFO', 'WARN', 'ERROR'];

/**
 * Installs the Runtime from `COMPACTION_LOG_LEVEL` (default WARN) and `COMPACTION_METRICS_PROMETHEUS`,
 * shut down by SIGINT and SIGTERM. The Runtime is created by the first connection or worker of the
 * process and fixed from then on, so this must run before either: otherwise it throws the SDK's `IllegalStateError`.
 */
export function installRuntime(env: NodeJS.ProcessEnv = process.env): void {
  const bindAddress = env[METRICS_ENV];
  const level = (env[LOG_LEVEL_ENV] || 'WARN').toUpperCase() as LogLevel;
  if (!LOG_LEVELS.includes(level)) throw new SettingsError(`${LOG_LEVEL_ENV} must be one of ${LOG_LEVELS.join(', ')}, not ${JSON.stringify(env[LOG_LEVEL_ENV])}`);
  Runtime.install({
    logger: new DefaultLogger(level),
    shutdownSignals: ['SIGINT', 'SIGTERM'],
    ...(bindAddress && { telemetryOptions: { metrics: { prometheus: { bindAddress } } } }),
  });
}
