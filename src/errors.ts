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

/**
 * The most characters of outside content (a key, a member name, a reason) a message, report or
 * failure quotes: what a bucket holds is not bounded, Temporal's payloads are (2 MiB).
 */
export const QUOTE_LIMIT = 300;
/** The most characters of one message a failure or a report carries. */
export const MESSAGE_LIMIT = 1000;

/** A 53-bit digest of `text` (cyrb53) as hex: pure JS, so workflows may call it. It tells two long values apart and proves nothing. */
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

/** `text` whole when it has at most `limit` characters, else its first `limit`, its length and a digest of the whole. */
export function bounded(text: string, limit = QUOTE_LIMIT): string {
  if (text.length <= limit) return text;
  return `${text.slice(0, limit)}… (${text.length} characters, digest ${digestOf(text)})`;
}

/** `text` as a JSON string literal for a message, {@link bounded} first. */
export const quoted = (text: string): string => JSON.stringify(bounded(text));
