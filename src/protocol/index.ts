export * from './lease-read';
export * from './job-lease';
export * from './root-io';
export * from './publication';
export * from './collector';
export type { OwnerRules, ReclaimOptions } from './rules';
export * from './collector-execute';
export * from './collector-plan';
export * from './collector-report';
