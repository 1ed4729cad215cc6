/**
 * The process's environment, read here and nowhere else. Each `COMPACTION_*` variable is parsed by its
 * declaration (src/config/declaration.ts); a bad value fails with its table's typed error, naming the
 * variable, the value and what is allowed. The chains of the AWS SDK and of Temporal's envconfig read
 * the environment {@link environment} gives them.
 */
import { StoreConfigError } from '../store/port';
import {
  EMBEDDED_STORE_SETTINGS,
  PROCESS_SETTINGS,
  S3_SETTINGS,
  TIMING_SETTINGS,
  WORKER_SETTINGS,
  type SettingDeclaration,
  type SettingTable,
  type SettingType,
  type SettingValue,
} from './declaration';
import { resolveSettings, SettingsError, type CompactionSettings, type WorkerRole } from './settings';
import { resolveTiming, TimingConfigError, type Timing } from './timing';

/** `env` when given (a test's, a child process's), else the process's own. */
export const environment = (env?: NodeJS.ProcessEnv): NodeJS.ProcessEnv => env ?? process.env;

/** The error a bad value of each table's settings is: whoever handles that table's errors handles it. */
const failureOf = (table: SettingTable): ((variable: string, message: string) => Error) =>
  table === TIMING_SETTINGS
    ? (_, message) => new TimingConfigError(message)
    : table === S3_SETTINGS || table === EMBEDDED_STORE_SETTINGS
      ? (variable, message) => new StoreConfigError(variable, message)
      : (_, message) => new SettingsError(message);

/** What a declared setting allows, as a message says it. */
function allowed(declared: SettingDeclaration): string {
  switch (declared.kind) {
    case 'whole': {
      const unit =
        declared.unit === 'ms' ? ' of milliseconds' : declared.unit === 'count' ? '' : ` of ${declared.unit}`;
      return declared.max === Number.MAX_SAFE_INTEGER
        ? `a whole number${unit}, at least ${declared.min}`
        : `a whole number${unit} from ${declared.min} to ${declared.max}`;
    }
    case 'choice':
      return `one of ${declared.values.join(', ')}`;
    case 'text':
      return declared.maxLength === undefined
        ? 'text'
        : `text of ${declared.minLength ?? 0} to ${declared.maxLength} characters`;
    case 'flag':
      return 'true or false';
  }
}

/** `raw` as a value of `declared`, or undefined when it is none. */
function parse(declared: SettingDeclaration, raw: string): SettingValue | undefined {
  switch (declared.kind) {
    case 'whole': {
      const n = Number(raw);
      return /^\d+$/.test(raw) && Number.isSafeInteger(n) && n >= declared.min && n <= declared.max ? n : undefined;
    }
    case 'choice': {
      const text = (value: string | number) => (declared.ignoreCase ? String(value).toUpperCase() : String(value));
      return declared.values.find((value) => text(value) === text(raw));
    }
    case 'text':
      return raw.length >= (declared.minLength ?? 0) && raw.length <= (declared.maxLength ?? Infinity)
        ? raw
        : undefined;
    case 'flag':
      return raw === 'true' ? true : raw === 'false' ? false : undefined;
  }
}

/** What reading a setting gives: its value, else its value default; undefined only for a setting without one. */
export type ReadSetting<D> = D extends { default: unknown } ? SettingType<D> : SettingType<D> | undefined;

/** The value `env` sets for setting `name` of `table` (empty is unset), else its value default. */
export function settingFromEnv<T extends SettingTable, K extends keyof T & string>(
  table: T,
  name: K,
  env?: NodeJS.ProcessEnv,
): ReadSetting<T[K]> {
  return (settingSetInEnv(table, name, env) ?? table[name]!.default) as ReadSetting<T[K]>;
}

/** The value `env` sets for setting `name` of `table`, undefined when unset (or empty). */
export function settingSetInEnv<T extends SettingTable, K extends keyof T & string>(
  table: T,
  name: K,
  env?: NodeJS.ProcessEnv,
): SettingType<T[K]> | undefined {
  const declared: SettingDeclaration = table[name]!;
  const variable = declared.env;
  const raw = variable === undefined ? undefined : environment(env)[variable];
  if (variable === undefined || raw === undefined || raw === '') return undefined;
  const value = parse(declared, raw);
  if (value === undefined)
    throw failureOf(table)(variable, `${variable} must be ${allowed(declared)}, not ${JSON.stringify(raw)}`);
  return value as SettingType<T[K]>;
}

/** The settings of `table` that `env` sets, parsed; the unset ones are absent. */
export function settingsSetInEnv<T extends SettingTable>(
  table: T,
  env?: NodeJS.ProcessEnv,
): { [K in keyof T]?: SettingType<T[K]> } {
  return Object.fromEntries(
    Object.keys(table).flatMap((name) => {
      const value = settingSetInEnv(table, name, env);
      return value === undefined ? [] : [[name, value]];
    }),
  ) as { [K in keyof T]?: SettingType<T[K]> };
}

/** The timings `COMPACTION_*_MS` set, the others derived; a bad or unsafe one is a {@link TimingConfigError}. */
export function timingFromEnv(env?: NodeJS.ProcessEnv): Timing {
  return resolveTiming(settingsSetInEnv(TIMING_SETTINGS, env));
}

/**
 * Settings from `COMPACTION_*` variables (see the README's table); a bad one is a {@link SettingsError} or {@link
 * TimingConfigError}.
 */
export function settingsFromEnv(env?: NodeJS.ProcessEnv): CompactionSettings {
  return resolveSettings({ ...settingsSetInEnv(WORKER_SETTINGS, env), timing: timingFromEnv(env) });
}

export const WORKER_ROLE_ENV = PROCESS_SETTINGS.workerRole.env;

/** The role `COMPACTION_WORKER_ROLE` names, `all` when unset; any other value is a {@link SettingsError}. */
export function workerRoleFromEnv(env?: NodeJS.ProcessEnv): WorkerRole {
  return settingFromEnv(PROCESS_SETTINGS, 'workerRole', env);
}
