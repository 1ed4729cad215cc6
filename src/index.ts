/**
 * compaction-lease: streaming metadata compactions under an S3 lease, and the collector that reclaims what dead jobs
 * left.
 *
 * The public surface, by name: what a metadata service (client, worker, writer, reader), a format's
 * plug-ins (docs/plugins.md) and a store adapter (docs/stores.md) use. Test helpers (dev servers,
 * shrunk timings, stand-in compactors, the key builders only tests need, the conformance kit) are
 * `compaction-lease/testing` (src/testing.ts). The planner, the lease's transitions and the
 * collector's steps stay inside. etc/ holds each entry's API report; `npm run api` updates them,
 * and `npm run api:check` fails on a name without a doc comment (docs/architecture.md).
 */

/** Every error of the package: its Temporal failure type, and whether a retry can help. */
export { FAILURE_TYPES, TypedError, type FailureType } from './errors';

// Ids and keys a service or a format's writer builds (docs/protocol.md).
export {
  familyGroup,
  InvalidKeyError,
  inputSegmentKey,
  namespaceId,
  newSegmentId,
  rootKey,
  type FamilyGroup,
  type NamespaceId,
} from './keys';

// Settings and timings (README, Configuration).
export {
  resolveSettings,
  resolveTiming,
  SettingsError,
  settingsFromEnv,
  TimingConfigError,
  type CompactionSettings,
  type Timing,
} from './config';

// Starting and watching work from the metadata service.
export { connectClientFromEnv } from './client/connect';
export { compactionResult, startCompaction, type CompactionHandle, type StartCompactionOptions } from './client';
export {
  gcPassResult,
  runGcPass,
  startGcPass,
  type GcPassHandle,
  type GcPassOptions,
  type GcPassResult,
} from './client/gc-pass';
export { ensureGcSchedule, GcScheduleOwnedError, triggerGcPass, type GcScheduleOptions } from './client/schedule';
export {
  checkSearchAttributes,
  registerSearchAttributes,
  requireSearchAttributes,
  SEARCH_ATTRIBUTES,
  SearchAttributesMissingError,
  TemporalNamespaceNotFoundError,
} from './client/search-attributes';
export { WorkflowTaskFailingError, type WaitOptions, type WorkflowTaskFailure } from './client/waiting';
export {
  NoWorkerPollingError,
  waitForWorker,
  type NoWorkerPolling,
  type PolledFor,
  type StoppedWorker,
} from './client/workers';
export type { CompactionResult } from './workflows/compaction';
export type { GcReport } from './collector/report';
/** The workflow functions, as types: `client.workflow.start<typeof gcWorkflow>('gcWorkflow', …)`. */
export type { compactionWorkflow, gcWorkflow } from './workflows';

// Workers.
export { createWorker, type CreateWorkerOptions } from './worker';
export { startWorkerFromEnv, type StartWorkerFromEnvOptions, type WorkerFromEnv } from './worker/from-env';
export { installRuntime } from './worker/runtime';
export { FormatModuleError } from './worker/format-module';

// The object store: the port an adapter implements (docs/stores.md), its errors, the two adapters, the probe.
export {
  AmbiguousError,
  ConflictError,
  NotFoundError,
  ObjectChangedError,
  ObjectTooLargeError,
  PreconditionFailedError,
  StoreConfigError,
  StoreError,
  StoreUnavailableError,
  type ObjectStore,
} from './store/port';
export {
  createEmbeddedObjectStore,
  createS3ObjectStore,
  objectStoreFromEnv,
  requireFitStore,
  StoreUnfitError,
  verifyStore,
  type ConditionalDelete,
  type EmbeddedStoreOptions,
  type S3StoreOptions,
} from './store';

// The namespace root, through a root codec (docs/plugins.md, docs/formats.md).
export {
  addSegments,
  jsonRootCodec,
  MAX_ROOT_BYTES,
  RootCorruptError,
  RootFormatMismatchError,
  RootTooLargeError,
  type RetiredSegment,
  type RootCodec,
  type RootState,
} from './root';
export {
  InvalidRootChangeError,
  readRoot,
  readRootIfAny,
  RootLostError,
  RootMissingError,
  SegmentLostError,
  SequenceFloorError,
  updateRoot,
  type RootWriteOptions,
} from './protocol/root-io';
export { RootWentBackError } from './collector/judged-root';
export { EmptyCompactionError } from './protocol/publication';
export { LeaseCorruptError } from './lease/codec';
export { InputChangedError } from './compactor/inputs';
export { StoreMismatchError } from './activities/store-binding';

// Segments: the reference format, its writer and its readers (docs/formats.md, docs/readers.md).
export { SegmentCorruptError, type SegmentRecord } from './segments/format';
export { InvalidSegmentInputError, MAX_KEY_BYTES, type SegmentInputRefusal } from './segments/records';
export { writeInputSegment, WriterBudgetExceededError, type WriterOptions } from './writer';
export {
  lookupRecord,
  readableUntilMs,
  readGroupRecords,
  readGroupSnapshot,
  type GroupRef,
  type GroupSnapshot,
} from './reader';

// A format's compactor (docs/plugins.md).
export {
  CompactorRuleError,
  MAX_PROGRESS_BYTES,
  OutputMissingError,
  OutsideJobPrefixError,
  ProgressMismatchError,
  ProgressRefusedError,
  referenceCompactor,
  stagedOutputKey,
  WriteAfterAttemptError,
  type CompactionAttempt,
  type Compactor,
} from './compactor';

// What the collector deleted and why: each pass's deletion manifests (docs/operations.md).
export { listGcPasses, whyDeleted } from './collector/manifest-read';
