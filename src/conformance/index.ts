/**
 * The conformance kit for a format's plug-ins (docs/plugins.md): runs a compactor and a root codec
 * through the package's protocol checks against the embedded store, with no Temporal server. It
 * checks what the workflows rely on and cannot see for themselves: that output keys are a function
 * of the job (a resumed attempt writes no twins), that progress is small plain JSON and a resumed
 * attempt ends with the same outputs, that the codec round-trips, and that publication and the
 * collector work through the codec.
 */
import { isDeepStrictEqual } from 'node:util';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { checkStagedKeys, stagedStore, withCheckedProgress, type Compactor, type MergeLimits } from '../compactor';
import { TypedError } from '../errors';
import {
  familyGroup,
  namespaceId,
  newJobId,
  type FamilyGroup,
  type MetadataCompactionId,
  type NamespaceId,
} from '../keys';
import { createJobLease, publishCompaction, readRoot } from '../protocol';
import { reclaimRetiredSegments } from '../collector/retired-reclaim';
import { decodeRootWith, planPublication, stampRetirements, type RootCodec, type RootState } from '../root';
import { createEmbeddedObjectStore, type ObjectStore } from '../store';

/** A format under test: its two plug-ins and the metadata service's writer of sample inputs. */
export interface FormatUnderTest {
  readonly compactor: Compactor;
  readonly rootCodec: RootCodec;
  /**
   * Writes a few input segments of `group` in the format (overlapping keys, some deletions) and
   * lists them in the root with `rootCodec` (e.g. `updateRoot(store, ns, …, { codec: rootCodec })`).
   */
  readonly writeInputs: (store: ObjectStore, ns: NamespaceId, group: FamilyGroup) => Promise<void>;
  /**
   * Default: `targetSegmentBytes` 4096, so the sample inputs make several outputs and a resume has something to skip.
   */
  readonly limits?: MergeLimits;
}

/** A check the format failed: which one, what was seen, and what the plug-in must do instead. */
export class FormatCheckError extends TypedError {
  readonly failureType = 'FormatCheck';
  constructor(
    readonly check: string,
    reason: string,
  ) {
    super(`format check "${check}" failed: ${reason}`);
  }
}

/** Stops a compaction attempt at its first heartbeat with progress, as a worker crash would. */
class AttemptStopped extends Error {}

/** The checks passed, in order; a failure throws {@link FormatCheckError}. */
export async function checkFormat(format: FormatUnderTest): Promise<readonly string[]> {
  const folder = await mkdtemp(join(tmpdir(), 'compaction-lease-conformance-'));
  const store = createEmbeddedObjectStore({ path: join(folder, 'store.sqlite') });
  try {
    return await runChecks(store, format);
  } finally {
    await store.close();
    await rm(folder, { recursive: true, force: true });
  }
}

/** What every check of one run shares: the store, the format, and the sample group its writer listed. */
interface CheckRun {
  readonly store: ObjectStore;
  readonly format: FormatUnderTest;
  readonly limits: MergeLimits;
  readonly ns: NamespaceId;
  readonly group: FamilyGroup;
  readonly root: RootState;
  readonly inputs: readonly string[];
  /** Runs one named check: `fail` throws its {@link FormatCheckError}; a check that returns passed. */
  readonly check: (name: string, run: (fail: (reason: string) => never) => Promise<void> | void) => Promise<void>;
}

/** The outputs of an uninterrupted attempt of the sample job, which later checks compare and publish. */
interface SampleCompaction {
  readonly job: MetadataCompactionId;
  readonly outputs: readonly string[];
  readonly tombstones: readonly string[];
  readonly tombstoneSeqFloor: number | undefined;
}

async function runChecks(store: ObjectStore, format: FormatUnderTest): Promise<readonly string[]> {
  const passed: string[] = [];
  const check: CheckRun['check'] = async (name, run) => {
    await run((reason) => {
      throw new FormatCheckError(name, reason);
    });
    passed.push(name);
  };
  const ns = namespaceId('conformance');
  const group = familyGroup('sample');
  await format.writeInputs(store, ns, group);
  const { root } = await readRoot(store, ns, format.rootCodec);
  const limits = format.limits ?? { targetSegmentBytes: 4096, maxFanIn: 16 };
  const run: CheckRun = { store, format, limits, ns, group, root, inputs: root.groups[group] ?? [], check };
  await checkRootCodec(run);
  const sample = await checkCompactor(run);
  await checkPublicationAndCollector(run, sample);
  return passed;
}

