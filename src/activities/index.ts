import { createCompactionActivities, type CompactionDeps } from './compaction';
import { withTypedFailures } from './failures';
import { createGcActivities } from './gc';

export type ActivityDeps = CompactionDeps;

/** Every activity of the package, bound to one store and one set of settings. */
export function createActivities(deps: ActivityDeps) {
  return withTypedFailures({ ...createCompactionActivities(deps), ...createGcActivities(deps) });
}

export type Activities = ReturnType<typeof createActivities>;
export type { CompactionActivities, CompactionOutput, WorkflowSettings } from './compaction';
