/**
 * The pass's executor for a harness that stands in for Temporal (the simulator, the interleavings test): each command's
 * activity is `retried` attempts of `attempt`, each resumed where the last stood, a page's commands (and its
 * collection's) one attempt each;
 * a failure for good means what the command's row says, through the workflow's own `passExecutor`.
 */
import {
  byItsCommands,
  passExecutor,
  resumedAt,
  rowOf,
  type CollectorExecutor,
  type CommandPosition,
  type PassRules,
} from '../../src/collector';

export interface Harness {
  readonly namespaceId: string;
  readonly rules: PassRules;
  /** One attempt of one command against the store. */
  readonly attempt: CollectorExecutor;
  /** Runs `work` under the activity's retry policy (its name is the command's kind); rejects once it gives up. */
  readonly retried: <T>(kind: string, work: () => Promise<T>) => Promise<T>;
  /** Whether a rejection of `retried` is the activity failing for good (not a bug of the harness). */
  readonly gaveUp: (err: unknown) => err is Error;
}

export function harnessExecutor({ namespaceId, rules, attempt, retried, gaveUp }: Harness): CollectorExecutor {
  /** Where each failed activity stood, as its row says its failure carries it. */
  const stood = new WeakMap<Error, unknown>();
  /** A page's commands, and its collection's, one attempt each. */
  const byAttempts = byItsCommands(namespaceId, rules, attempt);
  const activity: CollectorExecutor = async (command) => {
    const row = rowOf(command);
    let position: CommandPosition | undefined;
    const onProgress = (p: CommandPosition) => (position = p);
    try {
      return await retried(command.kind, () => byAttempts(resumedAt(command, position), { onProgress }));
    } catch (err) {
      if (gaveUp(err) && position !== undefined) stood.set(err, row.stood?.(position));
      throw err;
    }
  };
  return passExecutor({
    namespaceId,
    rules,
    activity,
    failureOf: (err) =>
      gaveUp(err) ? { message: err.message, activityFailed: true, details: stood.get(err) } : undefined,
  });
}
