/** compaction-lease: streaming metadata compactions under an S3 lease, and the collector that reclaims what dead jobs left. */
export * from './keys';
export * from './lease';
export * from './root';
export * from './segments';
export {
  MAX_PROGRESS_BYTES,
  OutputMissingError,
  OutsideJobPrefixError,
  ProgressMismatchError,
  ProgressRefusedError,
  referenceCompactor,
  stagedOutputKey,
  WriteAfterAttemptError,
  type CompactionAttempt,
  type CompactionJob,
  type CompactionOutputs,
  type CompactionProgress,
  type Compactor,
  type MergeLimits,
  type StagedStore,
} from './compactor';
export * from './config';
export * from './store';
export * from './protocol';
export * from './client';
export * from './worker';
export { startWorkerFromEnv, type StartWorkerFromEnvOptions, type WorkerFromEnv } from './worker/from-env';
export { writeInputSegment, WriterBudgetExceededError, type WriterOptions } from './writer';
export { lookupRecord, readableUntilMs, readGroupRecords, readGroupSnapshot, type GroupSnapshot, type LiveRecord } from './reader';
export { checkFormat, FormatCheckError, type FormatUnderTest } from './conformance';
export type { CompactionInput, CompactionResult, CompactionOutcomeName, LeaseView } from './workflows/compaction';
export type { GcInput, GcOptions, GcPassReport, GcReport, GcTotals } from './workflows/gc';
export type { CorruptLease } from './activities/gc';
/** The workflow functions, as types: `client.workflow.start<typeof gcWorkflow>('gcWorkflow', …)`; workers load them from `WORKFLOWS_PATH`. */
export type { compactionWorkflow, gcWorkflow } from './workflows';
