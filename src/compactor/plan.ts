/**
 * The shape of a bounded merge, decided before any byte is read: which inputs merge first into
 * intermediate runs so that no merge ever reads more than `maxFanIn` sources at once. Pure, so a
 * retried attempt that knows the fan-in rebuilds the same plan and recognises its finished runs.
 */
import { TypedError } from '../errors';

/** A source of one merge: an input of the group (by its index) or an earlier intermediate run. */
export type MergeSource = { readonly input: number } | { readonly run: number };

/** The merges of a group: `runs[r]` merges its sources into run `r`, in this order; `final` merges into the outputs. */
export interface MergePlan {
  readonly runs: readonly (readonly MergeSource[])[];
  readonly final: readonly MergeSource[];
}

/** The fan-in is out of range; a merge of fewer than two sources at a time never shrinks the group. */
export class FanInError extends TypedError {
  readonly failureType = 'InvalidSettings';
}

/**
 * Plans the merge of `inputCount` inputs reading at most `maxFanIn` sources at once.
 *
 * Each run replaces a contiguous span of sources at that span's place, so the order of sources (by
 * which an equal `seq` is decided: the later source wins) is the same at every level, and the
 * records out of the final merge are those of one merge of all inputs. A level merges only as many
 * sources as it must: when a level can finish with fewer than `maxFanIn` runs, it merges the
 * first `n - maxFanIn + r` sources into `r` runs and leaves the rest for the final merge, so a
 * group just above the fan-in rewrites a small part of its bytes, not all of them.
 */
export function planMerge(inputCount: number, maxFanIn: number): MergePlan {
  if (!Number.isSafeInteger(maxFanIn) || maxFanIn < 2)
    throw new FanInError(`the merge fan-in must be an integer of at least 2, not ${maxFanIn}`);
  const runs: MergeSource[][] = [];
  let sources: MergeSource[] = Array.from({ length: inputCount }, (_, input) => ({ input }));
  while (sources.length > maxFanIn) {
    const n = sources.length;
    // r runs of the first m sources leave (n - m) + r = maxFanIn sources when r <= maxFanIn - 1.
    const fewest = Math.ceil((n - maxFanIn) / (maxFanIn - 1));
    const [count, merged] = fewest < maxFanIn ? [fewest, n - maxFanIn + fewest] : [Math.ceil(n / maxFanIn), n];
    const next: MergeSource[] = [];
    for (let i = 0, from = 0; i < count; i++) {
      // Balanced spans: sizes differ by at most one.
      const to = Math.round(((i + 1) * merged) / count);
      next.push({ run: runs.length });
      runs.push(sources.slice(from, to));
      from = to;
    }
    sources = [...next, ...sources.slice(merged)];
  }
  return { runs, final: sources };
}
