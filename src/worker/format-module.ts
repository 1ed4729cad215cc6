/**
 * A format's plug-ins named by configuration rather than code (docs/plugins.md): `worker --format
 * <module>` or `COMPACTION_FORMAT_MODULE` names an ES module, resolved from the current directory,
 * whose named exports `compactor` and `rootCodec` a worker runs instead of the defaults. Loaded and
 * checked once at start, so a wrong module stops the worker before it polls, not a job later.
 */
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { isAbsolute, join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Compactor } from '../compactor';
import { PROCESS_SETTINGS, settingSetInEnv } from '../config';
import { firstLineOf, TypedError } from '../errors';
import type { RootCodec } from '../root';

/** The module `startWorkerFromEnv`, the worker process and `compaction-lease worker` load a format from. */
export const FORMAT_MODULE_ENV = PROCESS_SETTINGS.formatModule.env;

/** What a format module gave: an export it lacks leaves the worker's default for that plug-in. */
export interface FormatModule {
  readonly compactor?: Compactor;
  readonly rootCodec?: RootCodec;
  /** The module and what it gave, for the worker's start line: `./format.mjs (compactor, rootCodec)`. */
  readonly label: string;
}

/**
 * A format module that cannot be resolved or loaded, or does not export the plug-ins' shapes; the message names the
 * module and what is missing.
 */
export class FormatModuleError extends TypedError {
  readonly failureType = 'FormatModule';
  constructor(
    readonly module: string,
    reason: string,
  ) {
    super(`format module ${JSON.stringify(module)} (${FORMAT_MODULE_ENV}, worker --format) ${reason}`);
  }
}

/** A path (`./`, `../`, absolute) from `cwd`, else a package as `require.resolve` finds it from `cwd`. */
function resolveFormatModule(specifier: string, cwd: string): string {
  if (specifier.startsWith('.') || isAbsolute(specifier)) {
    const file = resolve(cwd, specifier);
    if (!existsSync(file))
      throw new FormatModuleError(
        specifier,
        `names no file: ${file} does not exist (a path is resolved from the current directory, ${cwd})`,
      );
    return file;
  }
  try {
    return createRequire(join(cwd, 'package.json')).resolve(specifier);
  } catch (err) {
    throw new FormatModuleError(
      specifier,
      `cannot be resolved from ${cwd} (${firstLineOf(err)}): install the package there, or name a file with a path starting with ./`,
    );
  }
}

/** The methods of `names` that `value` lacks. */
const missingMethods = (value: unknown, names: readonly string[]): string[] =>
  names.filter((name) => typeof (value as Record<string, unknown> | null)?.[name] !== 'function');

/** The format module `specifier` names, else the one `env` names in {@link FORMAT_MODULE_ENV}; none: the defaults. */
export async function configuredFormat(
  env?: NodeJS.ProcessEnv,
  specifier = settingSetInEnv(PROCESS_SETTINGS, 'formatModule', env),
): Promise<FormatModule | undefined> {
  return specifier ? loadFormatModule(specifier) : undefined;
}

/**
 * Imports the format module `specifier` and checks its named exports: at least one of `compactor`
 * (with `compact`) and `rootCodec` (with `encode` and `decode`). Throws {@link FormatModuleError}.
 */
export async function loadFormatModule(specifier: string, cwd = process.cwd()): Promise<FormatModule> {
  const file = resolveFormatModule(specifier, cwd);
  let exported: Record<string, unknown>;
  try {
    exported = (await import(pathToFileURL(file).href)) as Record<string, unknown>;
  } catch (err) {
    throw new FormatModuleError(
      specifier,
      `cannot be loaded from ${file} (${firstLineOf(err)}): fix the module so that importing it succeeds`,
    );
  }
  const { compactor, rootCodec } = exported;
  if (compactor === undefined && rootCodec === undefined) {
    const names = Object.keys(exported).join(', ') || 'nothing';
    throw new FormatModuleError(
      specifier,
      `exports neither \`compactor\` nor \`rootCodec\` (it exports ${names}): export your Compactor as \`compactor\` and/or your RootCodec as \`rootCodec\`, as named exports`,
    );
  }
  for (const [name, value, methods] of [
    ['compactor', compactor, ['compact']],
    ['rootCodec', rootCodec, ['encode', 'decode']],
  ] as const) {
    const missing = value === undefined ? [] : missingMethods(value, methods);
    if (missing.length)
      throw new FormatModuleError(
        specifier,
        `exports a \`${name}\` without ${missing.map((m) => `a ${m} function`).join(' or ')}: export the plug-in object itself (docs/plugins.md)`,
      );
  }
  const given = (['compactor', 'rootCodec'] as const).filter((name) => exported[name] !== undefined);
  return {
    compactor: compactor as Compactor | undefined,
    rootCodec: rootCodec as RootCodec | undefined,
    label: `${specifier} (${given.join(', ')})`,
  };
}
