/**
 * The bounds of options given in code, as zod schemas derived from the declaration: one rule for code and environment.
 */
import { z } from 'zod';
import type { SettingDeclaration, SettingTable, SettingType } from './declaration';

function schemaOfSetting(declared: SettingDeclaration): z.ZodType {
  switch (declared.kind) {
    case 'whole':
      return z.number().int().min(declared.min).max(declared.max);
    case 'choice':
      return z.union(declared.values.map((value) => z.literal(value)));
    case 'text':
      return z
        .string()
        .min(declared.minLength ?? 0)
        .max(declared.maxLength ?? Number.MAX_SAFE_INTEGER);
    case 'flag':
      return z.boolean();
  }
}

/** A strict object of `table`'s settings, each optional (unset: its default). */
export const schemaOf = <T extends SettingTable>(table: T) =>
  z.strictObject(
    Object.fromEntries(Object.entries(table).map(([name, declared]) => [name, schemaOfSetting(declared).optional()])),
  ) as z.ZodType<{
    [K in keyof T]?: SettingType<T[K]>;
  }>;
