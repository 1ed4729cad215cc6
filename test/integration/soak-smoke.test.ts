/**
 * The chaos soak, small enough for CI: a minute of worker kills, a dev-server restart and S3 faults, then a clean
 * audit.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DEFAULT_SOAK_OPTIONS, runSoak } from '../support/soak';

describe('chaos soak (smoke)', () => {
  it(
    'under worker SIGKILLs, a dev-server restart and S3 faults every job finishes and the audit of the whole bucket history finds no violation',
    async () => {
      const workDir = mkdtempSync(join(tmpdir(), 'compaction-soak-smoke-'));
      const report = await runSoak({
        ...DEFAULT_SOAK_OPTIONS,
        durationMs: 60_000,
        jobs: 5,
        concurrency: 2,
        workers: 2,
        namespaces: 1,
        groupsPerNamespace: 3,
        recordsPerSegment: 500,
        killEveryMs: 20_000,
        restartEveryMs: 60_000,
        settleTimeoutMs: 5 * 60_000,
        seed: 5,
        workDir,
        log: (line) => console.log(`[soak] ${line}`),
      });
      console.log(JSON.stringify({ ...report, options: undefined }));
      expect(report.violations).toEqual([]);
      expect(report.incomplete).toEqual([]);
      expect(report.jobs).toMatchObject({ started: 5, failed: 0, unfinished: 0 });
      expect(report.jobs.published).toBeGreaterThan(0);
      expect(report.workerKills).toBeGreaterThanOrEqual(1);
      expect(report.serverRestarts).toBeGreaterThanOrEqual(1);
      expect(Object.values(report.faults).reduce((a, b) => a + b, 0)).toBeGreaterThan(0);
      expect(report.gcPasses.completed).toBeGreaterThan(0);
      expect(report.audit.deletedObjects).toBeGreaterThan(0);
      rmSync(workDir, { recursive: true, force: true });
    },
    12 * 60_000,
  );
});
