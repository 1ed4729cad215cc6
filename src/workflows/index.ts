export { compactionWorkflow, leaseStateQuery } from './compaction';
