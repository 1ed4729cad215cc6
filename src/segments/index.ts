export {
  asSegmentRecord,
  MAX_SEGMENT_LINE_BYTES,
  SEGMENT_EXTENSION,
  SegmentBuilder,
  SegmentCorruptError,
  type SegmentRecord,
} from './format';
export { isTombstone, MAX_BLOCK_RECORD_BYTES, type MergeRecord } from './blocks';
export { InvalidSegmentInputError, MAX_KEY_BYTES, recordProblem } from './records';
export { isWellFormed, loneSurrogate } from './text';
export * from './merge';
export * from './versions';
export {
  blockIndexFromTail,
  INDEX_TAIL_BYTES,
  readBlockSpan,
  spanBytes,
  type BlockSpan,
  type IndexedBlock,
} from './block-ranges';
export { compactorPool, compactorThreads, loadOnPoolThreads } from './pool';
export { ownedBytes } from './pool-thread';
