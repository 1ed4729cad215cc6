/**
 * Publication (spec 5.4): refresh the lease at the top of every attempt, re-read the root, check
 * the inputs are still current, build the new root, check the budget, CAS the root.
 */
import { rootKey, type FamilyGroup } from '../keys';
import { encodeRoot, planPublication, referencedKeys } from '../root';
import { AmbiguousError, ConflictError, PreconditionFailedError, type ObjectStore } from '../store';
import { LeaseLostError, refreshJobLease } from './job-lease';
import { readLease, type JobRef } from './lease-read';
import { readRoot } from './root-io';

export type PublicationOutcome =
  | { readonly outcome: 'published'; readonly rootGeneration: number }
  | { readonly outcome: 'fenced'; readonly reason: string }
  | { readonly outcome: 'abandoned'; readonly missingInputs: readonly string[] }
  | { readonly outcome: 'superseded'; readonly lostRaces: number };

/** The time since this attempt's refresh ran past the publication budget before the root CAS: the attempt published nothing. */
export class PublicationBudgetExceededError extends Error {
  override readonly name = 'PublicationBudgetExceededError';
}

export interface PublicationRequest extends JobRef {
  readonly group: FamilyGroup;
  readonly inputs: readonly string[];
  readonly outputs: readonly string[];
}

export interface PublicationClock {
  /** Wall clock for the heartbeat written by the refresh. */
  readonly leaseClockMs: () => number;
  /** Monotonic clock for the budget. */
  readonly elapsedMs: () => number;
}

export async function publishCompaction(
  store: ObjectStore,
  request: PublicationRequest,
  limits: { budgetMs: number; maxRootRaces: number },
  clock: PublicationClock,
): Promise<PublicationOutcome> {
  for (let race = 0; race < limits.maxRootRaces; race++) {
    const read = await readLease(store, request);
    if ('missing' in read) return { outcome: 'fenced', reason: 'the lease is gone' };
    if ('corrupt' in read) return { outcome: 'fenced', reason: read.corrupt };
    if (read.lease.status === 'reaping') return { outcome: 'fenced', reason: 'a collector claimed the lease' };
    // The budget runs from before the refresh is sent: the heartbeat it writes is read off the clock
    // then, so a slow refresh leaves less of the lease, and the budget must count it.
    const refreshSentAt = clock.elapsedMs();
    try {
      await refreshJobLease(store, request, read, clock.leaseClockMs);
    } catch (err) {
      if (err instanceof LeaseLostError) return { outcome: 'fenced', reason: err.reason };
      throw err;
    }
    const current = await readRoot(store, request.namespaceId);
    const plan = planPublication(current.root, request.group, request.inputs, request.outputs);
    if (plan.kind === 'abandoned') return { outcome: 'abandoned', missingInputs: plan.missingInputs };
    const spent = clock.elapsedMs() - refreshSentAt;
    if (spent > limits.budgetMs) {
      throw new PublicationBudgetExceededError(`${spent.toFixed(0)} ms since the refresh exceeds the publication budget of ${limits.budgetMs} ms`);
    }
    try {
      await store.putIfMatch(rootKey(request.namespaceId), encodeRoot(plan.root), current.etag);
      return { outcome: 'published', rootGeneration: plan.root.generation };
    } catch (err) {
      if (err instanceof AmbiguousError) {
        // Our CAS may have landed: the root says so if it references every output.
        const after = await readRoot(store, request.namespaceId);
        const referenced = referencedKeys(after.root);
        if (request.outputs.every((k) => referenced.has(k))) return { outcome: 'published', rootGeneration: after.root.generation };
        continue;
      }
      if (!(err instanceof PreconditionFailedError || err instanceof ConflictError)) throw err;
    }
  }
  return { outcome: 'superseded', lostRaces: limits.maxRootRaces };
}
