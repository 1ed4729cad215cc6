/**
 * The base of the package's typed errors. Each class decides, next to its definition, the stable
 * `type` of the Temporal failure it becomes and whether retrying can help; both are abstract, so a
 * new error class cannot be added without deciding them. src/activities/failures translates.
 */
export abstract class TypedError extends Error {
  /** The Temporal failure's `type`: what retry policies, operators and callers name. */
  abstract readonly failureType: string;
  /** False for corruption, invalid input and broken configuration: no retry can fix those. */
  abstract readonly retryable: boolean;
}

/** The first line of an error's message: failures and CLI lines are one line, and V8's and gRPC's messages can span several. */
export const firstLineOf = (err: unknown): string => (err instanceof Error ? err.message : String(err)).split('\n')[0] ?? '';
