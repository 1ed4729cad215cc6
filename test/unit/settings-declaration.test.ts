/**
 * The declaration of every setting (src/config/declaration.ts): its `@default` tags, and the errors of a bad value
 * derived from it.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  applyDefaults,
  PROCESS_SETTINGS,
  S3_SETTINGS,
  SETTING_TABLES,
  settingFromEnv,
  SettingsError,
  settingsFromEnv,
  TIMING_SETTINGS,
  TimingConfigError,
  timingFromEnv,
  WORKER_SETTINGS,
  type SettingDeclaration,
  type SettingTable,
  type SettingValue,
} from '../../src/config';
import { s3OptionsFromEnv, StoreConfigError } from '../../src/store';

const source = readFileSync(join(__dirname, '..', '..', 'src', 'config', 'declaration.ts'), 'utf8');
const timing = applyDefaults(TIMING_SETTINGS, {});
const declared = SETTING_TABLES.flatMap((table) => {
  const values: Record<string, SettingValue | undefined> = applyDefaults(table, {}, timing);
  return Object.entries(table as Record<string, SettingDeclaration>).map(([name, declaration]) => ({
    name,
    declaration,
    value: values[name],
  }));
});

/** Why the `@default` tag `tag` does not state `value`, or undefined when it does. */
function tagDisagrees(
  tag: string,
  declaration: SettingDeclaration,
  value: SettingValue | undefined,
): string | undefined {
  // A derived default states its rule, then "= value".
  const stated = (declaration.derive ? tag.slice(tag.lastIndexOf('=') + 1) : tag).trim().replaceAll('*\\/', '*/');
  if (value === undefined)
    return /^(unset|off)\b/.test(stated) || (declaration.unsetMeans && stated.includes(declaration.unsetMeans))
      ? undefined
      : 'states a default, none is declared';
  if (typeof value === 'number') {
    const first = /\d[\d_]*/.exec(stated)?.[0];
    return Number(first?.replaceAll('_', '')) === value ? undefined : `states ${first}, ${value} is declared`;
  }
  if (typeof value === 'boolean')
    return stated.startsWith(String(value)) ? undefined : `states ${stated}, ${value} is declared`;
  return stated.includes(`'${value}'`) ? undefined : `states ${stated}, '${value}' is declared`;
}

describe('the declaration of every setting', () => {
  it("every setting's @default tag states its declared default (derived ones at the defaults)", () => {
    const tags = new Map(
      [...source.matchAll(/@default ([^\n]*?)\s*(?:\*\/)?\n(?:\s*\*[^\n]*\n)*?\s*(?:\*\/\n)?\s*(\w+): \{/g)].map(
        (m) => [m[2]!, m[1]!],
      ),
    );
    const wrong = declared.flatMap(({ name, declaration, value }) => {
      const tag = tags.get(name);
      if (tag === undefined) return [`${name}: no @default tag`];
      const problem = tagDisagrees(tag, declaration, value);
      return problem ? [`${name}: @default ${tag} ${problem}`] : [];
    });
    expect(declared.length).toBeGreaterThan(40);
    expect(wrong).toEqual([]);
  });

  it('every variable is declared once, and every declared default is within its own bounds', () => {
    const variables = declared.flatMap(({ declaration }) => (declaration.env ? [declaration.env] : []));
    expect(new Set(variables).size).toBe(variables.length);
    // Unset, a setting the code defaults (`unsetMeans`) has no value here to bound.
    const outside = declared.filter(({ declaration: d, value }) =>
      value === undefined && d.unsetMeans !== undefined
        ? false
        : d.kind === 'whole'
          ? typeof value !== 'number' || value < d.min || value > d.max
          : d.kind === 'choice'
            ? !(d.values as readonly unknown[]).includes(value)
            : false,
    );
    expect(outside.map(({ name }) => name)).toEqual([]);
  });

  /** Each table's reader and the error class of a bad value there. */
  const readers: [string, SettingTable, (env: Record<string, string>) => unknown, new (...args: never[]) => Error][] = [
    ['timings', TIMING_SETTINGS, (env) => timingFromEnv(env), TimingConfigError],
    ['worker settings', WORKER_SETTINGS, (env) => settingsFromEnv(env), SettingsError],
    [
      'process settings',
      PROCESS_SETTINGS,
      (env) =>
        Object.keys(PROCESS_SETTINGS).map((name) =>
          settingFromEnv(PROCESS_SETTINGS, name as keyof typeof PROCESS_SETTINGS, env),
        ),
      SettingsError,
    ],
    [
      'S3 settings',
      S3_SETTINGS,
      (env) => s3OptionsFromEnv({ [S3_SETTINGS.bucket.env]: 'bucket', ...env }),
      StoreConfigError,
    ],
  ];
  /** A value `declaration` refuses, where there is one. */
  const refused = (d: SettingDeclaration): string | undefined =>
    d.kind === 'whole'
      ? '12 s'
      : d.kind === 'choice' || d.kind === 'flag'
        ? 'yes'
        : d.maxLength !== undefined
          ? 'x'.repeat(d.maxLength + 1)
          : undefined;

  it.each(readers)(
    'a bad value of the %s is its typed error, naming the variable, the value and what is allowed',
    (_, table, read, type) => {
      const bad = Object.values(table).flatMap((d) =>
        d.env && refused(d) !== undefined ? [{ variable: d.env, raw: refused(d)!, d }] : [],
      );
      expect(bad.length).toBeGreaterThan(0);
      for (const { variable, raw, d } of bad) {
        let thrown: unknown;
        try {
          read({ [variable]: raw });
        } catch (err) {
          thrown = err;
        }
        expect(thrown, variable).toBeInstanceOf(type);
        const allowed =
          d.kind === 'whole'
            ? /a whole number.*(, at least | from )\d+/
            : d.kind === 'choice'
              ? `one of ${d.values.join(', ')}`
              : d.kind === 'flag'
                ? 'true or false'
                : 'characters';
        expect((thrown as Error).message, variable).toMatch(
          new RegExp(`^${variable} must be .*, not ${JSON.stringify(raw)}$`),
        );
        expect((thrown as Error).message, variable).toMatch(allowed);
      }
    },
  );
});
