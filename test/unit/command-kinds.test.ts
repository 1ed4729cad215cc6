/**
 * The table of command kinds is the one place a kind is declared: the worker registers an activity per row, under the
 * names workflow histories hold, and the pass's dispatch gives each failure the meaning its row states.
 */
import { describe, expect, it } from 'vitest';
import { createGcActivities } from '../../src/activities/gc';
import {
  COMMAND_KINDS,
  emptyReport,
  EMPTY_TALLY,
  passExecutor,
  type CollectorCommand,
  type CollectorResult,
  type CommandFailure,
  type NamespacePass,
  type PageCollection,
  type PageStep,
  type PassRules,
  type SurveyedPrefix,
} from '../../src/collector';
import { resolveSettings } from '../../src/config';
import { newJobId } from '../../src/keys';
import { jsonRootCodec } from '../../src/root';
import { createEmbeddedObjectStore } from '../../src/store';

const rules: PassRules = {
  nowMs: 1_000_000,
  leaseExpiryMs: 1000,
  stagingGraceMs: 1000,
  readerGraceMs: 1000,
  lostWriteGraceMs: 1000,
  leaseRefreshIntervalMs: 100,
  dryRun: false,
  prefixesPerPage: 10,
  prefixConcurrency: 2,
  keysPerFlush: 10,
  reportLimit: 10,
  passId: 'gc_0000001000000_0123456789abcdef',
  manifests: false,
};

/** A failure for good as the workflow reads one, carrying what the activity said of where it stood. */
class FailedForGood extends Error {
  constructor(readonly failure: CommandFailure) {
    super(failure.message);
  }
}

/** The pass's executor over `activity`, reading {@link FailedForGood} as a command's failure. */
const executorOver = (activity: (command: CollectorCommand) => Promise<CollectorResult>) =>
  passExecutor({
    namespaceId: 'ns',
    rules,
    activity,
    failureOf: (err) => (err instanceof FailedForGood ? err.failure : undefined),
  });

const failing = (failure: Partial<CommandFailure> = {}) =>
  new FailedForGood({ message: 'retries spent', activityFailed: true, ...failure });

/** A page's collection of two claimed prefixes where it stood: fenced, the first done, the second awaiting its walk. */
function halfCollected() {
  const [done, waiting] = [newJobId(), newJobId()];
  const prefixes: SurveyedPrefix[] = [done, waiting].map((jobId) => ({ jobId, owner: { owner: 'collector' } }));
  const stood: PageCollection = {
    report: emptyReport(rules.nowMs, false),
    prefixes: [
      'done',
      {
        pass: { namespaceId: 'ns', jobId: waiting, owner: { owner: 'collector' } },
        command: { kind: 'reclaimPrefix', jobId: waiting },
      },
    ],
    fenced: true,
  };
  return { done, waiting, prefixes, stood };
}

