/** Value types the Temporal dev server accepts for `--search-attribute name=Type`. */
export type SearchAttributeType = 'Keyword' | 'Int' | 'Text' | 'Bool' | 'Double' | 'Datetime' | 'KeywordList';

/** Custom search attributes the workflows upsert; every Temporal server they run on must register them. */
export const SEARCH_ATTRIBUTES = {
  CompactionNamespace: 'Keyword',
  CompactionGroup: 'Keyword',
  CompactionJobId: 'Keyword',
  CompactionOutcome: 'Keyword',
  GcPrefixesSeen: 'Int',
  GcObjectsDeleted: 'Int',
  GcCorruptLeases: 'Int',
  GcDryRun: 'Bool',
} as const satisfies Record<string, SearchAttributeType>;
