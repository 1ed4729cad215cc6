/**
 * The API report of the public surface (etc/compaction-lease.api.md), from the built declarations
 * (lib/index.d.ts) by API Extractor. `npx tsx scripts/api-report.ts` rewrites it (`npm run api`
 * builds first); `--check` (run by `npm test`) only compares, and fails naming the command when the
 * surface changed and the report was not updated with it.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { Extractor, ExtractorConfig } from '@microsoft/api-extractor';

const check = process.argv.includes('--check');
const config = ExtractorConfig.loadFileAndPrepare(join(__dirname, '..', 'api-extractor.json'));
mkdirSync(dirname(config.reportFilePath), { recursive: true });
const result = Extractor.invoke(config, { localBuild: !check, showVerboseMessages: false });

if (check && result.apiReportChanged) {
  // The change itself, for the CI log.
  spawnSync('diff', ['-u', config.reportFilePath, config.reportTempFilePath], { stdio: 'inherit' });
  console.error(
    `The public API changed and ${config.reportFilePath} does not show it.\n` +
      `Run \`npm run api\` and commit the report, so that a reviewer sees the change (the new report is ${config.reportTempFilePath}).`,
  );
  process.exit(1);
}
if (!result.succeeded) {
  console.error(`API Extractor found ${result.errorCount} errors and ${result.warningCount} warnings (above)`);
  process.exit(1);
}
console.log(check ? `${config.reportFilePath} matches the public API` : `${config.reportFilePath} updated`);
