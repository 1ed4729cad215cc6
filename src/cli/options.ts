/** Option parsers shared by several commands. */
import { msToNumber } from '@temporalio/common/lib/time';
import { InvalidArgumentError, Option, type Command } from 'commander';
import { CLIENT_SETTINGS } from '../config/declaration';

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

export interface WorkerCheck {
  /** Milliseconds, parsed by `--worker-timeout`. */
  readonly workerTimeout: number;
  /** False with `--no-worker-check`. */
  readonly workerCheck: boolean;
}

/**
 * Adds `--worker-timeout` and `--no-worker-check`: how long a start looks for a live worker on its task queue, or not
 * at all.
 */
export const withWorkerCheck = (command: Command): Command =>
  command
    .addOption(
      new Option(
        '--worker-timeout <duration>',
        'how long to look for a live worker polling the task queue before giving up, starting nothing',
      )
        .default(CLIENT_SETTINGS.workerTimeoutMs.default, `${CLIENT_SETTINGS.workerTimeoutMs.default / 1000}s`)
        .argParser((value) => {
          const ms = durationMs(value);
          if (ms === undefined || !(ms >= 0))
            throw new InvalidArgumentError(`"${value}" is not a duration (e.g. 10s, 2m)`);
          return ms;
        }),
    )
    .addOption(
      new Option('--no-worker-check', 'start without looking for a worker (it runs when one polls the queue)'),
    );

/** The library's worker check for the options a command was given. */
export const workerTimeoutMs = (options: WorkerCheck): number | false =>
  options.workerCheck ? options.workerTimeout : false;
