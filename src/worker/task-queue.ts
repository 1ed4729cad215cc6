/** The task queue workers poll and clients start on, unless configured otherwise. */
export const DEFAULT_TASK_QUEUE = 'compaction-lease';
