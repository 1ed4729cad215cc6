/**
 * A collector pass run by the pass plan against a store directly, without Temporal: the decisions a pass makes, at a
 * clock a test chooses.
 */
import { resolveTiming, type Timing } from '../../src/config';
import type { NamespaceId } from '../../src/keys';
import { executeOnStore, runNamespacePass, startNamespacePass, type PassRules } from '../../src/collector';
import type { GcReport } from '../../src/collector/report';
import { jsonRootCodec } from '../../src/root';
import type { ObjectStore } from '../../src/store';

/** The pass id of a pass a test runs or claims for: any valid id names its claims. */
export const TEST_PASS_ID = 'gc_0000000000001_00000000000000aa';

/**
 * One pass over `ns` whose clock is `aheadMs` past now, under `timing` (the defaults unless given):
 * ahead of the store's `LastModified` and of the leases' heartbeats by the age a test needs.
 */
export function passAhead(
  store: ObjectStore,
  ns: NamespaceId,
  aheadMs: number,
  timing: Timing = resolveTiming(),
): Promise<GcReport> {
  const { leaseExpiryMs, stagingGraceMs, readerGraceMs, lostWriteGraceMs } = timing;
  const rules: PassRules = {
    nowMs: Date.now() + aheadMs,
    leaseExpiryMs,
    stagingGraceMs,
    readerGraceMs,
    lostWriteGraceMs,
    dryRun: false,
    prefixesPerPage: 100,
    prefixConcurrency: 4,
    keysPerFlush: 100,
    reportLimit: 10,
    passId: TEST_PASS_ID,
    leaseRefreshIntervalMs: timing.leaseRefreshIntervalMs,
  };
  return runNamespacePass(
    startNamespacePass(ns, rules),
    (command, progress) => executeOnStore({ store, namespaceId: ns, rules, codec: jsonRootCodec }, command, progress),
    async () => {},
  );
}
