/**
 * One attempt of a job's compaction, as a worker runs it: the compactor over the attempt's store,
 * narrowed to the job's staged segments, with the job's inputs pinned to the versions `readGroup` saw.
 */
import { familyGroup } from '../keys';
import type { InputList, JobRef } from '../protocol';
import type { ObjectStore } from '../store';
import { attemptStore } from '../store/attempt';
import { referenceCompactor } from './index';
import { asInputError, pinnedInputs } from './inputs';
import {
  attemptWrites,
  checkOutputsExist,
  checkStagedKeys,
  withCheckedProgress,
  type CompactionOutputs,
  type Compactor,
  type MergeLimits,
} from './plugin';

/** What one attempt runs: the compactor, over which inputs, from which progress, heartbeating how. */
export interface CompactionRun {
  readonly store: ObjectStore;
  readonly compactor: Compactor;
  readonly job: JobRef;
  /** The job's pinned inputs (its input list). */
  readonly input: InputList;
  readonly limits: MergeLimits;
  /** The progress the last attempt heartbeated, unchecked. */
  readonly resume: unknown;
  readonly heartbeat: (progress?: unknown) => void;
}

/**
 * Runs the compactor over the attempt's store, narrowed to its job's staged segments: every body it
 * opened is closed when it ends, a vanished input reads as one, an input read at another version
 * than `readGroup` saw ends the job, a plug-in's progress is checked before it reaches the heartbeat
 * details, and the outputs it returns are checked to be its own staged segments, written and in the
 * store (publication trusts them: a plug-in's are checked, not believed). Its writes end when it
 * returns or throws: later puts are refused, those in flight are waited for, so no write lands under
 * an output once the attempt has handed it on.
 */
export async function runCompactionAttempt({
  store,
  compactor,
  job,
  input,
  limits,
  resume,
  heartbeat,
}: CompactionRun): Promise<CompactionOutputs> {
  const attempt = attemptStore(store);
  const writes = attemptWrites(attempt.store, job);
  let result: CompactionOutputs;
  try {
    const run = (beat: typeof heartbeat) =>
      compactor.compact({
        job: { ...job, group: familyGroup(input.group) },
        inputs: input.inputs,
        store: pinnedInputs(writes.store, input.group, input.inputs, input.etags),
        limits,
        resume,
        heartbeat: beat,
      });
    // A plug-in's progress is checked against MAX_PROGRESS_BYTES. The reference compactor's is bounded
    // by its merge plan, one number per intermediate run (4 KB at 100,000 inputs and the default
    // fan-in), and may pass it only at fan-in 2 to 4 with tens of thousands of inputs: not refused.
    result = compactor === referenceCompactor ? await run(heartbeat) : await withCheckedProgress(job, heartbeat, run);
  } catch (err) {
    // An input deleted or rewritten after readGroup checked it: the same clear end as one missing from the start.
    throw asInputError(err, input.group, input.inputs);
  } finally {
    await writes.end();
    await attempt.closeBodies();
  }
  const written = [...result.outputs, ...(result.tombstones ?? [])];
  checkStagedKeys(job, written);
  await checkOutputsExist(store, job, written);
  return result;
}
