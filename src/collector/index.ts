export * from './walk';
export type { OwnerRules, ReclaimOptions } from './rules';
export * from './execute';
export * from './plan';
export * from './report';
export * from './manifest';
export * from './manifest-read';
export * from './manifest-reclaim';
export * from './judged-root';
