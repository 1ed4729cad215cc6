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

// Ids and keys a service or a format's writer builds (docs/protocol.md).
export {
  familyGroup,
  inputSegmentKey,
  namespaceId,
  newSegmentId,
  rootKey,
  type FamilyGroup,
  type NamespaceId,
} from './keys';

// Settings and timings (README, Configuration).
export { resolveSettings, resolveTiming, settingsFromEnv, type CompactionSettings, type Timing } from './config';

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
export { ensureGcSchedule, triggerGcPass, type GcScheduleOptions } from './client/schedule';
export {
  checkSearchAttributes,
  registerSearchAttributes,
  requireSearchAttributes,
  SEARCH_ATTRIBUTES,
} from './client/search-attributes';
export { type WaitOptions, type WorkflowTaskFailure } from './client/waiting';
export { waitForWorker, type NoWorkerPolling, type PolledFor, type StoppedWorker } from './client/workers';
export type { CompactionResult } from './workflows/compaction';
export type { GcReport } from './collector/report';
/** The workflow functions, as types: `client.workflow.start<typeof gcWorkflow>('gcWorkflow', …)`. */
export type { compactionWorkflow, gcWorkflow } from './workflows';

// Workers.
export { createWorker, type CreateWorkerOptions } from './worker';
export { startWorkerFromEnv, type StartWorkerFromEnvOptions, type WorkerFromEnv } from './worker/from-env';
export { installRuntime } from './worker/runtime';

// The object store: the port an adapter implements (docs/stores.md), its errors, the two adapters, the probe.
export { type ObjectStore } from './store/port';
export {
  createEmbeddedObjectStore,
  createS3ObjectStore,
  objectStoreFromEnv,
  requireFitStore,
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
  type RetiredSegment,
  type RootCodec,
  type RootState,
} from './root';
export { readRoot, readRootIfAny, updateRoot, type RootWriteOptions } from './protocol/root-io';

// Segments: the reference format, its writer and its readers (docs/formats.md, docs/readers.md).
export { type SegmentRecord } from './segments/format';
export { MAX_KEY_BYTES, type SegmentInputRefusal } from './segments/records';
export { writeInputSegment, type WriterOptions } from './writer';
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
  MAX_PROGRESS_BYTES,
  referenceCompactor,
  stagedOutputKey,
  type CompactionAttempt,
  type Compactor,
} from './compactor';

// What the collector deleted and why: each pass's deletion manifests (docs/operations.md).
export { listGcPasses, whyDeleted } from './collector/manifest-read';
