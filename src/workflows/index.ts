export { compactionWorkflow, leaseStateQuery } from './compaction';
export { gcNamespaceWorkflow, gcWorkflow } from './gc';
