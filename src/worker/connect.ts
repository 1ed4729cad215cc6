/** Temporal connection settings the ecosystem's way: `@temporalio/envconfig` profiles and `TEMPORAL_*` variables. */
import { loadClientConnectConfig } from '@temporalio/envconfig';
import { environment } from '../config';

export interface TemporalTarget {
  readonly address: string;
  readonly namespace: string;
  /** Whether the environment named a server (`TEMPORAL_ADDRESS` or a profile) rather than leaving it to the caller. */
  readonly configured: boolean;
  readonly connectionOptions: ReturnType<typeof loadClientConnectConfig>['connectionOptions'];
}

export function temporalTarget(env?: NodeJS.ProcessEnv): TemporalTarget {
  const vars = environment(env);
  const { connectionOptions, namespace } = loadClientConnectConfig({ overrideEnvVars: vars as Record<string, string> });
  return {
    address: connectionOptions.address ?? '127.0.0.1:7233',
    namespace: namespace ?? 'default',
    configured: Boolean(vars.TEMPORAL_ADDRESS || vars.TEMPORAL_PROFILE || vars.TEMPORAL_CONFIG_FILE),
    connectionOptions,
  };
}
