import type { WorkerRole } from '../config';
import { createCompactionActivities, type CompactionDeps } from './compaction';
import { withTypedFailures } from './failures';
import { createGcActivities } from './gc';
import { withStoreBinding } from './store-binding';

export type ActivityDeps = CompactionDeps;

/**
 * The local activities through which a workflow reads the settings of the worker running it: they
 * touch no store, and a workflow task may run on any role's worker, so every role registers both.
 */
const WORKFLOW_SETTINGS: readonly string[] = ['compactionSettings', 'gcSettings'];

/**
 * The activities a worker of `role` registers, bound to one store and one set of settings: every
 * one for `all`; for a single role its own and the workflows' settings reads, so an activity of the
 * other role sent to it fails as not registered instead of running under a policy not written for it.
 */
export function createActivities(deps: ActivityDeps, role: WorkerRole = 'all') {
  const byRole = { compaction: createCompactionActivities(deps), collector: createGcActivities(deps) };
  const all = withTypedFailures(
    withStoreBinding({ ...byRole.compaction, ...byRole.collector }, deps.store, WORKFLOW_SETTINGS),
  );
  if (role === 'all') return all;
  const served = new Set([...Object.keys(byRole[role]), ...WORKFLOW_SETTINGS]);
  return Object.fromEntries(Object.entries(all).filter(([name]) => served.has(name))) as Partial<typeof all>;
}

export type { CompactionActivities, CompactionOutput, WorkflowSettings } from './compaction';
export { StoreMismatchError, type StoreBound } from './store-binding';
