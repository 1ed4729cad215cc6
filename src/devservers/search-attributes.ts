/** The package's search attributes in the two spellings a server takes: the CLI's `--search-attribute` type and the operator API's enum. */
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
export const indexedValueType = (type: SearchAttributeType): temporal.api.enums.v1.IndexedValueType =>
  temporal.api.enums.v1.IndexedValueType[
    `INDEXED_VALUE_TYPE_${type.replace(/([a-z])([A-Z])/g, '$1_$2').toUpperCase()}` as keyof typeof temporal.api.enums.v1.IndexedValueType
  ];
