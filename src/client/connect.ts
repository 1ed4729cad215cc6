import { Client, Connection } from '@temporalio/client';
import { temporalTarget } from '../worker/connect';

/**
 * A client of the Temporal server and namespace the environment names (`TEMPORAL_*`, envconfig profile), as the CLI and
 * workers read it; close it with `client.connection.close()`.
 */
export async function connectClientFromEnv(env?: NodeJS.ProcessEnv): Promise<Client> {
  const target = temporalTarget(env);
  const connection = await Connection.connect(target.connectionOptions);
  return new Client({ connection, namespace: target.namespace });
}
