/**
 * The Temporal Web UI in a real browser (chromium): a published compaction, a compaction fenced by
 * the collector and run again as a new job, the collector pass that claimed its lease, and the
 * workflow list filtered by a search attribute. Screenshots go to docs/screenshots (README).
 */
import type { Client } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { describeGcSchedule, ensureGcSchedule, startCompaction, triggerGcPass } from '../../src/client';
import { SEARCH_ATTRIBUTES, startTemporalDevServer, type TemporalDevServer } from '../../src/devservers';
import {
  isInputListKeyOf,
  jobId,
  jobPrefix,
  leaseKey,
  namespaceId,
  newJobId,
  newSegmentId,
  stagedSegmentKey,
} from '../../src/keys';
import { readRoot } from '../../src/protocol';
import { jsonRootCodec } from '../../src/root';
import { decodeLease, isLeaseLive } from '../../src/lease';
import type { CompactionResult } from '../../src/workflows/compaction';
import type { GcReport } from '../../src/workflows/gc';
import { openBrowser, type UiBrowser } from '../support/browser';
import { gate, interceptStore } from '../support/faults';
import { makeInputs, writeInputs } from '../support/records';
import { openTestStore, type TestStore } from '../support/stores';
import { connectClient, quickExpirySettings, startTestWorker, uniqueId, type RunningWorker } from '../support/temporal';

const settings = quickExpirySettings;
const SCREENSHOTS = 'docs/screenshots';
// The UI is a large single-page app: on a loaded 2-core machine a page takes seconds to render.
const RENDER_TIMEOUT_MS = 60_000;
const poll = { timeout: 60_000, interval: 200 };

interface Run {
  readonly workflowId: string;
  readonly runId: string;
}

