/**
 * The metadata service rewriting its own segments through the package's root writer: two segments
 * of a group merged (tombstones kept, so the view does not change) into a new one, which replaces
 * them by `updateRoot` within the writer budget. Exercises every root change that is not a
 * publication: what it removes must be retired for readers of the old root.
 */
import { TypedError } from '../../../src/errors';
import { familyGroup, inputSegmentKey, newSegmentId } from '../../../src/keys';
import { readRoot, updateRoot } from '../../../src/protocol';
import { groupSegments, jsonRootCodec } from '../../../src/root';
import {
  encodeSegment,
  mergeSegments,
  readSegmentBatches,
  SEGMENT_EXTENSION,
  type SegmentRecord,
} from '../../../src/segments';
import { WriterBudgetExceededError } from '../../../src/writer';
import type { Env } from '../env';
import type { Party } from '../sim';
import { shortKey } from '../trace';

export interface RewritePlan {
  readonly afterMs: number;
  readonly group: string;
}

/** The group no longer holds both segments the rewrite merged: nothing to replace. */
class GroupChanged extends Error {}

export async function runRewrite(env: Env, party: Party, plan: RewritePlan): Promise<void> {
  await party.sleep(plan.afterMs);
  const group = familyGroup(plan.group);
  try {
    const segments = groupSegments((await readRoot(party.store, env.ns, jsonRootCodec)).root, group);
    if (segments.length < 2) return;
    const pair = segments.slice(0, 2);
    const sources = await Promise.all(
      pair.map(async (key) => readSegmentBatches(key, (await party.store.getStream(key)).body)),
    );
    const records: SegmentRecord[] = [];
    for await (const batch of mergeSegments(sources, { dropTombstones: false })) records.push(...batch);
    const key = inputSegmentKey(env.ns, newSegmentId(), SEGMENT_EXTENSION);
    const putSentAt = party.elapsed();
    await party.store.put(key, encodeSegment(records, 1));
    party.log(`rewrites ${pair.map(shortKey).join(' + ')} as ${shortKey(key)}`);
    await updateRoot(
      party.store,
      env.ns,
      (root) => {
        const current = groupSegments(root, group);
        if (!pair.every((k) => current.includes(k))) throw new GroupChanged();
        const at = current.indexOf(pair[0]!);
        const kept = current.filter((k) => !pair.includes(k));
        return Object.freeze({
          ...root,
          generation: root.generation + 1,
          groups: { ...root.groups, [group]: [...kept.slice(0, at), key, ...kept.slice(at)] },
        });
      },
      {
        codec: jsonRootCodec,
        clockMs: party.clock,
        beforeWrite: () => {
          const spent = party.elapsed() - putSentAt;
          if (spent > env.timing.writerBudgetMs)
            throw new WriterBudgetExceededError(key, spent, env.timing.writerBudgetMs);
        },
      },
    );
    env.sim.count('rewrite registered');
    party.log('rewrite registered');
  } catch (err) {
    if (!(err instanceof TypedError || err instanceof GroupChanged)) throw err;
    party.log(`rewrite abandoned: ${err instanceof GroupChanged ? 'the group changed' : err.message.split('\n')[0]}`);
  }
}
