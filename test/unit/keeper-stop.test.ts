/** The lease keeper stopped by its job's work beside it in one activity, over an embedded store, without Temporal. */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MockActivityEnvironment } from '@temporalio/testing';
import { afterAll, describe, expect, it } from 'vitest';
import { createCompactionActivities } from '../../src/activities/compaction';
import { resolveSettings, shrunkTiming } from '../../src/config';
import { jobId, namespaceId } from '../../src/keys';
import { writeInputList } from '../../src/protocol';
import { jsonRootCodec } from '../../src/root';
import { createEmbeddedObjectStore } from '../../src/store';
import { gate, wrapStore } from '../support/faults';

const settings = resolveSettings({
  timing: shrunkTiming(300, 1000),
  targetSegmentBytes: 4096,
  heartbeatTimeoutMs: 1000,
});
const embedded = createEmbeddedObjectStore({ path: join(mkdtempSync(join(tmpdir(), 'keeper-')), 'store.sqlite') });
afterAll(() => embedded.close());

/** A job whose lease refreshes (CAS writes) are counted and held at `release` once `sent` opens. */
function heldRefreshes(letter: string) {
  const job = { namespaceId: namespaceId('demo'), jobId: jobId(`cmp_${letter.repeat(32)}`) };
  const sent = gate();
  const release = gate();
  const counted = { refreshes: 0 };
  const store = wrapStore(embedded, async (operation, _args, call) => {
    if (operation !== 'putIfMatch') return call();
    counted.refreshes++;
    sent.open();
    await release.wait;
    return call();
  });
  return { job, sent, release, counted, store };
}

describe('the work under its lease, keeper and work in one activity', () => {
  it("returns only once the keeper's refresh in flight has settled, and writes the lease no more", async () => {
    const { job, sent, release, counted, store } = heldRefreshes('b');
    // The work ends while the keeper's first refresh is in flight.
    const activities = createCompactionActivities({
      store,
      settings,
      rootCodec: jsonRootCodec,
      compactor: { compact: () => sent.wait.then(() => ({ outputs: [], recordsOut: 0, bytesOut: 0 })) },
    });
    const held = await activities.createLease({ ...job, ownerId: 'worker-1', startedAtMs: Date.now() });
    const inputList = await writeInputList(store, job, 1, { group: 'bindings', inputs: [], etags: [] });
    let returned = false;
    const leased = new MockActivityEnvironment()
      .run(activities.compactUnderLease, { ...job, inputList, held })
      .finally(() => (returned = true));
    await sent.wait;
    await new Promise((r) => setTimeout(r, 2 * settings.timing.leaseRefreshIntervalMs));
    expect(returned, 'the activity returned with its refresh in flight').toBe(false);
    release.open();
    expect(await leased).toMatchObject({ outputs: [] });
    const written = counted.refreshes;
    await new Promise((r) => setTimeout(r, 2 * settings.timing.leaseRefreshIntervalMs));
    expect(counted.refreshes).toBe(written);
  });
});
