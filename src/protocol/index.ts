export * from './lease-read';
export * from './job-lease';
export * from './root-io';
export * from './publication';
export * from './input-list';
export * from './stopwatch';
