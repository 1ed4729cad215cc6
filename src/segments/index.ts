export * from './format';
export { BlockSegmentBuilder, MAX_BLOCK_RECORD_BYTES } from './blocks';
export * from './merge';
export * from './versions';