async function checkRootCodec({ format: { rootCodec }, ns, group, root, inputs, check }: CheckRun): Promise<void> {
  await check('the root lists the sample inputs', (fail) => {
    if (inputs.length < 2)
      fail(
        `writeInputs listed ${inputs.length} segments in group ${group}: write at least two, through updateRoot with the codec`,
      );
  });
  await check(
    'the codec round-trips a root, its retirements and the fences of spec 6c, and a new generation changes its bytes',
    (fail) => {
      const retiring = planPublication(root, {
        group,
        inputs: inputs.slice(0, 1),
        outputs: [],
        retiredAtMs: 1_764_820_000_000,
        seqFloor: 7,
      });
      const retired = retiring.kind === 'publish' ? retiring.root : root;
      // The fences of spec 6c too: a codec that dropped them would let a late write name a condemned segment.
      const fenced = {
        ...(stampRetirements(retired, 1_764_820_001_000) ?? retired),
        lost_write_cutoff_ms: 1_764_810_000_000,
      };
      for (const sample of [root, retired, fenced]) roundTrip(rootCodec, sample, ns, fail);
      const next = rootCodec.encode({ ...root, generation: root.generation + 1 });
      if (Buffer.from(next).equals(rootCodec.encode(root)))
        fail(
          'two generations of one root encode to the same bytes: write the generation, every CAS must change the bytes',
        );
    },
  );
}

async function checkCompactor(run: CheckRun): Promise<SampleCompaction> {
  const { check } = run;
  const job = newJobId();
  let first: CompactorRun | undefined;
  await check(
    'the compactor writes only staged keys of its job, and its outputs and tombstone segments are among them',
    async (fail) => {
      first = await runCompactor(run, { job });
      const returned = [...first.outputs, ...first.tombstones];
      checkStagedKeys({ namespaceId: run.ns, jobId: job }, returned);
      const missing = returned.filter((k) => !first!.written.includes(k));
      if (missing.length) fail(`outputs ${missing.join(', ')} were never written`);
      if (new Set(returned).size !== returned.length) fail('an output or tombstone segment is listed twice');
    },
  );
  const { outputs, tombstones, tombstoneSeqFloor, written } = first!;
  await check('output keys are deterministic: a second attempt of the job writes the same keys', async (fail) => {
    const again = await runCompactor(run, { job });
    if (!isDeepStrictEqual([again.outputs, again.tombstones], [outputs, tombstones]))
      fail(
        `a second attempt returned ${JSON.stringify(again.outputs)}, the first ${JSON.stringify(outputs)}: derive every key with stagedOutputKey(job, name, extension) from names that do not change between attempts`,
      );
    if (!isDeepStrictEqual([...again.written].sort(), [...written].sort()))
      fail('a second attempt wrote other keys than the first: a resumed job would leave twins under its prefix');
  });
  await check(
    'progress is small plain JSON, and an attempt resumed from it ends with the same outputs',
    async (fail) => {
      let progress: unknown;
      const onProgress = (p: unknown) => {
        progress = p;
        throw new AttemptStopped();
      };
      const stopped = await runCompactor(run, { job, onProgress }).then(
        () => false,
        (err: unknown) => {
          if (err instanceof AttemptStopped) return true;
          throw err;
        },
      );
      if (!stopped) return;
      // Within MAX_PROGRESS_BYTES of JSON: the heartbeat checked it, as a worker's does.
      const text = JSON.stringify(progress);
      if (!isDeepStrictEqual(JSON.parse(text), progress))
        fail('progress does not survive JSON: Temporal stores heartbeat details as JSON');
      const resumed = await runCompactor(run, { job, resume: JSON.parse(text) });
      if (!isDeepStrictEqual([resumed.outputs, resumed.tombstones], [outputs, tombstones]))
        fail(
          `the resumed attempt returned ${JSON.stringify(resumed.outputs)}, an uninterrupted one ${JSON.stringify(outputs)}`,
        );
    },
  );
  return { job, outputs, tombstones, tombstoneSeqFloor };
}

