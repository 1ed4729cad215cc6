/**
 * A writer of the metadata service: each write draws its `seq` when it begins, writes its records as
 * a segment and registers it (`writeInputSegment`), and is written again as a new segment when an
 * attempt fails in a way the service retries (an unknown outcome, a spent writer budget).
 */
import { TypedError } from '../../../src/errors';
import { writeInputSegment, WriterBudgetExceededError } from '../../../src/writer';
import type { WriteContext } from '../invariants';
import { shortKey } from '../trace';
import type { Party } from '../sim';
import type { Env } from '../env';

export interface WritePlan {
  /** Pause before the write begins. */
  readonly afterMs: number;
  readonly records: readonly ({ key: string; value: string } | { key: string; tombstone: true })[];
}

export interface WriterPlan {
  readonly group: string;
  readonly writes: readonly WritePlan[];
}

const ATTEMPTS = 3;

const describeRecords = (records: WritePlan['records']): string =>
  records.map((r) => ('tombstone' in r ? `${r.key}✝` : `${r.key}=${r.value}`)).join(' ');

export async function runWriter(env: Env, party: Party, plan: WriterPlan): Promise<void> {
  for (const planned of plan.writes) {
    await party.sleep(planned.afterMs);
    const write = env.model.begin(party.name, plan.group, planned.records);
    party.log(`write seq ${write.seq} to ${plan.group}: ${describeRecords(planned.records)}`);
    for (let attempt = 1; attempt <= ATTEMPTS; attempt++) {
      party.context = { write } satisfies WriteContext;
      try {
        const key = await writeInputSegment(party.store, { namespaceId: env.ns, group: plan.group }, write.records, {
          writerBudgetMs: env.timing.writerBudgetMs,
          elapsedMs: party.elapsed,
          clockMs: party.clock,
          segmentFormat: 1,
        });
        env.model.acknowledged(write, env.sim.scheduler.events);
        env.sim.count('write acknowledged');
        party.log(`write seq ${write.seq} acknowledged as ${shortKey(key)}`);
        break;
      } catch (err) {
        if (!(err instanceof TypedError)) throw err;
        env.sim.count(`write failed: ${err.failureType}`);
        party.log(`write seq ${write.seq} attempt ${attempt} failed: ${err.message.split('\n')[0]}`);
        if (!(err.retryable || err instanceof WriterBudgetExceededError)) break;
        await party.sleep(env.retryDelayMs(attempt));
      }
    }
    party.context = undefined;
  }
}
