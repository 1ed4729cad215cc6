/**
 * The main job: a worker on the configured store (embedded under ./data by default, S3 when
 * `COMPACTION_S3_BUCKET` is set) against a Temporal server (`TEMPORAL_ADDRESS` / profile, else a dev
 * server started here with its UI on port 8233). It seeds a demo namespace if it is empty, runs a
 * compaction, prints its progress and outcome, and keeps serving until interrupted (`--once`: exit).
 */
import { join } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { defaultPayloadConverter } from '@temporalio/common';
import { Command } from 'commander';
import { compactionResult, DEFAULT_GC_SCHEDULE_ID, ensureGcSchedule, runGcPass, startCompaction } from './client';
import type { LeasedProgress } from './activities/compaction';
import type { CompactionProgress } from './compactor';
import {
  PROCESS_SETTINGS,
  resolveSettings,
  settingFromEnv,
  SettingsError,
  settingsFromEnv,
  settingsSetInEnv,
  shrunkTiming,
  TIMING_SETTINGS,
  WORKER_ROLE_ENV,
  WORKER_SETTINGS,
} from './config';
import { SEARCH_ATTRIBUTES, startTemporalDevServer } from './devservers';
import { namespaceId } from './keys';
import { readRootIfAny } from './protocol';
import { jsonRootCodec } from './root';
import type { SegmentRecord } from './segments';
import type { ObjectStore } from './store';
import { startWorker } from './worker/from-env';
import { workerSetupFromEnv } from './worker/setup';
import { writeInputSegment } from './writer';
import type { LeaseView } from './workflows/compaction';

const DEMO_NAMESPACE = 'demo';
const DEMO_GROUP = 'bindings';

/**
 * The demo's timings: the environment's when it sets any, else shrunk so refreshes show within
 * seconds, with a 5 s heartbeat timeout unless one is set (the expiry must cover it).
 */
function demoSettings() {
  if (Object.keys(settingsSetInEnv(TIMING_SETTINGS)).length) return settingsFromEnv();
  // Only what the environment sets: a default derived from the default timings (the root races' wait
  // cap) is derived again from the shrunk ones.
  const setInEnv = settingsSetInEnv(WORKER_SETTINGS);
  const heartbeatTimeoutMs = setInEnv.heartbeatTimeoutMs ?? 5000;
  return resolveSettings({
    ...setInEnv,
    timing: shrunkTiming(2000, heartbeatTimeoutMs),
    heartbeatTimeoutMs,
    targetSegmentBytes: 32 * 1024,
  });
}

/** A few thousand records over several input segments, overlapping keys, rising seqs, some tombstones. */
async function seedDemoNamespace(store: ObjectStore, writerBudgetMs: number): Promise<void> {
  // The demo seeds with writeInputSegment: the reference root.
  if (await readRootIfAny(store, namespaceId(DEMO_NAMESPACE), jsonRootCodec)) return;
  let seq = 0;
  for (let segment = 0; segment < 6; segment++) {
    const records: SegmentRecord[] = [];
    for (let i = 0; i < 1000; i++) {
      const key = `binding/${String((i * 7 + segment * 131) % 4000).padStart(5, '0')}`;
      if (records.some((r) => r.key === key)) continue;
      records.push(
        i % 17 === 0 ? { key, seq: ++seq, tombstone: true } : { key, seq: ++seq, value: `inode-${segment}-${i}` },
      );
    }
    await writeInputSegment(store, { namespaceId: DEMO_NAMESPACE, group: DEMO_GROUP }, records, { writerBudgetMs });
  }
  console.log(`seeded namespace ${DEMO_NAMESPACE}: 6 input segments in group ${DEMO_GROUP}`);
}

async function main(): Promise<void> {
  const options = new Command()
    .option('--once', 'exit after the demo instead of serving')
    .parse()
    .opts<{ once?: boolean }>();
  const setup = await demoWorkerSetup();
  const { settings, taskQueue } = setup;
  const temporal = await demoTemporal(setup);
  const started = await startWorker({ ...setup, temporal: temporal.target });
  const { store } = started;
  const { devServer } = temporal;
  console.log(
    `store ${store.description}; Temporal ${temporal.target.address}${devServer ? ` (dev server, UI ${devServer.uiUrl})` : ''}`,
  );
  const { connectionOptions } = temporal.target;
  const connection = await Connection.connect({
    address: temporal.target.address,
    tls: connectionOptions.tls,
    metadata: connectionOptions.metadata,
    apiKey: connectionOptions.apiKey,
  });
  const client = new Client({ connection, namespace: temporal.target.namespace });

  // The seed is in the reference formats: a format module's plug-ins compact what its own writer left there.
  if (setup.format)
    console.log(
      `format ${setup.format.label}: namespace ${DEMO_NAMESPACE} is not seeded, group ${DEMO_GROUP} is compacted as your writer left it`,
    );
  else await seedDemoNamespace(store, settings.timing.writerBudgetMs);
  const handle = await startCompaction(client, { namespaceId: DEMO_NAMESPACE, group: DEMO_GROUP, taskQueue });
  console.log(
    `compaction ${handle.workflowId}: ${temporal.uiUrl}/namespaces/${temporal.target.namespace}/workflows/${encodeURIComponent(handle.workflowId)}`,
  );
  // Only the reference compactor's progress is a CompactionProgress.
  const result = await compactionWithProgress(handle, !setup.format?.compactor);
  console.log(
    `outcome ${result.outcome}: job ${result.jobId}, ${result.inputCount} inputs → ${result.outputs.length} outputs, ` +
      `${result.recordsOut} records, ${result.bytesOut} bytes${result.detail ? ` (${result.detail})` : ''}`,
  );
  await scheduleAndRunGcPass(client, taskQueue, settings.timing.readerGraceMs);

  if (!options.once) {
    console.log(
      `serving: worker on task queue ${taskQueue}${devServer ? `, UI ${devServer.uiUrl}` : ''}. Ctrl-C to stop.`,
    );
    await new Promise<void>((resolve) => process.once('SIGINT', resolve).once('SIGTERM', resolve));
  }
  // Ctrl-C already shuts the worker down through the Runtime's shutdown signals; this also closes its connection and
  // store.
  await started.stop();
  await connection.close();
  await devServer?.stop();
}

