import { afterAll, describe, expect, it } from 'vitest';
import { createActivities } from '../../src/activities';
import { referenceCompactor } from '../../src/compactor';
import {
  resolveSettings,
  SettingsError,
  WORKER_ROLE_ENV,
  WORKER_ROLES,
  workerRoleFromEnv,
  type WorkerRole,
} from '../../src/config';
import { jsonRootCodec } from '../../src/root';
import { createEmbeddedObjectStore } from '../../src/store';
import {
  ACTIVITY_SLOTS_ENV,
  CACHED_WORKFLOWS_ENV,
  COLLECTOR_TASK_QUEUE_ENV,
  DEFAULT_ACTIVITY_SLOTS,
  DEFAULT_CACHED_WORKFLOWS,
  DEFAULT_TASK_QUEUE,
  roleTaskQueueFromEnv,
  TASK_QUEUE_ENV,
  workerOptionsFromEnv,
} from '../../src/worker';

describe('worker options from the environment', () => {
  it('leaves the defaults alone when nothing is set', () => {
    expect(workerOptionsFromEnv({})).toEqual({});
  });

  it('sets the activity slots', () => {
    expect(workerOptionsFromEnv({ [ACTIVITY_SLOTS_ENV]: '500' })).toEqual({ maxConcurrentActivityTaskExecutions: 500 });
  });

  it.each(['0', '-3', '2.5', 'many', '1e400'])('rejects %s with a typed error naming the variable', (raw) => {
    expect(() => workerOptionsFromEnv({ [ACTIVITY_SLOTS_ENV]: raw })).toThrow(SettingsError);
    expect(() => workerOptionsFromEnv({ [ACTIVITY_SLOTS_ENV]: raw })).toThrow(ACTIVITY_SLOTS_ENV);
  });

  it('gives 10,000 jobs their slot each, with headroom for the collector', () => {
    expect(DEFAULT_ACTIVITY_SLOTS).toBeGreaterThan(10_000);
  });

  it('sets the workflow cache, never below the 40 workflow tasks a worker runs at once', () => {
    expect(workerOptionsFromEnv({ [CACHED_WORKFLOWS_ENV]: '2000' })).toEqual({ maxCachedWorkflows: 2000 });
    expect(() => workerOptionsFromEnv({ [CACHED_WORKFLOWS_ENV]: '39' })).toThrow(CACHED_WORKFLOWS_ENV);
    expect(DEFAULT_CACHED_WORKFLOWS).toBeGreaterThanOrEqual(40);
  });
});

describe('worker roles', () => {
  const deps = {
    store: createEmbeddedObjectStore({ path: ':memory:' }),
    settings: resolveSettings(),
    compactor: referenceCompactor,
    rootCodec: jsonRootCodec,
  };
  afterAll(() => deps.store.close());
  const names = (role: WorkerRole) => Object.keys(createActivities(deps, role)).sort();

  it('a role other than all, compaction or collector stops the worker with a typed error naming the variable and the roles', () => {
    expect(workerRoleFromEnv({})).toBe('all');
    expect(workerRoleFromEnv({ [WORKER_ROLE_ENV]: 'collector' })).toBe('collector');
    expect(() => workerRoleFromEnv({ [WORKER_ROLE_ENV]: 'gc' })).toThrow(SettingsError);
    expect(() => workerRoleFromEnv({ [WORKER_ROLE_ENV]: 'gc' })).toThrow(
      'COMPACTION_WORKER_ROLE must be one of all, compaction, collector, not "gc"',
    );
  });

  it("a collector polls COMPACTION_COLLECTOR_TASK_QUEUE, the other roles COMPACTION_TASK_QUEUE; unset, the collector's queue is COMPACTION_TASK_QUEUE", () => {
    const env = { [TASK_QUEUE_ENV]: 'work', [COLLECTOR_TASK_QUEUE_ENV]: 'gc' };
    expect(WORKER_ROLES.map((role) => roleTaskQueueFromEnv(role, env))).toEqual(['work', 'work', 'gc']);
    expect(roleTaskQueueFromEnv('collector', { [TASK_QUEUE_ENV]: 'work' })).toBe('work');
    expect(roleTaskQueueFromEnv('collector', {})).toBe(DEFAULT_TASK_QUEUE);
  });

  it("each single role registers its own activities and the workflows' settings reads, none of the other role's; all registers both", () => {
    const compaction = names('compaction');
    const collector = names('collector');
    expect(compaction).toEqual(
      expect.arrayContaining([
        'compactionSettings',
        'gcSettings',
        'readGroup',
        'createLease',
        'compactUnderLease',
        'publish',
      ]),
    );
    expect(collector).toEqual(
      expect.arrayContaining([
        'compactionSettings',
        'gcSettings',
        'listNamespaces',
        'claimLease',
        'reclaimPrefix',
        'deleteLease',
      ]),
    );
    expect(compaction.filter((name) => collector.includes(name))).toEqual(['compactionSettings', 'gcSettings']);
    expect(names('all')).toEqual([...new Set([...compaction, ...collector])].sort());
  });
});
