/**
 * A worker's setup: what it is built from, read from the environment in one place for every entry
 * point (src/worker/from-env.ts). Light on purpose: the CLI reads it before it loads the native worker.
 */
import { environment, settingsFromEnv, workerRoleFromEnv, type CompactionSettings, type WorkerRole } from '../config';
import { temporalTarget, type TemporalTarget } from './connect';
import { configuredFormat, type FormatModule } from './format-module';
import { roleTaskQueueFromEnv } from './task-queue';

/** What a worker is built from, read once; `env` still names the store and the Runtime's settings. */
export interface WorkerSetup {
  readonly env: NodeJS.ProcessEnv;
  readonly settings: CompactionSettings;
  readonly temporal: TemporalTarget;
  readonly role: WorkerRole;
  readonly taskQueue: string;
  /** The format module's plug-ins; none: the defaults, unless given in code. */
  readonly format: FormatModule | undefined;
}

/** What an entry point has already parsed, in place of the environment's value. */
export interface WorkerSetupOverrides {
  readonly settings?: CompactionSettings;
  readonly temporal?: TemporalTarget;
  readonly role?: WorkerRole;
  /** A format module's specifier (`worker --format`), over `COMPACTION_FORMAT_MODULE`. */
  readonly formatModule?: string;
}

/**
 * The worker's setup from `env`, each value overridable. The format module is loaded and checked
 * here, before anything connects: a wrong one is a configuration error, not a failed job later.
 */
export async function workerSetupFromEnv(
  given?: NodeJS.ProcessEnv,
  overrides: WorkerSetupOverrides = {},
): Promise<WorkerSetup> {
  const env = environment(given);
  const role = overrides.role ?? workerRoleFromEnv(env);
  const format = await configuredFormat(env, overrides.formatModule);
  return {
    env,
    settings: overrides.settings ?? settingsFromEnv(env),
    temporal: overrides.temporal ?? temporalTarget(env),
    role,
    taskQueue: roleTaskQueueFromEnv(role, env),
    format,
  };
}
