/**
 * The checksummed JSON envelope shared by every mutable object this package writes (the lease,
 * the namespace root): `{"kind","format_version","payload_checksum","payload"}`, with the
 * checksum over the exact payload bytes as stored, so a decoder never trusts a re-serialisation.
 */
import { createHash } from 'node:crypto';
import { z } from 'zod';
import { bounded, quoted } from '../errors';

export const FORMAT_VERSION = 1;

const envelopeSchema = z.strictObject({
  kind: z.string(),
  format_version: z.number(),
  payload_checksum: z.string(),
  payload: z.record(z.string(), z.unknown()),
});

const sha256 = (text: string): string => `sha256:${createHash('sha256').update(text, 'utf8').digest('hex')}`;

/** Encodes a payload whose key order is the wire order (callers build it field by field). */
export function encodeEnvelope(kind: string, payload: object, formatVersion: number = FORMAT_VERSION): Uint8Array {
  const payloadText = JSON.stringify(payload);
  const text =
    `{"kind":${JSON.stringify(kind)},"format_version":${formatVersion},` +
    `"payload_checksum":"${sha256(payloadText)}","payload":${payloadText}}`;
  return new TextEncoder().encode(text);
}

/** A decoded envelope: the raw payload and the format version it was written in. */
export interface DecodedEnvelope {
  readonly formatVersion: number;
  readonly payload: unknown;
}

/**
 * Decodes strictly and returns the raw payload value with its format version, one of `versions`
 * (the ones the caller can read); every defect is reported through `corrupt(reason)`, which the
 * caller turns into its own typed error naming the key.
 */
export function decodeEnvelope(
  kind: string,
  bytes: Uint8Array,
  corrupt: (reason: string) => Error,
  versions: readonly number[] = [FORMAT_VERSION],
): DecodedEnvelope {
  let text: string;
  let parsed: unknown;
  // TextDecoder would drop a byte-order mark silently; this package never writes one, so it is a foreign writer's.
  if (bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf) throw corrupt('starts with a byte-order mark');
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    throw corrupt('not UTF-8');
  }
  try {
    parsed = JSON.parse(text);
  } catch {
    throw corrupt(bytes.length === 0 ? 'empty object' : 'not JSON');
  }
  const repeated = repeatedMember(text);
  if (repeated !== undefined) throw corrupt(`member ${JSON.stringify(repeated)} appears twice in one object`);
  const envelope = envelopeSchema.safeParse(parsed);
  if (!envelope.success) throw corrupt(`envelope: ${describeIssues(envelope.error)}`);
  const { data } = envelope;
  if (data.kind !== kind) throw corrupt(`kind is ${quoted(data.kind)}, expected ${JSON.stringify(kind)}`);
  if (!versions.includes(data.format_version)) throw corrupt(`unknown format_version ${data.format_version}`);
  const payloadText = topLevelMemberText(text, 'payload');
  if (payloadText === undefined || sha256(payloadText) !== data.payload_checksum) {
    throw corrupt('payload_checksum does not match the stored payload bytes');
  }
  return { formatVersion: data.format_version, payload: data.payload };
}

/** Formats zod issues as `path: message; …` for error messages an operator can act on. */
export function describeIssues(error: z.ZodError): string {
  return bounded(
    error.issues
      .map(
        (i) =>
          `${
            i.path.length
              ? i.path
                  .map(String)
                  .map((p) => bounded(p))
                  .join('.')
              : '(root)'
          }: ${i.message}`,
      )
      .join('; '),
  );
}

/**
 * The exact source text of a top-level member's value. The text is already known to be valid
 * JSON, so a scan that tracks strings and nesting depth is enough to find its bounds.
 */
function topLevelMemberText(text: string, name: string): string | undefined {
  let depth = 0;
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    if (c === '"') {
      const end = stringEnd(text, i);
      if (depth === 1 && text.slice(i, end) === JSON.stringify(name)) {
        let start = end;
        while (/\s/.test(text[start] ?? '')) start++;
        if (text[start] !== ':') return undefined;
        start++;
        while (/\s/.test(text[start] ?? '')) start++;
        return text.slice(start, valueEnd(text, start));
      }
      i = end;
      continue;
    }
    if (c === '{' || c === '[') depth++;
    else if (c === '}' || c === ']') depth--;
    i++;
  }
  return undefined;
}

/**
 * The first member name repeated within one object, at any depth. JSON.parse keeps the last of
 * repeated members while the checksum covers the first `payload` text, so a repeated member could
 * carry unchecksummed content past the check; serde, which defines the original type, rejects
 * duplicate fields too. The text is already known to be valid JSON, so tracking strings and
 * nesting finds every member name.
 */
function repeatedMember(text: string): string | undefined {
  // One entry per open object (its member names so far) or array (undefined).
  const open: (Set<string> | undefined)[] = [];
  let expectName = false;
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    if (c === '"') {
      const end = stringEnd(text, i);
      const names = open.at(-1);
      if (names && expectName) {
        // Compared decoded, so `"a"` and `"\u0061"` are the same name.
        const name = JSON.parse(text.slice(i, end)) as string;
        if (names.has(name)) return name;
        names.add(name);
        expectName = false;
      }
      i = end;
      continue;
    }
    if (c === '{') {
      open.push(new Set());
      expectName = true;
    } else if (c === '[') open.push(undefined);
    else if (c === '}' || c === ']') open.pop();
    else if (c === ',') expectName = open.at(-1) !== undefined;
    i++;
  }
  return undefined;
}

/** Index just past the string literal that opens at `start`. */
function stringEnd(text: string, start: number): number {
  let i = start + 1;
  while (i < text.length && text[i] !== '"') i += text[i] === '\\' ? 2 : 1;
  return i + 1;
}

/** Index just past the JSON value that starts at `start`. */
function valueEnd(text: string, start: number): number {
  let depth = 0;
  let i = start;
  while (i < text.length) {
    const c = text[i];
    if (c === '"') {
      i = stringEnd(text, i);
      if (depth === 0) return i;
      continue;
    }
    if (c === '{' || c === '[') depth++;
    else if (c === '}' || c === ']') {
      if (depth === 0) return i;
      depth--;
      if (depth === 0) return i + 1;
    } else if (depth === 0 && (c === ',' || /\s/.test(c ?? ''))) return i;
    i++;
  }
  return i;
}
