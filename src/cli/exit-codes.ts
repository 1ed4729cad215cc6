/**
 * Exit codes scripts can rely on, and the one line an error prints: what went wrong and what to
 * change. Every failure a command can meet is mapped here, in one place.
 */
import { ScheduleNotFoundError, ServiceError, WorkflowFailedError, isGrpcServiceError } from '@temporalio/client';
import { ApplicationFailure, WorkflowNotFoundError } from '@temporalio/common';
import { CommanderError } from 'commander';
import { DEFAULT_GC_SCHEDULE_ID, GcScheduleOwnedError } from '../client/schedule';
import { SearchAttributesMissingError, TemporalNamespaceNotFoundError } from '../client/search-attributes';
import { WorkflowTaskFailingError } from '../client/waiting';
import { NoWorkerPollingError } from '../client/workers';
import { SettingsError, TimingConfigError } from '../config';
import { firstLineOf, TypedError } from '../errors';
import { InvalidKeyError } from '../keys';
import { StoreConfigError, StoreUnavailableError, StoreUnfitError } from '../store';
import { FormatModuleError } from '../worker/format-module';

export const ExitCode = {
  ok: 0,
  /** The operation ran and failed (a fenced compaction, an incomplete collector pass, a store outage). */
  failed: 1,
  /** Usage or invalid input: unknown command or option, a namespace or job id not of the grammar. */
  usage: 2,
  /** The lease, job or schedule named does not exist. */
  notFound: 3,
  /** Configuration: store settings, timings, or no reachable Temporal server. */
  config: 4,
  /**
   * The store failed a property of the store check (`store check`, or a worker refusing to start): the protocol is
   * unsafe on it.
   */
  unfitStore: 5,
} as const;
export type ExitCode = (typeof ExitCode)[keyof typeof ExitCode];

export const EXIT_CODES_HELP = `
Exit codes:
  0  ok
  1  the operation failed (fenced or abandoned compaction, incomplete collector pass, store unavailable)
  2  usage or invalid input (unknown option, namespace or job id not of the grammar)
  3  not found (lease, job prefix or schedule missing)
  4  configuration error (COMPACTION_S3_* / AWS settings, COMPACTION_*_MS timings, a format module, Temporal unreachable,
     a Temporal namespace missing or without the search attributes: compaction-lease temporal setup)
  5  the store failed the store check (store check, worker): a conditional write, ETag, visibility, clock or delete property`;

/** A failure the CLI itself names, with the exit code it means; the message already says what to do. */
export class CliError extends TypedError {
  readonly failureType = 'Cli';
  constructor(
    readonly exitCode: ExitCode,
    message: string,
  ) {
    super(message);
  }
}

/** The Temporal server named by the environment (or the default address) did not answer. */
export class TemporalUnreachableError extends TypedError {
  readonly failureType = 'TemporalUnreachable';
  constructor(address: string, configured: boolean, cause: unknown) {
    const fix = configured
      ? 'check TEMPORAL_ADDRESS / the TEMPORAL_PROFILE it names'
      : 'set TEMPORAL_ADDRESS (or a TEMPORAL_PROFILE), or start a server with `temporal server start-dev`';
    super(`cannot reach Temporal at ${address} (${firstLineOf(cause)}): ${fix}`, { cause });
  }
}

/** ApplicationFailure types a workflow fails with when its input names something absent or malformed. */
const WORKFLOW_FAILURE_CODES: Readonly<Record<string, ExitCode>> = {
  InvalidInput: ExitCode.usage,
  RootMissing: ExitCode.notFound,
};

/** gRPC status codes by name, for the line that quotes the server's refusal. */
const GRPC_STATUS: Readonly<Record<number, string>> = {
  1: 'CANCELLED',
  2: 'UNKNOWN',
  3: 'INVALID_ARGUMENT',
  4: 'DEADLINE_EXCEEDED',
  5: 'NOT_FOUND',
  6: 'ALREADY_EXISTS',
  7: 'PERMISSION_DENIED',
  8: 'RESOURCE_EXHAUSTED',
  9: 'FAILED_PRECONDITION',
  10: 'ABORTED',
  11: 'OUT_OF_RANGE',
  12: 'UNIMPLEMENTED',
  13: 'INTERNAL',
  14: 'UNAVAILABLE',
  15: 'DATA_LOSS',
  16: 'UNAUTHENTICATED',
};
/**
 * What a refusal means for the exit code: what the user gave (INVALID_ARGUMENT, e.g. a cron expression), a missing
 * thing, or access.
 */
