/**
 * The API reports of the package's three entry points, from the built declarations by API Extractor:
 * `compaction-lease` (lib/index.d.ts, etc/compaction-lease.api.md), `compaction-lease/errors`
 * (lib/error-classes.d.ts, etc/compaction-lease-errors.api.md) and `compaction-lease/testing`
 * (lib/testing.d.ts, etc/compaction-lease-testing.api.md). `npx tsx scripts/api-report.ts` rewrites
 * them (`npm run api` builds first); `--check` (run by `npm test`) only compares, and fails naming the
 * command when the surface changed and a report was not updated with it. Either way it fails on an
 * exported name without a doc comment: a name a user imports says what it is for.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { Extractor, ExtractorConfig } from '@microsoft/api-extractor';

const ENTRY_POINTS = [
  { entry: 'lib/index.d.ts', report: 'compaction-lease.api.md' },
  { entry: 'lib/error-classes.d.ts', report: 'compaction-lease-errors.api.md' },
  { entry: 'lib/testing.d.ts', report: 'compaction-lease-testing.api.md' },
] as const;

const check = process.argv.includes('--check');
const root = join(__dirname, '..');
const configPath = join(root, 'api-extractor.json');

/**
 * The exported names a report marks `(undocumented)`: a top-level declaration (members are indented) right after the
 * marker.
 */
function undocumentedNames(report: string): string[] {
  const lines = report.split('\n');
  return lines.flatMap((line, i) => {
    if (!line.startsWith('// @public (undocumented)')) return [];
    const declared =
      /^export (?:declare )?(?:abstract )?(?:class|interface|type|function|const|let|enum|namespace) (\w+)/.exec(
        lines[i + 1] ?? '',
      );
    return declared ? [declared[1] as string] : [];
  });
}

let failed = false;
for (const { entry, report } of ENTRY_POINTS) {
  const configObject = ExtractorConfig.loadFile(configPath);
  configObject.mainEntryPointFilePath = `<projectFolder>/${entry}`;
  configObject.apiReport = { ...configObject.apiReport!, enabled: true, reportFileName: report };
  const config = ExtractorConfig.prepare({
    configObject,
    configObjectFullPath: configPath,
    packageJsonFullPath: join(root, 'package.json'),
  });
  mkdirSync(dirname(config.reportFilePath), { recursive: true });
  const result = Extractor.invoke(config, { localBuild: !check, showVerboseMessages: false });

  if (check && result.apiReportChanged) {
    // The change itself, for the CI log.
    spawnSync('diff', ['-u', config.reportFilePath, config.reportTempFilePath], { stdio: 'inherit' });
    console.error(
      `The public API changed and ${config.reportFilePath} does not show it.\n` +
        `Run \`npm run api\` and commit the report, so that a reviewer sees the change (the new report is ${config.reportTempFilePath}).`,
    );
    failed = true;
  }
  if (!result.succeeded) {
    console.error(
      `API Extractor found ${result.errorCount} errors and ${result.warningCount} warnings in ${entry} (above)`,
    );
    failed = true;
  }
  const undocumented = undocumentedNames(readFileSync(config.reportTempFilePath, 'utf8'));
  if (undocumented.length > 0) {
    console.error(
      `${entry} exports names without a doc comment: ${undocumented.join(', ')}. Write one on each declaration (what it is for, its invariant).`,
    );
    failed = true;
  }
  if (!failed)
    console.log(check ? `${config.reportFilePath} matches the public API` : `${config.reportFilePath} updated`);
}
if (failed) process.exit(1);
