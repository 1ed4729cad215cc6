/**
 * compaction-lease/testing: what a service's tests and benchmarks use and its production code does
 * not. Real servers to test against (the Temporal dev server, MinIO), shrunk timings, a stand-in
 * compactor, the key builders a test needs to look at a job's objects, and the conformance kit for a
 * format's plug-ins (docs/plugins.md). Nothing here is a default of the main entry.
 */

// Real servers, started on free ports and stopped by the caller.
export { startTemporalDevServer, type TemporalDevServer, type TemporalDevServerOptions } from './devservers/temporal';
export { startMinio, type MinioOptions } from './devservers/minio';
export type { S3Endpoint, S3Server } from './devservers/s3';
export { freePort } from './devservers/ports';

// Timings for demos and tests: every invariant of `resolveTiming` kept, never for production workers.
export { defaultTimingDividedBy, shrunkTiming } from './config';

// A compactor that holds its job without reading or writing: the lease keeper's load alone.
export { waitingCompactor, type WaitingCompactorOptions } from './compactor/waiting';

// The keys of a job's prefix, for a test that looks at what a job left (docs/protocol.md).
export {
  inputSegmentsPrefix,
  jobId,
  jobPrefix,
  leaseKey,
  newJobId,
  segmentId,
  stagedSegmentKey,
  type MetadataCompactionId,
  type SegmentId,
} from './keys';

// The conformance kit: a format's plug-ins through the protocol's checks on the embedded store.
export { checkFormat, FormatCheckError, type FormatUnderTest } from './conformance';
