/**
 * compaction-lease: streaming metadata compactions under an S3 lease, and the collector that reclaims what dead jobs left.
 *
 * The public surface, by name: what a metadata service (client, worker, writer, reader), a format's
 * plug-ins (docs/plugins.md) and a store adapter (docs/stores.md) use. The planner, the lease's
 * transitions and the collector's steps stay inside. etc/compaction-lease.api.md records every
 * signature; `npm run api` updates it (docs/architecture.md).
 */

/** Every error of the package: its Temporal failure type, and whether a retry can help. */
export { FAILURE_TYPES, NON_RETRYABLE_FAILURE_TYPES, TypedError, type FailureType } from './errors';

// Ids and keys: the key grammar of the store's layout (docs/protocol.md).
export {
  compactionsPrefix,
  familyGroup,
  InvalidKeyError,
  inputSegmentKey,
  inputSegmentsPrefix,
  jobId,
  jobPrefix,
  leaseKey,
  namespaceId,
  namespacePrefix,
  newJobId,
  newSegmentId,
  passId,
  passManifestPrefix,
  rootKey,
  segmentId,
  stagedSegmentKey,
  type Brand,
  type FamilyGroup,
  type MetadataCompactionId,
  type NamespaceId,
  type PassId,
  type RandomFill,
  type SegmentId,
} from './keys';

// Settings and timings (README, Configuration).
export {
  defaultTimingDividedBy,
  resolveSettings,
  resolveTiming,
  SETTINGS_ENV,
  SettingsError,
  settingsFromEnv,
  shrunkTiming,
  TIMING_ENV,
  TimingConfigError,
  timingFromEnv,
  WORKER_ROLE_ENV,
  WORKER_ROLES,
  workerRoleFromEnv,
  type CompactionSettings,
  type Timing,
  type WorkerRole,
} from './config';

// Starting and watching work from the metadata service.
export { connectClientFromEnv } from './client/connect';
export { compactionResult, compactionWorkflowId, startCompaction, type CompactionHandle, type StartCompactionOptions } from './client';
export { gcPassResult, runGcPass, startGcPass, type GcPassHandle, type GcPassOptions, type GcPassResult } from './client/gc-pass';
export {
  DEFAULT_GC_SCHEDULE_ID,
  describeGcSchedule,
  ensureGcSchedule,
  GcScheduleOwnedError,
  pauseGcSchedule,
  triggerGcPass,
  unpauseGcSchedule,
  type GcCadence,
  type GcScheduleOptions,
  type GcScheduleOwner,
} from './client/schedule';
export {
  checkSearchAttributes,
  cloudSearchAttributeCommand,
  registerSearchAttributes,
  requireSearchAttributes,
  SEARCH_ATTRIBUTES,
  searchAttributeCommands,
  SearchAttributesMissingError,
  TemporalNamespaceNotFoundError,
  type SearchAttributeCheck,
  type SearchAttributeMismatch,
  type SearchAttributeSource,
  type SearchAttributeType,
} from './client/search-attributes';
export { WAIT_REPORT_INTERVAL_MS, WorkflowTaskFailingError, type WaitOptions } from './client/waiting';
export {
  DEFAULT_WORKER_TIMEOUT_MS,
  LIVE_POLLER_WINDOW_MS,
  NoWorkerPollingError,
  taskQueueWorkers,
  waitForWorker,
  type PolledFor,
  type StoppedWorker,
  type TaskQueueWorkers,
  type WaitForWorkerOptions,
  type WorkerCheckOptions,
  type WorkflowServiceClient,
} from './client/workers';
export type { CompactionInput, CompactionOutcomeName, CompactionPhase, CompactionResult, LeaseView } from './workflows/compaction';
export type { GcInput, GcOptions, GcPassReport, PassSetup } from './workflows/gc';
export type { PassRules } from './protocol/rules';
export type { ActivitySettings } from './workflows/activity-options';
export type { CorruptLease, GcReport, GcTotals, NamespaceRootProblem } from './protocol/collector-report';
export type { RootProblem } from './protocol/collector';
/** The workflow functions, as types: `client.workflow.start<typeof gcWorkflow>('gcWorkflow', …)`; workers load them from `WORKFLOWS_PATH`. */
export type { compactionWorkflow, gcWorkflow } from './workflows';