describe('the table of command kinds', () => {
  it('every row is an activity of the collector, named by its kind as histories name it', () => {
    const store = createEmbeddedObjectStore({ path: ':memory:' });
    const activities = createGcActivities({ store, settings: resolveSettings(), rootCodec: jsonRootCodec });
    const kinds = Object.keys(COMMAND_KINDS).sort();
    expect(kinds).toEqual(
      [
        'claimLease',
        'collectPrefixes',
        'deleteLease',
        'fenceRoot',
        'listJobPrefixes',
        'readRoot',
        'reclaimPrefix',
        'reclaimRetiredSegments',
        'runPage',
        'surveyLeases',
      ].sort(),
    );
    expect(
      Object.keys(activities)
        .filter((name) => kinds.includes(name))
        .sort(),
    ).toEqual(kinds);
  });

  it('a walk that failed for good is a failed prefix carrying the tally it reached; a cancelled one too', async () => {
    const tally = { ...EMPTY_TALLY, objectsDeleted: 3 };
    const execute = executorOver(async () => {
      throw failing({ details: tally });
    });
    await expect(execute({ kind: 'reclaimPrefix', jobId: newJobId() })).resolves.toEqual({
      kind: 'reclaimFailed',
      tally,
      message: 'retries spent',
    });
    const cancelled = executorOver(async () => {
      throw failing({ activityFailed: false, message: 'cancelled' });
    });
    await expect(cancelled({ kind: 'reclaimPrefix', jobId: newJobId() })).resolves.toMatchObject({
      kind: 'reclaimFailed',
    });
  });

  it("a fence or a reclaim of retired segments that failed for good is the plan's own result; cancelled, it is rethrown", async () => {
    const execute = executorOver(async () => {
      throw failing();
    });
    await expect(execute({ kind: 'fenceRoot' })).resolves.toEqual({ kind: 'fenceFailed', message: 'retries spent' });
    await expect(execute({ kind: 'reclaimRetiredSegments' })).resolves.toEqual({
      kind: 'retiredFailed',
      message: 'retries spent',
    });
    const cancelled = executorOver(async () => {
      throw failing({ activityFailed: false });
    });
    await expect(cancelled({ kind: 'fenceRoot' })).rejects.toBeInstanceOf(FailedForGood);
  });

  it('a command whose row gives its failure no meaning fails the namespace: the failure is rethrown', async () => {
    const execute = executorOver(async () => {
      throw failing();
    });
    for (const command of [
      { kind: 'listJobPrefixes', after: undefined },
      { kind: 'readRoot' },
      { kind: 'surveyLeases', jobIds: [] },
      { kind: 'deleteLease', jobId: newJobId() },
    ] as const)
      await expect(execute(command)).rejects.toBeInstanceOf(FailedForGood);
  });

  it("a page's collection that failed for good goes on command by command from where it stood, each command its own activity", async () => {
    const { waiting, prefixes, stood } = halfCollected();
    const ran: string[] = [];
    const execute = executorOver(async (command) => {
      ran.push(`${command.kind}${'jobId' in command ? ` ${command.jobId}` : ''}`);
      if (command.kind === 'collectPrefixes') throw failing({ lastHeartbeat: stood });
      if (command.kind === 'reclaimPrefix') return { kind: 'reclaimed', tally: { ...EMPTY_TALLY, objectsDeleted: 1 } };
      if (command.kind === 'deleteLease') return { kind: 'leaseDeleted' };
      throw new Error(`unexpected ${command.kind}`);
    });
    const result = await execute({ kind: 'collectPrefixes', prefixes });
    expect(ran).toEqual(['collectPrefixes', `reclaimPrefix ${waiting}`, `deleteLease ${waiting}`]);
    expect(result).toMatchObject({ kind: 'collected', report: { totals: { objectsDeleted: 1, leasesDeleted: 1 } } });
  });

  describe('a page run that failed for good', () => {
    const { done, waiting, prefixes, stood: collectionStood } = halfCollected();
    /** The pass in its one page: listed, root read, surveyed; both prefixes claimed and the root fenced. */
    const pass: NamespacePass = {
      namespaceId: 'ns',
      phase: 'scan',
      after: undefined,
      rootChecked: true,
      page: { found: [done, waiting], unrecognised: [], next: undefined },
      report: emptyReport(rules.nowMs, false),
    };
    const collection = { kind: 'collectPrefixes' as const, prefixes };

    it('goes on from its last finished command: the one in flight comes to what its row says of the failure (a collection goes on command by command), the rest of the page one activity per command', async () => {
      const stood: PageStep = { pass, command: collection, done: 3, at: collectionStood };
      const ran: string[] = [];
      const execute = executorOver(async (command) => {
        ran.push(`${command.kind}${'jobId' in command ? ` ${command.jobId}` : ''}`);
        if (command.kind === 'runPage') throw failing({ details: stood });
        if (command.kind === 'reclaimPrefix')
          return { kind: 'reclaimed', tally: { ...EMPTY_TALLY, objectsDeleted: 1 } };
        if (command.kind === 'deleteLease') return { kind: 'leaseDeleted' };
        if (command.kind === 'reclaimRetiredSegments') return { kind: 'retiredFailed', message: 'unreachable' };
        throw new Error(`unexpected ${command.kind}`);
      });
      const result = await execute({ kind: 'runPage', pass: { ...pass, rootChecked: false, page: undefined } });
      // Not again: the listing, the root read, the survey, the collection's claims and fence.
      expect(ran).toEqual(['runPage', `reclaimPrefix ${waiting}`, `deleteLease ${waiting}`, 'reclaimRetiredSegments']);
      expect(result).toMatchObject({
        kind: 'pageRun',
        next: 'done',
        pass: { report: { totals: { objectsDeleted: 1, leasesDeleted: 1, failedPrefixes: 1 } } },
      });
    });

    it('fails the namespace where the command in flight is one whose failure has no meaning (a survey); cancelled, too', async () => {
      const surveying: PageStep = { pass, command: { kind: 'surveyLeases', jobIds: [done, waiting] }, done: 2 };
      const ran: string[] = [];
      const execute = executorOver(async (command) => {
        ran.push(command.kind);
        throw failing({ details: surveying });
      });
      await expect(execute({ kind: 'runPage', pass })).rejects.toBeInstanceOf(FailedForGood);
      const collecting: PageStep = { pass, command: collection, done: 3, at: collectionStood };
      const cancelled = executorOver(async (command) => {
        ran.push(command.kind);
        throw failing({ activityFailed: false, details: collecting });
      });
      await expect(cancelled({ kind: 'runPage', pass })).rejects.toBeInstanceOf(FailedForGood);
      expect(ran).toEqual(['runPage', 'runPage']);
    });
  });
});
