/**
 * The package's search attributes as the operator API lists a namespace that has every one: name to enum value of its
 * type.
 */
import { temporal } from '@temporalio/proto';
import { SEARCH_ATTRIBUTES } from '../../src/client/search-attributes';

const { IndexedValueType } = temporal.api.enums.v1;
const ENUM = {
  Keyword: IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
  Int: IndexedValueType.INDEXED_VALUE_TYPE_INT,
  Bool: IndexedValueType.INDEXED_VALUE_TYPE_BOOL,
} as const;

export const registeredAttributes = (): Record<string, number> =>
  Object.fromEntries(Object.entries(SEARCH_ATTRIBUTES).map(([name, type]) => [name, ENUM[type as keyof typeof ENUM]]));