// Workers.
export {
  ACTIVITY_SLOTS_ENV,
  createWorker,
  DEFAULT_ACTIVITY_SLOTS,
  STORE_CHECK_ENV,
  STORE_CHECK_MODES,
  storeCheckFromEnv,
  workerOptionsFromEnv,
  WORKFLOWS_PATH,
  type CreateWorkerOptions,
  type StoreCheckMode,
} from './worker';
export { startWorkerFromEnv, type StartWorkerFromEnvOptions, type StartWorkerOptions, type WorkerFromEnv } from './worker/from-env';
export { installRuntime, LOG_LEVEL_ENV, METRICS_ENV, requireOneTemporalRuntime, WORKER_HEARTBEAT_INTERVAL_MS } from './worker/runtime';
export { temporalTarget, type TemporalTarget } from './worker/connect';
export { COLLECTOR_TASK_QUEUE_ENV, collectorTaskQueueFromEnv, DEFAULT_TASK_QUEUE, roleTaskQueueFromEnv, TASK_QUEUE_ENV, taskQueueFromEnv } from './worker/task-queue';
export { FORMAT_MODULE_ENV, FormatModuleError, loadFormatModule, type FormatModule } from './worker/format-module';

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
  storeIdentity,
  StoreUnavailableError,
  type BucketVersioning,
  type DeleteFailure,
  type DeleteResult,
  type ListPage,
  type ListRequest,
  type ObjectInfo,
  type ObjectStore,
  type StoredObject,
  type StreamedObject,
  type StreamOptions,
} from './store/port';
export {
  createEmbeddedObjectStore,
  createS3ObjectStore,
  DEFAULT_EMBEDDED_PATH,
  EMBEDDED_ENV,
  objectStoreFromEnv,
  requireFitStore,
  S3_ENV,
  s3OptionsFromEnv,
  storeIdentityFromEnv,
  STORE_PROPERTIES,
  StoreUnfitError,
  verifyStore,
  type ConditionalDelete,
  type EmbeddedStoreOptions,
  type S3StoreOptions,
  type StoreCheck,
  type StorePropertyId,
  type StorePropertyResult,
  type VerifyStoreOptions,
} from './store';

// The namespace root, through a root codec (docs/plugins.md, docs/formats.md).
export {
  addSegments,
  checkRoot,
  groupSegments,
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
  type ReadRoot,
  type RootWriteOptions,
} from './protocol/root-io';
export { NothingToRestoreError, RootWentBackError } from './protocol/judged-root';
export { EmptyCompactionError } from './protocol/publication';
export { LeaseCorruptError } from './lease/codec';
export { InputChangedError } from './compactor/inputs';
export { StoreMismatchError } from './activities/store-binding';

// Segments: the reference format, its writer and its readers (docs/formats.md, docs/readers.md).
export { MAX_SEGMENT_LINE_BYTES, SEGMENT_EXTENSION, SegmentCorruptError, type SegmentRecord } from './segments/format';
export { DEFAULT_SEGMENT_FORMAT_VERSION, SEGMENT_FORMAT_VERSIONS, type SegmentFormatVersion } from './segments/versions';
export { InvalidSegmentInputError, MAX_KEY_BYTES } from './segments/records';
export { writeInputSegment, WriterBudgetExceededError, type WriterOptions } from './writer';
export { lookupRecord, readableUntilMs, readGroupRecords, readGroupSnapshot, type GroupSnapshot, type LiveRecord } from './reader';

// A format's compactor (docs/plugins.md) and the conformance kit.
export {
  CompactorRuleError,
  MAX_PROGRESS_BYTES,
  OutputMissingError,
  PROGRESS_VERSION,
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
  type ProgressVersion,
  type StagedStore,
} from './compactor';
export type { JobRef } from './protocol/lease-read';
export { InputManifestUnreadableError, readInputManifest, type InputManifest, type InputManifestRef } from './protocol/input-manifest';

// What the collector deleted and why: each pass's deletion manifests (docs/operations.md).
export type { DeletionEvidence, DeletionRule, LeaseFacts, ManifestLine } from './protocol/manifest';
export type { LeaseStatus } from './lease/state';
export { listGcPasses, readPassManifest, showGcPass, whyDeleted, type DeletionFound, type ManifestPart, type PassSummary } from './protocol/manifest-read';
export { dryRunStore, type RecordedWrite } from './store/dry-run';
export { checkFormat, FormatCheckError, type FormatUnderTest } from './conformance';
