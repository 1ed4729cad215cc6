/** The collection of a page by the pass plan's own steps: stopping at a failed command, and resuming where each prefix stood. */
import { describe, expect, it } from 'vitest';
import { newJobId } from '../../src/keys';
import { EMPTY_TALLY, REPORT_LIMIT, collectPrefixes, type CollectorCommand, type CollectorExecutor, type PageCollection, type PassRules, type SurveyedPrefix } from '../../src/protocol';

const rules: PassRules = {
  nowMs: 1_000_000, leaseExpiryMs: 10_000, stagingGraceMs: 1000, readerGraceMs: 1000, lostWriteGraceMs: 1000, dryRun: false,
  prefixesPerPage: 100, prefixConcurrency: 2, keysPerFlush: 10, reportLimit: REPORT_LIMIT,
};
const expired = (): SurveyedPrefix => ({ jobId: newJobId(), owner: { owner: 'expired', etag: '"e"', lease: '{}' } });

/** Answers each command as the store would for an expired lease with one old staged segment; `failing` throws once for its command. */
function scripted(failing?: (command: CollectorCommand) => boolean) {
  const commands: string[] = [];
  let failed = false;
  const execute: CollectorExecutor = async (command) => {
    await Promise.resolve();
    const jobId = 'jobId' in command ? command.jobId : '';
    if (!failed && failing?.(command)) {
      failed = true;
      throw new Error(`injected: ${command.kind} ${jobId}`);
    }
    commands.push(`${command.kind} ${jobId}`);
    switch (command.kind) {
      case 'claimLease':
        return { kind: 'claimed', owner: { owner: 'collector' } };
      case 'reclaimPrefix':
        return { kind: 'reclaimed', tally: { ...EMPTY_TALLY, objectsDeleted: 1, bytesDeleted: 6 } };
      case 'deleteLease':
        return { kind: 'leaseDeleted' };
      default:
        throw new Error(`unexpected ${command.kind}`);
    }
  };
  return { execute, commands };
}

describe('collecting a page by the pass plan', () => {
  it('a failed command starts no further prefix, lets those in flight release their leases, and a resume from where it stood redoes only that command', async () => {
    const prefixes = Array.from({ length: 5 }, expired);
    const victim = prefixes[0]!.jobId;
    const { execute, commands } = scripted((c) => c.kind === 'reclaimPrefix' && c.jobId === victim);
    let at: PageCollection | undefined;

    await expect(collectPrefixes('ns', prefixes, rules, execute, { onProgress: (p) => (at = p) })).rejects.toThrow(/injected: reclaimPrefix/);

    // The second prefix, in flight beside the first, finished; none after them started.
    expect(at?.prefixes.map((p) => (p === null || p === 'done' ? p : p.command.kind))).toEqual(['reclaimPrefix', 'done', null, null, null]);
    expect(commands.filter((c) => c.startsWith('deleteLease'))).toEqual([`deleteLease ${prefixes[1]!.jobId}`]);

    commands.length = 0;
    const report = await collectPrefixes('ns', prefixes, rules, execute, { ...(at && { resume: at }), onProgress: () => {} });

    expect(report.totals).toMatchObject({ claimed: 5, objectsDeleted: 5, leasesDeleted: 5, failedPrefixes: 0 });
    // No prefix is claimed twice: the first resumes at its walk, the second is done.
    expect(commands.filter((c) => c.startsWith('claimLease'))).toEqual(prefixes.slice(2).map((p) => `claimLease ${p.jobId}`));
    expect(commands).toContain(`reclaimPrefix ${victim}`);
    expect(commands).toContain(`deleteLease ${victim}`);
  });
});