const GRPC_EXIT_CODES: Readonly<Record<number, ExitCode>> = {
  3: ExitCode.usage,
  5: ExitCode.notFound,
  7: ExitCode.config,
  16: ExitCode.config,
};

/**
 * The server's refusal of a request, whole: the SDK's `ServiceError` ("Failed to start Workflow") carries the gRPC
 * error, status and message, as its cause.
 */
function serverRefusal(err: unknown): Explained | undefined {
  const grpc = isGrpcServiceError(err)
    ? err
    : err instanceof ServiceError && isGrpcServiceError(err.cause)
      ? err.cause
      : undefined;
  if (!grpc) return undefined;
  const doing = err instanceof ServiceError ? `${err.message}: ` : '';
  return {
    exitCode: GRPC_EXIT_CODES[grpc.code] ?? ExitCode.failed,
    line: `${doing}Temporal refused it, ${GRPC_STATUS[grpc.code] ?? `status ${grpc.code}`}: ${grpc.details}`,
  };
}

export interface Explained {
  readonly exitCode: ExitCode;
  /** Undefined when the message was already printed (commander prints its own usage errors). */
  readonly line: string | undefined;
}

export function explainFailure(err: unknown): Explained {
  if (err instanceof CommanderError)
    return { exitCode: err.exitCode === 0 ? ExitCode.ok : ExitCode.usage, line: undefined };
  if (err instanceof CliError) return { exitCode: err.exitCode, line: err.message };
  if (err instanceof InvalidKeyError) return { exitCode: ExitCode.usage, line: err.message };
  if (
    err instanceof StoreConfigError ||
    err instanceof TimingConfigError ||
    err instanceof TemporalUnreachableError ||
    err instanceof FormatModuleError
  ) {
    return { exitCode: ExitCode.config, line: err.message };
  }
  if (err instanceof StoreUnfitError) return { exitCode: ExitCode.unfitStore, line: err.message };
  if (err instanceof SearchAttributesMissingError || err instanceof TemporalNamespaceNotFoundError)
    return { exitCode: ExitCode.config, line: err.message };
  // The run stays Running: the message names it, the cause and the fix.
  if (err instanceof WorkflowTaskFailingError || err instanceof GcScheduleOwnedError)
    return { exitCode: ExitCode.failed, line: err.message };
  if (err instanceof SettingsError)
    return { exitCode: ExitCode.config, line: `${err.message}: fix the COMPACTION_* variable it names` };
  if (err instanceof ScheduleNotFoundError) {
    // The server's message names the scheduler's internal workflow id, not the schedule.
    const option = err.scheduleId === DEFAULT_GC_SCHEDULE_ID ? '' : ` --schedule-id ${err.scheduleId}`;
    return {
      exitCode: ExitCode.notFound,
      line: `no schedule ${err.scheduleId}: create it with \`compaction-lease gc schedule ensure${option}\``,
    };
  }
  // Its message names the queue and the fix, and nothing was started on it.
  if (err instanceof NoWorkerPollingError) return { exitCode: ExitCode.failed, line: err.message };
  if (err instanceof WorkflowNotFoundError) return { exitCode: ExitCode.notFound, line: err.message };
  if (err instanceof WorkflowFailedError) {
    const cause = err.cause instanceof ApplicationFailure ? err.cause : undefined;
    const exitCode = (cause?.type && WORKFLOW_FAILURE_CODES[cause.type]) || ExitCode.failed;
    return {
      exitCode,
      line: `${err.message}: ${cause ? `${cause.type}: ${cause.message}` : (err.cause?.message ?? 'no cause given')}`,
    };
  }
  const refused = serverRefusal(err);
  if (refused) return refused;
  if (err instanceof StoreUnavailableError) {
    return {
      exitCode: ExitCode.failed,
      line: `${err.message}: retry; if it persists check AWS_ENDPOINT_URL_S3 and the network`,
    };
  }
  const line = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
  return { exitCode: ExitCode.failed, line: line.split('\n')[0] };
}
