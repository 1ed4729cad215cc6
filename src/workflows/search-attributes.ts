/**
 * The custom search attributes this package's workflows upsert; every Temporal namespace they run in must register
 * them.
 */
import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';

export const CompactionNamespace = defineSearchAttributeKey('CompactionNamespace', SearchAttributeType.KEYWORD);
export const CompactionGroup = defineSearchAttributeKey('CompactionGroup', SearchAttributeType.KEYWORD);
export const CompactionJobId = defineSearchAttributeKey('CompactionJobId', SearchAttributeType.KEYWORD);
export const CompactionOutcome = defineSearchAttributeKey('CompactionOutcome', SearchAttributeType.KEYWORD);
export const GcPrefixesSeen = defineSearchAttributeKey('GcPrefixesSeen', SearchAttributeType.INT);
export const GcObjectsDeleted = defineSearchAttributeKey('GcObjectsDeleted', SearchAttributeType.INT);
export const GcCorruptLeases = defineSearchAttributeKey('GcCorruptLeases', SearchAttributeType.INT);
export const GcDryRun = defineSearchAttributeKey('GcDryRun', SearchAttributeType.BOOL);
/**
 * Set when a pass ends: true when a namespace was left incomplete for its own reason (the pass's report says which).
 */
export const GcIncomplete = defineSearchAttributeKey('GcIncomplete', SearchAttributeType.BOOL);

export const SEARCH_ATTRIBUTE_KEYS = [
  CompactionNamespace,
  CompactionGroup,
  CompactionJobId,
  CompactionOutcome,
  GcPrefixesSeen,
  GcObjectsDeleted,
  GcCorruptLeases,
  GcDryRun,
  GcIncomplete,
] as const;
