/**
 * The package's search attributes, and registering them: a Temporal namespace rejects a workflow
 * that upserts an attribute it does not know, so every namespace the workflows run in needs them
 * once (`temporal operator search-attribute create`, or {@link registerSearchAttributes}).
 */
import type { ConnectionLike } from '@temporalio/client';
import type { SearchAttributeType as SdkType } from '@temporalio/common';
import { temporal } from '@temporalio/proto';
import { SEARCH_ATTRIBUTE_KEYS } from '../workflows/search-attributes';

/** Value types the Temporal CLI accepts for `--search-attribute name=Type`. */
export type SearchAttributeType = 'Keyword' | 'Int' | 'Text' | 'Bool' | 'Double' | 'Datetime' | 'KeywordList';

const CLI_TYPE: Record<SdkType, SearchAttributeType> = {
  KEYWORD: 'Keyword',
  INT: 'Int',
  TEXT: 'Text',
  BOOL: 'Bool',
  DOUBLE: 'Double',
  DATETIME: 'Datetime',
  KEYWORD_LIST: 'KeywordList',
};

/** Every custom search attribute the workflows upsert, by name; every Temporal server they run on must register them. */
export const SEARCH_ATTRIBUTES: Readonly<Record<string, SearchAttributeType>> = Object.fromEntries(
  SEARCH_ATTRIBUTE_KEYS.map((key) => [key.name, CLI_TYPE[key.type]]),
);

/** The operator API's enum value for a CLI type name (`addSearchAttributes`). */
const indexedValueType = (type: SearchAttributeType): temporal.api.enums.v1.IndexedValueType =>
  temporal.api.enums.v1.IndexedValueType[
    `INDEXED_VALUE_TYPE_${type.replace(/([a-z])([A-Z])/g, '$1_$2').toUpperCase()}` as keyof typeof temporal.api.enums.v1.IndexedValueType
  ];

/**
 * Registers those of `attributes` the Temporal namespace lacks, through the operator API (a
 * self-hosted or dev server; Temporal Cloud registers them in its own console or `tcld`), and
 * returns their names: an empty list means every one was already there.
 */
export async function registerSearchAttributes(
  connection: ConnectionLike,
  namespace = 'default',
  attributes: Readonly<Record<string, SearchAttributeType>> = SEARCH_ATTRIBUTES,
): Promise<string[]> {
  const { customAttributes } = await connection.operatorService.listSearchAttributes({ namespace });
  const missing = Object.entries(attributes).filter(([name]) => customAttributes?.[name] === undefined);
  if (missing.length) {
    await connection.operatorService.addSearchAttributes({
      namespace,
      searchAttributes: Object.fromEntries(missing.map(([name, type]) => [name, indexedValueType(type)])),
    });
  }
  return missing.map(([name]) => name);
}
