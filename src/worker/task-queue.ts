import { PROCESS_SETTINGS, settingFromEnv, type WorkerRole } from '../config';

/** The task queue workers poll and clients start on, unless `COMPACTION_TASK_QUEUE` names another. */
export const DEFAULT_TASK_QUEUE = PROCESS_SETTINGS.taskQueue.default;
export const TASK_QUEUE_ENV = PROCESS_SETTINGS.taskQueue.env;
export const taskQueueFromEnv = (env?: NodeJS.ProcessEnv): string => settingFromEnv(PROCESS_SETTINGS, 'taskQueue', env);

/**
 * Where a collector pass sends its activities and per-namespace workflows, and the queue a `collector`-role worker
 * polls.
 */
export const COLLECTOR_TASK_QUEUE_ENV = PROCESS_SETTINGS.collectorTaskQueue.env;

/**
 * `COMPACTION_COLLECTOR_TASK_QUEUE`, else `startQueue`: unset, a pass's collector work stays on the
 * queue the pass starts on (by default `COMPACTION_TASK_QUEUE`), served by the workers of role `all` there.
 */
export const collectorTaskQueueFromEnv = (env?: NodeJS.ProcessEnv, startQueue = taskQueueFromEnv(env)): string =>
  settingFromEnv(PROCESS_SETTINGS, 'collectorTaskQueue', env) ??
  PROCESS_SETTINGS.collectorTaskQueue.derive({ taskQueue: startQueue });

/**
 * The queue a worker of `role` polls by default: a collector's own queue for the collector, `COMPACTION_TASK_QUEUE` for
 * the others.
 */
export const roleTaskQueueFromEnv = (role: WorkerRole, env?: NodeJS.ProcessEnv): string =>
  role === 'collector' ? collectorTaskQueueFromEnv(env) : taskQueueFromEnv(env);
