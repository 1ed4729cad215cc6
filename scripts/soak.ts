/**
 * The chaos soak (test/support/soak.ts): `npx tsx scripts/soak.ts [--duration 10m --jobs 40 --workers 3 --seed N …]`
 * after `eval "$(scripts/provision.sh)"`. Prints the report at the end (`--json`: as JSON) and
 * exits 1 if the auditor found a violation or the run was incomplete.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Command, InvalidArgumentError } from 'commander';
import { DEFAULT_SOAK_OPTIONS, runSoak, type SoakReport } from '../test/support/soak';

const whole = (value: string): number => {
  if (!/^\d+$/.test(value)) throw new InvalidArgumentError('not a whole number');
  return Number(value);
};
const fraction = (value: string): number => {
  const n = Number(value);
  if (!(n >= 0 && n <= 1)) throw new InvalidArgumentError('not a number from 0 to 1');
  return n;
};
/** `90s`, `10m`, `1h` or milliseconds. */
const duration = (value: string): number => {
  const m = /^(\d+)(ms|s|m|h)?$/.exec(value);
  if (!m) throw new InvalidArgumentError('not a duration such as 90s, 10m or 1h');
  return Number(m[1]) * { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[(m[2] ?? 'ms') as 'ms'];
};

const d = DEFAULT_SOAK_OPTIONS;
const program = new Command('soak')
  .description(
    'chaos soak: compactions and the collector under worker kills, dev-server restarts and S3 faults, then an audit of the bucket history',
  )
  .option('--duration <d>', 'how long the chaos lasts', duration, d.durationMs)
  .option('--jobs <n>', 'compaction workflows in all', whole, d.jobs)
  .option('--concurrency <n>', 'compactions at once', whole, d.concurrency)
  .option('--workers <n>', 'worker processes', whole, d.workers)
  .option('--namespaces <n>', 'namespaces', whole, d.namespaces)
  .option('--groups <n>', 'family groups per namespace', whole, d.groupsPerNamespace)
  .option('--seed <n>', 'seed of the chaos schedule, fault draws, job order and records', whole, d.seed)
  .option('--unit <d>', 'lease refresh interval; every other timing shrinks from it', duration, d.unitMs)
  .option(
    '--heartbeat-timeout <d>',
    'Temporal heartbeat timeout of the long activities',
    duration,
    d.heartbeatTimeoutMs,
  )
  .option('--gc-every <d>', 'collector schedule interval', duration, d.gcEveryMs)
  .option('--kill-every <d>', 'mean time between worker SIGKILLs', duration, d.killEveryMs)
  .option('--restart-every <d>', 'mean time between dev-server restarts', duration, d.restartEveryMs)
  .option('--fault-rate <p>', 'probability that a worker S3 request is faulted', fraction, d.faultRate)
  .option('--records <n>', 'records per input segment', whole, d.recordsPerSegment)
  .option(
    '--settle-timeout <d>',
    'longest wait for the jobs, then for a clean settled collector pass',
    duration,
    d.settleTimeoutMs,
  )
  .option(
    '--work-dir <path>',
    'where the dev-server database, MinIO data and logs go (default: a fresh temporary directory)',
  )
  .option('--json', 'print the report as JSON')
  .parse();

function printReport(r: SoakReport): void {
  const lines = [
    `seed ${r.seed}; machine: ${r.machine.cpu}, ${r.machine.cores} cores, ${r.machine.ramGiB} GiB, node ${r.machine.node}`,
    `loadavg at start ${r.machine.loadavgStart.map((x) => x.toFixed(2)).join(' ')}, at end ${r.machine.loadavgEnd.map((x) => x.toFixed(2)).join(' ')}`,
    `duration ${(r.durationMs.total / 1000).toFixed(0)} s (chaos ${(r.durationMs.chaos / 1000).toFixed(0)} s, jobs done → audit ${(r.durationMs.settle / 1000).toFixed(0)} s)`,
    `jobs: ${r.jobs.started} started, ${r.jobs.published} published, ${r.jobs.unchanged} unchanged, ${r.jobs.fencedAndRerun} fenced and re-run as new jobs, ${r.jobs.endedFenced} ended fenced, ` +
      `${r.jobs.abandoned} abandoned, ${r.jobs.superseded} superseded, ${r.jobs.failed} failed, ${r.jobs.unfinished} unfinished`,
    `faults injected: ${Object.entries(r.faults)
      .map(([k, n]) => `${k} ${n}`)
      .join(', ')} (of ${r.s3Requests} worker S3 requests)`,
    `worker kills ${r.workerKills}, worker exits on their own ${r.workerExits}, dev-server restarts ${r.serverRestarts}`,
    `collector passes: ${r.gcPasses.completed} completed, ${r.gcPasses.failed} failed (schedule unpaused ${r.gcPasses.unpaused} times), ${r.gcPasses.other} other; ` +
      `settled pass clock ${r.gcPasses.settledPassClockMs === undefined ? 'none' : new Date(r.gcPasses.settledPassClockMs).toISOString()}`,
    `audited: ${r.audit.rootVersions} root versions, ${r.audit.leases} leases (${r.audit.leaseVersions} versions, ${r.audit.claims} claims, ${r.audit.leasesRecreated} re-created), ` +
      `${r.audit.stagedObjects} staged keys, ${r.audit.deletedObjects} deletes`,
    `violations: ${r.violations.length}`,
    ...r.violations.map((v) => `  ${v.rule}: ${v.key}: ${v.detail}`),
    ...(r.incomplete.length ? ['incomplete:', ...r.incomplete.map((i) => `  ${i}`)] : []),
  ];
  console.log(lines.join('\n'));
}

async function main(): Promise<void> {
  const o = program.opts<{
    duration: number;
    jobs: number;
    concurrency: number;
    workers: number;
    namespaces: number;
    groups: number;
    seed: number;
    unit: number;
    heartbeatTimeout: number;
    gcEvery: number;
    killEvery: number;
    restartEvery: number;
    faultRate: number;
    records: number;
    settleTimeout: number;
    workDir?: string;
    json?: boolean;
  }>();
  const workDir = o.workDir ?? mkdtempSync(join(tmpdir(), 'compaction-soak-'));
  const log = (line: string) => console.error(`[soak ${new Date().toISOString()}] ${line}`);
  log(`work dir ${workDir}`);
  const report = await runSoak({
    durationMs: o.duration,
    jobs: o.jobs,
    concurrency: o.concurrency,
    workers: o.workers,
    namespaces: o.namespaces,
    groupsPerNamespace: o.groups,
    seed: o.seed,
    unitMs: o.unit,
    heartbeatTimeoutMs: o.heartbeatTimeout,
    gcEveryMs: o.gcEvery,
    killEveryMs: o.killEvery,
    restartEveryMs: o.restartEvery,
    faultRate: o.faultRate,
    recordsPerSegment: o.records,
    settleTimeoutMs: o.settleTimeout,
    workDir,
    log,
  });
  if (o.json) console.log(JSON.stringify(report, null, 2));
  else printReport(report);
  process.exitCode = report.violations.length > 0 || report.incomplete.length > 0 ? 1 : 0;
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(2);
});