describe('the Temporal UI in a real browser', { timeout: 240_000 }, () => {
  let temporal: TemporalDevServer;
  let fixture: TestStore;
  let worker: RunningWorker;
  let stallingWorker: RunningWorker;
  let client: Client;
  let closeClient: () => Promise<void>;
  let browser: UiBrowser;
  const ns = uniqueId('ui').toLowerCase();
  const scheduleId = uniqueId('ui-gc');
  let published: Run & { result: CompactionResult };
  let fenced: Run & { jobId: string };
  let rerun: Run & { result: CompactionResult };
  let pass: Run & { report: GcReport };
  const stalled = gate();

  beforeAll(async () => {
    temporal = await startTemporalDevServer({ uiPort: 0, searchAttributes: SEARCH_ATTRIBUTES });
    fixture = await openTestStore('minio');
    ({ client, close: closeClient } = await connectClient(temporal.address));
    worker = await startTestWorker(fixture.store, settings, uniqueId('ui'), temporal.address);
    browser = await openBrowser();

    // A lease-less staged segment, for the pass to reclaim once it is older than the staging grace.
    await fixture.store.put(stagedSegmentKey(namespaceId(ns), newJobId(), newSegmentId(), 'mseg'), new Uint8Array(10));
    const orphanWritten = Date.now();

    await writeInputs(fixture.store, ns, 'inodes', makeInputs(3, 300));
    const plain = await startCompaction(client, { namespaceId: ns, group: 'inodes', taskQueue: worker.taskQueue });
    published = { workflowId: plain.workflowId, runId: plain.firstExecutionRunId, result: await plain.result() };
    expect(published.result.outcome).toBe('published');
    // Its input list, written before it published, is a staged object no root names.
    const publishedAt = Date.now();
    // A first pass sees the inputs it retired and stamps them visible: their reader grace counts from there (spec
    // 6c.2).
    await client.workflow.execute('gcWorkflow', {
      taskQueue: worker.taskQueue,
      workflowId: uniqueId('ui-stamp'),
      args: [{ namespaces: [ns] }],
    });

    // The next job stalls before it reads, and none of its lease refreshes reaches the store: its lease expires.
    await writeInputs(fixture.store, ns, 'bindings', makeInputs(3, 300));
    let refreshesFail = true;
    const stallingStore = interceptStore(fixture.store, async (operation) => {
      // While the job stalls, its only compare-and-swap writes are lease refreshes.
      if (operation === 'putIfMatch' && refreshesFail) throw new Error('store unreachable for the job');
      if (operation === 'getStream' && !stalled.opened) await stalled.wait;
    });
    stallingWorker = await startTestWorker(stallingStore, settings, uniqueId('ui-stalling'), temporal.address);
    const handle = await startCompaction(client, {
      namespaceId: ns,
      group: 'bindings',
      taskQueue: stallingWorker.taskQueue,
    });
    const firstJob = await vi.waitUntil(async () => (await handle.query<{ jobId?: string }>('leaseState')).jobId, poll);
    const ref = { namespaceId: namespaceId(ns), jobId: jobId(firstJob) };
    await vi.waitUntil(async () => {
      const stored = await fixture.store.get(leaseKey(ref.namespaceId, ref.jobId)).catch(() => undefined);
      return (
        stored !== undefined && !isLeaseLive(decodeLease(stored.body, ref), Date.now(), settings.timing.leaseExpiryMs)
      );
    }, poll);
    await new Promise((r) =>
      setTimeout(
        r,
        Math.max(0, Math.max(orphanWritten, publishedAt) + settings.timing.stagingGraceMs + 500 - Date.now()),
      ),
    );
    // And past the reader grace of the inputs the published job retired, so the pass reclaims them too (spec 6a).
    const visibleAt = Math.max(
      ...((await readRoot(fixture.store, namespaceId(ns), jsonRootCodec)).root.retired ?? []).map(
        (r) => r.visible_at_ms ?? Number.POSITIVE_INFINITY,
      ),
    );
    expect(visibleAt).toBeLessThan(Date.now());
    await new Promise((r) => setTimeout(r, Math.max(0, visibleAt + settings.timing.readerGraceMs + 500 - Date.now())));

    // The collector as an operator runs it: its schedule (a yearly cron, so only the trigger starts it), triggered now.
    await ensureGcSchedule(client, {
      scheduleId,
      cron: '0 0 1 1 *',
      taskQueue: worker.taskQueue,
      pass: { namespaces: [ns] },
    });
    await triggerGcPass(client, { scheduleId });
    const started = await vi.waitUntil(
      async () => (await describeGcSchedule(client, { scheduleId })).info.recentActions[0]?.action.workflow,
      poll,
    );
    const report = await client.workflow
      .getHandle<() => Promise<GcReport>>(started.workflowId, started.firstExecutionRunId)
      .result();
    pass = { workflowId: started.workflowId, runId: started.firstExecutionRunId, report };
    // Both jobs' leases had expired: the published one's and the stalled one's; the orphan, the three retired inputs,
    // the published job's unnamed tombstone segments (written before its inputs were retired, so past the grace) and
    // its input list went, and the stalled job's input list if it was past the staging grace too.
    const stalledListGone = !(await fixture.store.list({ prefix: jobPrefix(ref.namespaceId, ref.jobId) })).objects.some(
      (o) => isInputListKeyOf(ref.namespaceId, ref.jobId, o.key),
    );
    expect(report.totals).toMatchObject({
      claimed: 2,
      orphaned: 1,
      objectsDeleted: 5 + published.result.tombstones.length + Number(stalledListGone),
      retiredDeleted: 3,
    });

    refreshesFail = false;
    stalled.open();
    const result = await handle.result();
    expect(result).toMatchObject({ outcome: 'published', fencedJobIds: [firstJob] });
    fenced = { workflowId: handle.workflowId, runId: handle.firstExecutionRunId, jobId: firstJob };
    rerun = {
      workflowId: handle.workflowId,
      runId: (await client.workflow.getHandle(handle.workflowId).describe()).runId,
      result,
    };
  }, 240_000);

  afterAll(async () => {
    stalled.open();
    await client?.schedule
      .getHandle(scheduleId)
      .delete()
      .catch(() => undefined);
    await browser?.close();
    await stallingWorker?.stop();
    await worker?.stop();
    await closeClient?.();
    await fixture?.store.close();
    await temporal?.stop();
  });

  const runUrl = ({ workflowId, runId }: Run, tab: string) =>
    `${temporal.uiUrl}/namespaces/default/workflows/${encodeURIComponent(workflowId)}/${runId}/${tab}`;

  /**
   * Waits until every text is visible on the page or in one of its frames (the UI renders summaries and details,
   * markdown, in sandboxed iframes), scrolling down meanwhile.
   */
  async function expectVisible(...texts: string[]): Promise<void> {
    for (const text of texts) {
      const shown = async () => {
        // A frame may be detached while the UI re-renders: that frame does not show it (yet).
        for (const frame of browser.page.frames())
          if (
            await frame
              .getByText(text)
              .first()
              .isVisible()
              .catch(() => false)
          )
            return true;
        // Long event histories render their rows as they are scrolled to.
        await browser.page.mouse.wheel(0, 600);
        return false;
      };
      await vi.waitUntil(shown, { timeout: RENDER_TIMEOUT_MS, interval: 250 }).catch(() => {
        throw new Error(`"${text}" not visible at ${browser.page.url()} within ${RENDER_TIMEOUT_MS} ms`);
      });
    }
  }

  /**
   * Opens a tab of a run's detail page: `history`, `user-metadata` (summary, details, current details),
   * `search-attributes`.
   */
  async function openRun(run: Run, tab: string): Promise<void> {
    await browser.page.goto(runUrl(run, tab));
    await expectVisible(run.workflowId);
  }

  const screenshot = (name: string) => browser.page.screenshot({ path: `${SCREENSHOTS}/${name}.png` });

  /** The search attributes tab shows each as `"Name": value` in a JSON view. */
  const attributes = (values: Record<string, string | number | boolean>) =>
    Object.entries(values).map(([name, value]) => `"${name}": ${JSON.stringify(value)}`);

  it('a published compaction shows its summary, details, current details (lease, records, bytes), activity summaries and search attributes', async () => {
    const { result } = published;
    await openRun(published, 'user-metadata');
    await expectVisible(
      `Compact group inodes of namespace ${ns} under a lease`,
      'Merges the group',
      'lease left in place',
      `${result.outputs.length} output segments, ${result.recordsOut} records, ${result.bytesOut} bytes`,
    );
    await screenshot('compaction-published');
    await openRun(published, 'history');
    await expectVisible(
      "read the worker's timings",
      'read group inodes of',
      `create lease ${result.jobId}`,
      `compact 3 segments of inodes under lease ${result.jobId}`,
      `publish ${result.outputs.length} segments of ${result.jobId}`,
    );
    await openRun(published, 'search-attributes');
    await expectVisible(
      ...attributes({
        CompactionNamespace: ns,
        CompactionGroup: 'inodes',
        CompactionJobId: result.jobId,
        CompactionOutcome: 'published',
      }),
    );
  });

  it('a compaction whose expired lease the collector claimed shows outcome fenced and lease lost; its next run is a new job that published', async () => {
    await openRun(fenced, 'user-metadata');
    await expectVisible(
      `Compact group bindings of namespace ${ns} under a lease`,
      'CONTINUED AS NEW',
      fenced.jobId,
      'lease lost',
    );
    await screenshot('compaction-fenced');
    await openRun(fenced, 'search-attributes');
    await expectVisible(
      ...attributes({
        CompactionNamespace: ns,
        CompactionGroup: 'bindings',
        CompactionJobId: fenced.jobId,
        CompactionOutcome: 'fenced',
      }),
    );
    await openRun(rerun, 'user-metadata');
    await expectVisible(
      'fenced before: 1',
      rerun.result.jobId,
      `${rerun.result.recordsOut} records, ${rerun.result.bytesOut} bytes`,
    );
  });

  it('a collector pass shows its summary, details, totals and search attributes, and its namespace pass its activity summaries', async () => {
    const t = pass.report.totals;
    await openRun(pass, 'user-metadata');
    await expectVisible(
      'Collector pass: claim expired compaction leases and reclaim what no one owns',
      'One child workflow per namespace',
      `claimed ${t.claimed}, orphaned ${t.orphaned}`,
      `deleted ${t.objectsDeleted} objects, ${t.bytesDeleted} bytes, ${t.leasesDeleted} leases`,
    );
    await screenshot('gc-pass');
    await openRun(pass, 'search-attributes');
    await expectVisible(
      ...attributes({
        GcPrefixesSeen: t.prefixesSeen,
        GcObjectsDeleted: t.objectsDeleted,
        GcCorruptLeases: 0,
        GcDryRun: false,
      }),
    );
    const child = {
      workflowId: `${pass.workflowId}/${ns}`,
      runId: (await client.workflow.getHandle(`${pass.workflowId}/${ns}`).describe()).runId,
    };
    await openRun(child, 'history');
    await expectVisible(
      `Collector pass over namespace ${ns}`,
      // One page: its scan collects it too (no second phase).
      `scan a page of job prefixes of ${ns} from the start`,
    );
  });

  it("the workflow list filtered by CompactionNamespace shows the namespace's compactions and collector pass, and nothing else", async () => {
    const query = `CompactionNamespace = "${ns}"`;
    const { page } = browser;
    await page.goto(`${temporal.uiUrl}/namespaces/default/workflows?query=${encodeURIComponent(query)}`);
    const link = (name: string) => page.getByRole('link', { name, exact: true });
    await link(published.workflowId).first().waitFor({ timeout: RENDER_TIMEOUT_MS });
    for (const id of [fenced.runId, rerun.runId, published.runId])
      await link(id).waitFor({ timeout: RENDER_TIMEOUT_MS });
    await link(`${pass.workflowId}/${ns}`).waitFor({ timeout: RENDER_TIMEOUT_MS });
    expect(await link(pass.workflowId).count()).toBe(0);
    await screenshot('workflows-by-namespace');
  });
});
