/**
 * compaction-lease/errors: every error class the package exports, on the common base `TypedError`, and
 * `FAILURE_TYPES`, the one map from a failure type to whether a retry can help. A caller of the main
 * entry catches these by class; a run's failure that crossed Temporal is matched by its `type`, one key
 * of `FAILURE_TYPES` (README, "Failures").
 */

export { FAILURE_TYPES, TypedError, type FailureType } from './errors';
export { InvalidKeyError } from './keys';
export { SettingsError, TimingConfigError } from './config';
export { GcScheduleOwnedError } from './client/schedule';
export { SearchAttributesMissingError, TemporalNamespaceNotFoundError } from './client/search-attributes';
export { WorkflowTaskFailingError } from './client/waiting';
export { NoWorkerPollingError } from './client/workers';
export { FormatModuleError } from './worker/format-module';
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
} from './store/port';
export { StoreUnfitError } from './store';
export { RootCorruptError, RootFormatMismatchError, RootTooLargeError } from './root';
export {
  InvalidRootChangeError,
  RootLostError,
  RootMissingError,
  SegmentLostError,
  SequenceFloorError,
} from './protocol/root-io';
export { RootWentBackError } from './collector/judged-root';
export { EmptyCompactionError } from './protocol/publication';
export { LeaseCorruptError } from './lease/codec';
export { InputChangedError } from './compactor/inputs';
export { StoreMismatchError } from './activities/store-binding';
export { SegmentCorruptError } from './segments/format';
export { InvalidSegmentInputError } from './segments/records';
export { WriterBudgetExceededError } from './writer';
export {
  CompactorRuleError,
  OutputMissingError,
  OutsideJobPrefixError,
  ProgressMismatchError,
  ProgressRefusedError,
  WriteAfterAttemptError,
} from './compactor';