async function checkPublicationAndCollector(
  { store, format: { rootCodec }, ns, group, inputs, check }: CheckRun,
  sample: SampleCompaction,
): Promise<void> {
  const { job, outputs, tombstones, tombstoneSeqFloor } = sample;
  await check(
    'publication through the codec replaces the inputs by the outputs and retires the inputs',
    async (fail) => {
      await createJobLease(store, { namespaceId: ns, jobId: job, ownerId: 'conformance', startedAtMs: Date.now() });
      const start = performance.now();
      const clock = { leaseClockMs: () => Date.now(), elapsedMs: () => performance.now() - start };
      const request = {
        namespaceId: ns,
        jobId: job,
        group,
        inputs,
        outputs,
        tombstones,
        ...(tombstoneSeqFloor !== undefined && { tombstoneSeqFloor }),
      };
      const outcome = await publishCompaction(store, request, {
        budgetMs: 60_000,
        maxRootRaces: 3,
        raceBackoff: { firstMs: 10, maxMs: 100 },
        clock,
        codec: rootCodec,
      });
      if (outcome.outcome !== 'published') fail(`publication ended ${JSON.stringify(outcome)}`);
      const after = (await readRoot(store, ns, rootCodec)).root;
      // A compactor that says how high its tombstones go lets publication drop them (and raise the floor); otherwise
      // they are named.
      const expected = tombstoneSeqFloor === undefined ? [...outputs, ...tombstones] : outputs;
      if (!isDeepStrictEqual(after.groups[group], expected))
        fail(
          `the group lists ${JSON.stringify(after.groups[group])} after publication, not ${JSON.stringify(expected)}`,
        );
      if (!isDeepStrictEqual(after.retired?.map((r) => r.key).sort(), [...inputs].sort()))
        fail('the root read back does not retire exactly the inputs: encode and decode the retired list');
    },
  );
  await check(
    'the collector reads the codec: retired inputs past the reader grace go, with their records; outputs stay',
    async (fail) => {
      const rules = {
        nowMs: Date.now() + 1000,
        readerGraceMs: 0,
        lostWriteGraceMs: Number.MAX_SAFE_INTEGER,
        dryRun: false,
        keysPerFlush: 100,
        reportLimit: 10,
      };
      const outcome = await reclaimRetiredSegments(store, ns, rules, { codec: rootCodec });
      if (!('tally' in outcome)) return fail(`the collector could not use the root: ${outcome.rootProblem.reason}`);
      if (outcome.tally.retiredDeleted !== inputs.length)
        fail(`${outcome.tally.retiredDeleted} of ${inputs.length} retired inputs deleted`);
      const after = (await readRoot(store, ns, rootCodec)).root;
      if (after.retired?.length) fail('the retired records stayed in the root after their segments went');
      for (const key of outputs) await store.head(key).catch(() => fail(`output ${key} is gone`));
    },
  );
}

function roundTrip(codec: RootCodec, root: RootState, ns: NamespaceId, fail: (reason: string) => never): void {
  const bytes = codec.encode(root);
  const back = decodeRootWith(codec, bytes, ns);
  const plain = (r: RootState) => ({ ...r, retired: r.retired ?? [] });
  if (!isDeepStrictEqual(plain(back), plain(root)))
    fail(`decode(encode(root)) is ${JSON.stringify(back)}, not ${JSON.stringify(root)}`);
  if (!Buffer.from(codec.encode(back)).equals(bytes))
    fail('encoding a decoded root gives other bytes: encode must be a pure function of the root');
}

interface CompactorRun {
  readonly outputs: readonly string[];
  readonly tombstones: readonly string[];
  readonly tombstoneSeqFloor: number | undefined;
  /** Every key the attempt wrote, in order. */
  readonly written: string[];
}

/**
 * One attempt of the format's compactor on the sample group as a worker would run it, with every key it writes
 * recorded.
 */
async function runCompactor(
  { store, format: { compactor }, ns, group, inputs, limits }: CheckRun,
  {
    job,
    resume,
    onProgress = () => {},
  }: { job: MetadataCompactionId; resume?: unknown; onProgress?: (progress: unknown) => void },
): Promise<CompactorRun> {
  const ref = { namespaceId: ns, jobId: job };
  const staged = stagedStore(store, ref);
  const written: string[] = [];
  const result = await withCheckedProgress(
    ref,
    (progress) => {
      if (progress !== undefined) onProgress(progress);
    },
    (heartbeat) =>
      compactor.compact({
        job: { ...ref, group },
        inputs,
        limits,
        resume,
        store: {
          ...staged,
          put: async (key, body) => {
            const put = await staged.put(key, body);
            written.push(key);
            return put;
          },
        },
        heartbeat,
      }),
  );
  return {
    outputs: result.outputs,
    tombstones: result.tombstones ?? [],
    tombstoneSeqFloor: result.tombstoneSeqFloor,
    written,
  };
}
