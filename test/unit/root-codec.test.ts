/**
 * The root codec seam (issue 20): whatever a plug-in codec decodes is checked by the package, and its own fields ride
 * through every change.
 */
import { describe, expect, it } from 'vitest';
import { familyGroup, inputSegmentKey, namespaceId, newSegmentId, rootKey } from '../../src/keys';
import { withoutReclaimed } from '../../src/collector/retired';
import {
  addSegments,
  decodeRootWith,
  emptyRoot,
  encodeRoot,
  encodeRootForWrite,
  jsonRootCodec,
  MAX_ROOT_BYTES,
  planPublication,
  RootCorruptError,
  stampRetirements,
  RootFormatMismatchError,
  RootTooLargeError,
  type RootCodec,
  type RootState,
} from '../../src/root';

const ns = namespaceId('codec');
const group = familyGroup('inodes');
const codecOf = (decoded: () => RootState): RootCodec => ({ decode: decoded, encode: () => new Uint8Array() });
const twice = inputSegmentKey(ns, newSegmentId(), 'lpb');
const root = (overrides: Partial<RootState> = {}): RootState => ({
  namespace_id: ns,
  generation: 1,
  groups: {},
  retired: [],
  ...overrides,
});

describe('the size of a root written', () => {
  /** A codec whose bytes are as many as the root's generation: sizes without building megabytes of keys. */
  const sized: RootCodec = { decode: () => root(), encode: (r) => new Uint8Array(r.generation) };

  it("a root past the readers' limit is refused, naming the namespace, the size and the fix", () => {
    expect(encodeRootForWrite(sized, root({ generation: MAX_ROOT_BYTES }))).toHaveLength(MAX_ROOT_BYTES);
    expect(() => encodeRootForWrite(sized, root({ generation: MAX_ROOT_BYTES + 1 }))).toThrow(RootTooLargeError);
    expect(() => encodeRootForWrite(sized, root({ generation: MAX_ROOT_BYTES + 1 }))).toThrow(
      new RegExp(
        `^the root of namespace ${ns} would be ${MAX_ROOT_BYTES + 1} bytes, more than readers accept \\(${MAX_ROOT_BYTES}\\), so it is not written: the collector shrinks`,
      ),
    );
  });

  it('only a write that shrinks a root already past the limit may stay past it', () => {
    expect(encodeRootForWrite(sized, root({ generation: MAX_ROOT_BYTES + 10 }), MAX_ROOT_BYTES + 11)).toHaveLength(
      MAX_ROOT_BYTES + 10,
    );
    expect(() => encodeRootForWrite(sized, root({ generation: MAX_ROOT_BYTES + 10 }), MAX_ROOT_BYTES + 10)).toThrow(
      RootTooLargeError,
    );
  });
});

describe('a plug-in root codec', () => {
  it("a codec's own error is a RootCorruptError naming the root's key", () => {
    const throwing = codecOf(() => {
      throw new Error('bad magic');
    });
    expect(() => decodeRootWith(throwing, new Uint8Array([1]), ns)).toThrow(RootCorruptError);
    expect(() => decodeRootWith(throwing, new Uint8Array([1]), ns)).toThrow(new RegExp(`${rootKey(ns)}.*bad magic`));
  });

  it("the package's root.json under a plug-in codec is a format mismatch, named as such, not corruption", () => {
    const throwing = codecOf(() => {
      throw new Error('not an acme-root v1');
    });
    const mismatch = (() => {
      try {
        return decodeRootWith(throwing, encodeRoot(emptyRoot(ns)), ns);
      } catch (err) {
        return err;
      }
    })();
    expect(mismatch).toBeInstanceOf(RootFormatMismatchError);
    expect(mismatch).toMatchObject({ failureType: 'RootFormatMismatch', retryable: false, key: rootKey(ns) });
    expect((mismatch as Error).message).toMatch(
      /is the package's root\.json, not a root this worker's codec \(a plug-in root codec\) reads: check the worker's format module \(COMPACTION_FORMAT_MODULE/,
    );
  });

  it("a plug-in's root under the package's codec is a format mismatch that quotes how the bytes start; an empty object or a damaged root.json is corruption", () => {
    expect(() => decodeRootWith(jsonRootCodec, new TextEncoder().encode('ACME1 generation=3'), ns)).toThrow(
      /it is not a root\.json \(it starts "ACME1 generation=3"\), not a root this worker's codec \(the package's root\.json\) reads/,
    );
    expect(() => decodeRootWith(jsonRootCodec, new Uint8Array(), ns)).not.toThrow(RootFormatMismatchError);
    const damaged = encodeRoot(emptyRoot(ns)).slice(0, -5);
    expect(() => decodeRootWith(jsonRootCodec, damaged, ns)).toThrow(RootCorruptError);
    expect(() => decodeRootWith(jsonRootCodec, damaged, ns)).not.toThrow(RootFormatMismatchError);
  });

  it.each([
    ['another namespace', root({ namespace_id: namespaceId('other') }), /names namespace other/],
    ['a key that is not a segment of the namespace', root({ groups: { [group]: [rootKey(ns)] } }), /not a segment key/],
    ['a retired key listed twice', root({ retired: [1, 2].map((at) => ({ key: twice, retired_at_ms: at })) }), /twice/],
    ['a generation that is not a count', root({ generation: Number.NaN }), /generation NaN/],
  ])('a decoded root naming %s is corrupt, whatever the codec says', (_, decoded, reason) => {
    expect(() =>
      decodeRootWith(
        codecOf(() => decoded),
        new Uint8Array([1]),
        ns,
      ),
    ).toThrow(reason);
  });

  it("the codec's extension is carried through publication, the collector's stamps and its record drop", () => {
    const [input, output] = [inputSegmentKey(ns, newSegmentId(), 'lpb'), inputSegmentKey(ns, newSegmentId(), 'lpb')];
    const start = addSegments(root({ extension: { schema: 7 } }), group, [input]);
    const plan = planPublication(start, { group, inputs: [input], outputs: [output], retiredAtMs: 1000 });
    expect(plan.kind === 'publish' && plan.root.extension).toEqual({ schema: 7 });
    const published = stampRetirements(plan.kind === 'publish' ? plan.root : start, 2000);
    expect(published?.extension).toEqual({ schema: 7 });
    const dropped = withoutReclaimed(published ?? start, new Set([input]), {
      nowMs: 5000,
      readerGraceMs: 0,
      lostWriteGraceMs: 0,
    });
    expect(dropped?.extension).toEqual({ schema: 7 });
    expect(dropped?.retired).toEqual([]);
  });
});
