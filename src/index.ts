/** compaction-lease: streaming metadata compactions under an S3 lease, and the collector that reclaims what dead jobs left. */
export * from './keys';
export * from './lease';
export * from './config';
export * from './store';
