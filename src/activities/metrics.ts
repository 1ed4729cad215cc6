/**
 * The package's own metrics, through the Temporal SDK's metric meter: they reach whatever the
 * worker's Runtime exports (Prometheus with `COMPACTION_METRICS_PROMETHEUS`), tagged with the
 * activity's own attributes. Names are prefixed `compaction_lease_`.
 */
import { Context } from '@temporalio/activity';
import type { PrefixOwner, ReclaimTally } from '../collector';
import type { RetiredTally } from '../collector/report';
import { parseManifestPartKey } from '../keys';

const meter = () => Context.current().metricMeter;

export function recordRefresh(latencyMs: number): void {
  meter().createCounter('compaction_lease_refreshes', '1', 'lease refreshes that landed').add(1);
  meter()
    .createHistogram('compaction_lease_refresh_latency', 'int', 'ms', 'time of one lease refresh incl. re-reads')
    .record(Math.round(latencyMs));
}

export function recordFence(): void {
  meter().createCounter('compaction_lease_fences', '1', 'jobs that lost their lease').add(1);
}

/** An expired lease is counted once, when its claim settles it. */
export function recordClaim(outcome: PrefixOwner, dryRun: boolean): void {
  if (outcome.owner === 'expired') return;
  const result = outcome.owner === 'job' ? (outcome.raced ? 'lost_race' : 'live') : outcome.owner;
  meter()
    .createCounter('compaction_lease_claims', '1', 'collector owner decisions by result')
    .add(1, { result, dry_run: dryRun });
  if (outcome.owner === 'corrupt')
    meter().createCounter('compaction_lease_corrupt_leases', '1', 'leases that did not decode').add(1);
}

export function recordReclaim(tally: ReclaimTally, dryRun: boolean): void {
  const m = meter();
  m.createCounter('compaction_lease_objects_reclaimed', '1', 'staged objects deleted').add(tally.objectsDeleted, {
    dry_run: dryRun,
  });
  m.createCounter('compaction_lease_bytes_reclaimed', 'By', 'bytes of staged objects deleted').add(tally.bytesDeleted, {
    dry_run: dryRun,
  });
  const retained = m.createCounter('compaction_lease_objects_retained', '1', 'objects a walk kept, by reason');
  retained.add(tally.retainedReferenced, { reason: 'referenced' });
  retained.add(tally.retainedYoung, { reason: 'young' });
  retained.add(tally.retainedUnrecognised, { reason: 'unrecognised' });
}

export function recordRetiredReclaim(tally: RetiredTally, dryRun: boolean): void {
  const m = meter();
  const deleted = m.createCounter(
    'compaction_lease_segments_reclaimed',
    '1',
    'segments under metadata/segments/ and retired outputs deleted, by reason',
  );
  deleted.add(tally.retiredDeleted, { reason: 'retired', dry_run: dryRun });
  deleted.add(tally.lostWritesDeleted, { reason: 'lost_write', dry_run: dryRun });
  m.createCounter(
    'compaction_lease_segment_bytes_reclaimed',
    'By',
    'bytes of retired segments and lost writes deleted',
  ).add(tally.bytesDeleted, { dry_run: dryRun });
  const retained = m.createCounter(
    'compaction_lease_segments_retained',
    '1',
    'segments the reclaim of retired segments kept, by reason',
  );
  retained.add(tally.retainedReferenced, { reason: 'referenced' });
  retained.add(tally.retainedInGrace, { reason: 'reader_grace' });
  retained.add(tally.retainedYoung, { reason: 'young' });
  retained.add(tally.retainedUnrecognised, { reason: 'unrecognised' });
}

/**
 * A part of a pass's manifest, tagged with the pass: its manifests are `namespaces/{ns}/metadata/gc/{pass}/` (one
 * series per pass).
 */
export function recordManifestPart(key: string, lines: number, dryRun: boolean): void {
  const pass = parseManifestPartKey(key)?.passId ?? 'unknown';
  meter()
    .createCounter(
      'compaction_lease_manifest_lines',
      '1',
      'deletions recorded in collector manifests before they were sent, by pass',
    )
    .add(lines, { pass, dry_run: dryRun });
}