/**
 * The demo's worker, assembled as every worker is (src/worker/from-env.ts): the environment's store,
 * role, task queue, format module and Runtime settings; only the timings are the demo's own. Its one
 * worker runs the compaction and the collector pass, so it must serve both roles.
 */
async function demoWorkerSetup() {
  const setup = await workerSetupFromEnv(undefined, { settings: demoSettings() });
  if (setup.role !== 'all')
    throw new SettingsError(
      `the demo runs a compaction and a collector pass on its one worker: ${WORKER_ROLE_ENV} must be all or unset, not ${setup.role}`,
    );
  return setup;
}

/**
 * The configured Temporal server, else a dev server started here (with its UI on port 8233), which the demo stops at
 * its end.
 */
async function demoTemporal(setup: Awaited<ReturnType<typeof demoWorkerSetup>>) {
  const devServer = setup.temporal.configured
    ? undefined
    : await startTemporalDevServer({
        port: 7233,
        uiPort: 8233,
        dbFilename: join('data', 'temporal.db'),
        searchAttributes: SEARCH_ATTRIBUTES,
      });
  const address = devServer?.address ?? setup.temporal.address;
  return {
    devServer,
    target: { ...setup.temporal, address, connectionOptions: { ...setup.temporal.connectionOptions, address } },
    uiUrl: devServer?.uiUrl ?? 'your Temporal UI',
  };
}

/**
 * The compaction's result, its phase and progress printed as they change meanwhile: a run that waits
 * for a worker, or whose workflow task keeps failing, says so instead of waiting in silence.
 * `referenceProgress`: the heartbeats are the reference compactor's, whose counts can be printed.
 */
async function compactionWithProgress(
  handle: Awaited<ReturnType<typeof startCompaction>>,
  referenceProgress: boolean,
): Promise<Awaited<ReturnType<typeof compactionResult>>> {
  const done = compactionResult(handle);
  let last = '';
  let finished = false;
  // One poll at a time, and the last one awaited: a query still retrying once the client closes would throw from its
  // timer.
  let polling = Promise.resolve();
  const progress = setInterval(() => (polling = polling.then(printProgress)), 250);
  async function printProgress() {
    const view = await handle.query<LeaseView>('leaseState').catch(() => undefined);
    const pending = (await handle.describe().catch(() => undefined))?.raw.pendingActivities ?? [];
    const compacting = pending.find((a) => a.activityType?.name === 'compactUnderLease');
    const details = compacting?.heartbeatDetails?.payloads?.[0];
    const p =
      details && referenceProgress
        ? (defaultPayloadConverter.fromPayload<LeasedProgress>(details).progress as CompactionProgress | undefined)
        : undefined;
    const line = `  ${view?.phase ?? 'starting'}${view?.jobId ? ` job ${view.jobId}` : ''}${p ? `: ${p.segmentsFinished} segments, ${p.recordsOut} records written` : ''}`;
    if (line !== last && !finished) console.log((last = line));
  }
  return done.finally(async () => {
    finished = true;
    clearInterval(progress);
    await polling;
  });
}

/** Ensures the collector's schedule, runs one pass now, and prints its totals. */
async function scheduleAndRunGcPass(client: Client, taskQueue: string, readerGraceMs: number): Promise<void> {
  const cron = settingFromEnv(PROCESS_SETTINGS, 'gcCron');
  await ensureGcSchedule(client, { cron, taskQueue });
  console.log(
    `collector schedule ${DEFAULT_GC_SCHEDULE_ID}: ${cron} (${PROCESS_SETTINGS.gcCron.env}); running one pass now`,
  );
  const pass = await runGcPass(client, { workflowId: `${DEFAULT_GC_SCHEDULE_ID}-demo`, taskQueue });
  const t = pass.report.totals;
  console.log(
    `collector pass: ${t.prefixesSeen} job prefixes (${t.live} live, ${t.claimed} claimed, ${t.orphaned} orphaned, ${t.corrupt} corrupt), ` +
      `${t.objectsDeleted} objects deleted (${t.retiredDeleted} retired segments), ${t.retainedInGrace} retired segments kept for readers ` +
      `until ${readerGraceMs / 1000} s after a pass saw them retired${pass.complete ? '' : ' (incomplete: see docs/operations.md)'}`,
  );
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? `${err.name}: ${err.message}` : err);
  process.exit(1);
});
