export { asSegmentRecord, MAX_SEGMENT_LINE_BYTES, SEGMENT_EXTENSION, SegmentBuilder, SegmentCorruptError, type SegmentRecord } from './format';
export { MAX_BLOCK_RECORD_BYTES } from './blocks';
export * from './merge';
export * from './versions';
