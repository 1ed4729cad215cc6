/** Option parsers shared by several commands. */
import type { Client } from '@temporalio/client';
import { msToNumber } from '@temporalio/common/lib/time';
import { InvalidArgumentError, Option } from 'commander';
import { NoWorkerPollingError, waitForWorker } from '../client';
import type { CliContext } from './context';
import { CliError, ExitCode } from './exit-codes';

/** Collects a repeatable option's values in order (`--namespace a --namespace b`). */
export const repeated = (value: string, previous: string[] = []): string[] => [...previous, value];

/** Milliseconds of a duration as Temporal reads it (`90s`, `15m`, `2h`, `1 day`), undefined when it is not one. */
export function durationMs(value: string): number | undefined {
  try {
    return msToNumber(value as Parameters<typeof msToNumber>[0]);
  } catch {
    return undefined;
  }
}

export interface WorkerTimeout {
  /** Milliseconds, parsed by the option. */
  readonly workerTimeout: number;
}

/** `--worker-timeout`: how long `--wait` looks for a worker on the task queue before it says none polls it. */
export const waitForWorkerOption = (): Option =>
  new Option('--worker-timeout <duration>', 'with --wait: how long to look for a worker polling the task queue before giving up')
    .default(10_000, '10s')
    .argParser((value) => {
      const ms = durationMs(value);
      if (ms === undefined || !(ms >= 0)) throw new InvalidArgumentError(`"${value}" is not a duration (e.g. 10s, 2m)`);
      return ms;
    });

/**
 * Before waiting on `workflowId`: a worker must poll the task queue, and the collector's queue when
 * the work goes there (`collectorTaskQueue`), else the wait would be silent and endless.
 */
export async function workerPolls(ctx: CliContext, client: Client, workflowId: string, options: WorkerTimeout & { collectorTaskQueue?: string }): Promise<void> {
  const timeoutMs = options.workerTimeout;
  const collector = options.collectorTaskQueue;
  try {
    await Promise.all([
      waitForWorker(client, ctx.taskQueue(), { timeoutMs }),
      // The start queue's workers may be of role `all`, and then serve the collector there too.
      collector === undefined || collector === ctx.taskQueue() ? undefined : waitForWorker(client, collector, { timeoutMs, polledFor: 'collector' }),
    ]);
  } catch (err) {
    if (!(err instanceof NoWorkerPollingError)) throw err;
    throw new CliError(ExitCode.failed, `${err.message}; ${workflowId} is started and runs when a worker polls`);
  }
}
