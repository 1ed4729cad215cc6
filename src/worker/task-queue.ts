/** The task queue workers poll and clients start on, unless `COMPACTION_TASK_QUEUE` names another. */
export const DEFAULT_TASK_QUEUE = 'compaction-lease';
export const TASK_QUEUE_ENV = 'COMPACTION_TASK_QUEUE';
export const taskQueueFromEnv = (env: NodeJS.ProcessEnv = process.env): string => env[TASK_QUEUE_ENV] || DEFAULT_TASK_QUEUE;
