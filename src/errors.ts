/**
 * Every failure type the package's errors become, and whether retrying can help: the one place a
 * type's retryability is decided. The rule: corruption, invalid input, broken configuration and a
 * plug-in's or the plan's bug are final (no retry can fix them); a store's transient answer, a lost
 * race and an idempotent step that failed are retryable. A type is a stable string that retry
 * policies, operators and callers name: its error class's name without `Error`, except where several
 * classes share one (`InvalidInput`, `InvalidSettings`). Pure and import-free, so workflows import it.
 */
export const FAILURE_TYPES = {
  // Stores: transient, or a race the caller re-reads after.
  NotFound: 'retryable',
  PreconditionFailed: 'retryable',
  Conflict: 'retryable',
  Ambiguous: 'retryable',
  StoreUnavailable: 'retryable',
  ObjectChanged: 'retryable',
  ObjectTooLarge: 'retryable',
  RangeNotSatisfiable: 'retryable',
  StoreConfig: 'final',
  StoreUnfit: 'final',
  StoreMismatch: 'final',
  // Leases and roots.
  LeaseLost: 'final',
  LeaseCorrupt: 'final',
  LeaseTransition: 'retryable',
  JobIdCollision: 'final',
  RootCorrupt: 'final',
  RootFormatMismatch: 'final',
  RootMissing: 'final',
  RootLost: 'final',
  RootWentBack: 'final',
  RootTooLarge: 'final',
  PublicationBudgetExceeded: 'retryable',
  EmptyCompaction: 'final',
  // Inputs, segments and writers.
  SegmentCorrupt: 'final',
  InputMissing: 'final',
  InputTooLarge: 'final',
  InputChanged: 'final',
  InputListUnreadable: 'final',
  InvalidInput: 'final',
  WriterBudgetExceeded: 'final',
  SegmentLost: 'final',
  SequenceFloor: 'final',
  // Compactor plug-ins and their progress.
  OutsideJobPrefix: 'final',
  WriteAfterAttempt: 'final',
  OutputMissing: 'final',
  ProgressRefused: 'final',
  ProgressMismatch: 'final',
  RecurringFailure: 'final',
  FormatModule: 'final',
  FormatCheck: 'final',
  // The collector.
  DeleteFailed: 'retryable',
  GcPassIncomplete: 'final',
  ClaimLost: 'final',
  PlanOutOfStep: 'final',
  // Configuration.
  TimingConfig: 'final',
  InvalidSettings: 'final',
  // Starting and waiting for runs (the client's side): a worker that starts polling makes a start succeed.
  NoWorkerPolling: 'retryable',
  TemporalNamespaceNotFound: 'final',
  SearchAttributesMissing: 'final',
  GcScheduleOwned: 'final',
  WorkflowTaskFailing: 'final',
  // The command line's own failures, which become its exit codes: the message says whether running it again helps.
  Cli: 'final',
  // The Temporal server did not answer: a server that starts answering makes the same command succeed.
  TemporalUnreachable: 'retryable',
} as const satisfies Record<string, 'retryable' | 'final'>;

/** A failure type: the `type` of a Temporal failure the package raises, one key of {@link FAILURE_TYPES}. */
export type FailureType = keyof typeof FAILURE_TYPES;

/** The failure types no retry can fix, for the activities' retry policies: derived from {@link FAILURE_TYPES}. */
export const NON_RETRYABLE_FAILURE_TYPES: readonly FailureType[] = Object.freeze(
  (Object.keys(FAILURE_TYPES) as FailureType[]).filter((type) => FAILURE_TYPES[type] === 'final'),
);

/**
 * The base of the package's typed errors. A class names its failure type (abstract, so a new class
 * cannot be added without one); its retryability is its type's ({@link FAILURE_TYPES}) and its
 * `name` its class's. src/activities/failures translates them into Temporal failures.
 */
export abstract class TypedError extends Error {
  /** The Temporal failure's `type`: what retry policies, operators and callers name. */
  abstract readonly failureType: FailureType;

  constructor(message?: string, options?: ErrorOptions) {
    super(message, options);
    this.name = new.target.name;
  }

  /** False for corruption, invalid input and broken configuration: no retry can fix those. */
  get retryable(): boolean {
    return FAILURE_TYPES[this.failureType] === 'retryable';
  }
}

/**
 * The first line of an error's message: failures and CLI lines are one line, and V8's and gRPC's messages can span
 * several.
 */
export const firstLineOf = (err: unknown): string =>
  (err instanceof Error ? err.message : String(err)).split('\n')[0] ?? '';

/**
 * The most characters of outside content (a key, a member name, a reason) a message, report or
 * failure quotes: what a bucket holds is not bounded, Temporal's payloads are (2 MiB).
 */
export const QUOTE_LIMIT = 300;
/** The most characters of one message a failure or a report carries. */
export const MESSAGE_LIMIT = 1000;

/**
 * A 53-bit digest of `text` (cyrb53) as hex: pure JS, so workflows may call it. It tells two long values apart and
 * proves nothing.
 */
function digestOf(text: string): string {
  let h1 = 0xdeadbeef;
  let h2 = 0x41c6ce57;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    h1 = Math.imul(h1 ^ c, 2654435761);
    h2 = Math.imul(h2 ^ c, 1597334677);
  }
  h1 = Math.imul(h1 ^ (h1 >>> 16), 2246822507) ^ Math.imul(h2 ^ (h2 >>> 13), 3266489909);
  h2 = Math.imul(h2 ^ (h2 >>> 16), 2246822507) ^ Math.imul(h1 ^ (h1 >>> 13), 3266489909);
  return (4294967296 * (2097151 & h2) + (h1 >>> 0)).toString(16).padStart(14, '0');
}

/**
 * `text` whole when it has at most `limit` characters, else its first `limit`, its length and a digest of the whole.
 */
export function bounded(text: string, limit = QUOTE_LIMIT): string {
  if (text.length <= limit) return text;
  return `${text.slice(0, limit)}… (${text.length} characters, digest ${digestOf(text)})`;
}

/** `text` as a JSON string literal for a message, {@link bounded} first (to `limit` characters). */
export const quoted = (text: string, limit = QUOTE_LIMIT): string => JSON.stringify(bounded(text, limit));
