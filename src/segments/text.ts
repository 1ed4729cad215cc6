/** Well-formed text: what a record's key and value must be, in every format. */
import type { SegmentRecord } from './format';

/**
 * `String.prototype.isWellFormed` (ES2024, in every Node the package supports), typed here so the
 * package compiles against the ES2022 library its users may have.
 */
export const isWellFormed = (text: string): boolean => (text as string & { isWellFormed(): boolean }).isWellFormed();

const isHighSurrogate = (unit: number): boolean => unit >= 0xd800 && unit <= 0xdbff;
const isLowSurrogate = (unit: number): boolean => unit >= 0xdc00 && unit <= 0xdfff;

/**
 * Where `text` holds a lone surrogate (a UTF-16 code unit no encoding can store), as "a lone surrogate \ud800 at
 * position 1", or undefined when it is well-formed.
 */
export function loneSurrogate(text: string): string | undefined {
  if (isWellFormed(text)) return undefined;
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i);
    if (isHighSurrogate(unit) && isLowSurrogate(text.charCodeAt(i + 1))) i++;
    else if (isHighSurrogate(unit) || isLowSurrogate(unit))
      return `a lone surrogate \\u${unit.toString(16)} at position ${i}`;
  }
  throw new Error('unreachable: a string that is not well-formed holds a lone surrogate');
}

/** Why the key or value of `record` is not well-formed text (which, and where), or undefined when both are. */
export function illFormedText(record: SegmentRecord): string | undefined {
  const inKey = loneSurrogate(record.key);
  if (inKey !== undefined) return `its key has ${inKey}`;
  const inValue = 'value' in record ? loneSurrogate(record.value) : undefined;
  return inValue === undefined ? undefined : `its value has ${inValue}`;
}
