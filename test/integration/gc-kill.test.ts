/**
 * A collector worker SIGKILLed mid-pass (issue 32): the pass's manifest already names everything it deleted, and the
 * next worker's deletions too.
 */
import type { ChildProcess } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, describe, expect, it } from 'vitest';
import {
  compactionsPrefix,
  namespaceId,
  newJobId,
  newSegmentId,
  stagedSegmentKey,
  type NamespaceId,
} from '../../src/keys';
import { updateRoot } from '../../src/protocol';
import { listGcPasses, listManifestPasses, readPassManifest } from '../../src/collector';
import { jsonRootCodec } from '../../src/root';
import { inBatches } from '../../src/store/batches';
import type { GcReport } from '../../src/workflows/gc';
import { storeAndClient, testSettings, uniqueId } from '../support/temporal';
import { spawnWorker } from '../support/worker-process';

const PREFIXES = 400;
const killed = (child: ChildProcess) => new Promise((resolve) => child.once('exit', resolve));

describe('a collector pass across a worker crash', () => {
  const opened = storeAndClient('minio');
  const children: ChildProcess[] = [];
  afterAll(() =>
    Promise.all(
      children.filter((c) => c.exitCode === null && c.signalCode === null).map((c) => (c.kill('SIGKILL'), killed(c))),
    ),
  );

  const stagedLeft = async (ns: NamespaceId): Promise<Set<string>> => {
    const keys = new Set<string>();
    let cursor: string | undefined;
    do {
      const page = await opened.fixture.store.list({ prefix: compactionsPrefix(ns), cursor });
      for (const o of page.objects) keys.add(o.key);
      cursor = page.nextCursor;
    } while (cursor);
    return keys;
  };
  const manifestKeys = async (ns: NamespaceId): Promise<Set<string>> => {
    const keys = new Set<string>();
    for (const pass of await listManifestPasses(opened.fixture.store, ns))
      for (const part of await readPassManifest(opened.fixture.store, ns, pass))
        for (const l of part.lines) keys.add(l.key);
    return keys;
  };

  it('a worker SIGKILLed while its pass deletes leaves a manifest naming every object already gone; the pass resumed elsewhere ends with every deletion named', async () => {
    const { client } = opened;
    const ns = namespaceId(uniqueId('gc-kill').toLowerCase());
    await updateRoot(opened.fixture.store, ns, (r) => r, { codec: jsonRootCodec });
    const seeded = Array.from({ length: PREFIXES }, () => stagedSegmentKey(ns, newJobId(), newSegmentId(), 'seg'));
    await inBatches(seeded, 1, 16, ([key]) =>
      opened.fixture.store.put(key as string, new TextEncoder().encode('orphaned')),
    );
    // The spawned worker's timings (support/worker-process.ts): every staged segment past its staging grace.
    await sleep(testSettings(1000, { heartbeatTimeoutMs: 2000 }).timing.stagingGraceMs + 500);

    const taskQueue = uniqueId('gc-kill-tq');
    const first = spawnWorker(opened.fixture, taskQueue);
    children.push(first);
    const handle = await client.workflow.start('gcWorkflow', {
      taskQueue,
      workflowId: uniqueId('gc-kill'),
      args: [{ namespaces: [ns], prefixesPerPage: 50, prefixConcurrency: 2 }],
    });
    const deadline = Date.now() + 120_000;
    let left = await stagedLeft(ns);
    while (left.size === PREFIXES || left.size > PREFIXES * 0.7) {
      if (Date.now() > deadline) throw new Error(`the pass deleted ${PREFIXES - left.size} of ${PREFIXES} in time`);
      await sleep(20);
      left = await stagedLeft(ns);
    }
    first.kill('SIGKILL');
    await killed(first);

    const goneAtKill = seeded.filter((k) => !left.has(k));
    expect(goneAtKill.length).toBeGreaterThan(0);
    expect(goneAtKill.length).toBeLessThan(PREFIXES);
    const named = await manifestKeys(ns);
    expect(goneAtKill.filter((k) => !named.has(k))).toEqual([]);
    // `gc passes` of the killed pass, from its parts' names alone: what its parts hold, at least what is gone.
    const partsLines = async () =>
      (
        await Promise.all(
          (await listManifestPasses(opened.fixture.store, ns)).map((pass) =>
            readPassManifest(opened.fixture.store, ns, pass),
          ),
        )
      )
        .flat()
        .reduce((n, p) => n + p.lines.length, 0);
    const [atKill] = await listGcPasses(opened.fixture.store, { namespaces: [ns] });
    expect(atKill?.objects).toBe(await partsLines());
    expect(atKill?.byRule.orphaned_prefix).toBeGreaterThanOrEqual(goneAtKill.length);

    children.push(spawnWorker(opened.fixture, taskQueue));
    const report = (await handle.result()) as GcReport;
    expect(await stagedLeft(ns)).toEqual(new Set());
    const namedAfter = await manifestKeys(ns);
    expect(seeded.filter((k) => !namedAfter.has(k))).toEqual([]);
    expect(report.manifests).toHaveLength(1);
    const [after] = await listGcPasses(opened.fixture.store, { namespaces: [ns] });
    expect(after?.objects).toBe(await partsLines());
    // A prefix whose claim the killed worker had created is found claimed by this pass when resumed: its
    // objects are recorded under claimed_prefix then.
    expect((after?.byRule.orphaned_prefix ?? 0) + (after?.byRule.claimed_prefix ?? 0)).toBeGreaterThanOrEqual(PREFIXES);
  });
});
