/** The process-wide Temporal Runtime: log level, and the Prometheus endpoint when configured. */
import { DefaultLogger, Runtime, type LogLevel } from '@temporalio/worker';

/** `host:port` to serve `/metrics` on (the SDK's metrics and this package's `compaction_lease_*`). */
export const METRICS_ENV = 'COMPACTION_METRICS_PROMETHEUS';
export const LOG_LEVEL_ENV = 'COMPACTION_LOG_LEVEL';

export function installRuntime(env: NodeJS.ProcessEnv = process.env): void {
  const bindAddress = env[METRICS_ENV];
  Runtime.install({
    logger: new DefaultLogger((env[LOG_LEVEL_ENV] as LogLevel | undefined) ?? 'WARN'),
    shutdownSignals: ['SIGINT', 'SIGTERM'],
    ...(bindAddress && { telemetryOptions: { metrics: { prometheus: { bindAddress } } } }),
  });
}
