/**
 * The versioned root and the pure decisions of spec 6a: retirement in the publication CAS, the reader grace, lost
 * writes.
 */
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { familyGroup, inputSegmentKey, namespaceId, newJobId, newSegmentId, stagedSegmentKey } from '../../src/keys';
import {
  decideSegment,
  dueRetiredKeys,
  isCondemned,
  isRetainedByRoot,
  withoutReclaimed,
} from '../../src/collector/retired';
import type { RetiredRules } from '../../src/collector/rules';
import {
  condemnLostWrites,
  decodeRoot,
  encodeRoot,
  planPublication,
  RootCorruptError,
  stampRetirements,
  type RootState,
} from '../../src/root';

const ns = namespaceId('demo');
const group = familyGroup('bindings');
const input = () => inputSegmentKey(ns, newSegmentId(), 'mseg');
const staged = () => stagedSegmentKey(ns, newJobId(), newSegmentId(), 'mseg');
const text = (root: RootState) => new TextDecoder().decode(encodeRoot(root));
const rules: RetiredRules = { nowMs: 100_000, readerGraceMs: 10_000, lostWriteGraceMs: 5_000 };

describe('the root records retirement', () => {
  const [a, b, c, out] = [input(), input(), input(), staged()];
  const before: RootState = { namespace_id: ns, generation: 4, groups: { bindings: [a, b, c] } };

  it('a publication retires each replaced input at the attempt clock, in the same root that names the outputs', () => {
    const plan = planPublication(before, { group, inputs: [a, b], outputs: [out], retiredAtMs: 42 });
    if (plan.kind !== 'publish') throw new Error('expected a publication');
    expect(plan.root.groups).toEqual({ bindings: [out, c] });
    expect(plan.root.retired).toEqual([
      { key: a, retired_at_ms: 42 },
      { key: b, retired_at_ms: 42 },
    ]);
    expect(decodeRoot(encodeRoot(plan.root), ns)).toEqual(plan.root);
  });

  it('a segment retired again is listed once, with its latest retirement', () => {
    const plan = planPublication(
      { ...before, retired: [{ key: a, retired_at_ms: 1 }] },
      { group, inputs: [a], outputs: [out], retiredAtMs: 50 },
    );
    expect(plan.kind === 'publish' && plan.root.retired).toEqual([{ key: a, retired_at_ms: 50 }]);
  });

  it('every root is written in format 3, its retired list always present, and read back with every fence of spec 6c', () => {
    const fenced: RootState = {
      ...before,
      retired: [{ key: a, retired_at_ms: 7, visible_at_ms: 9 }],
      lost_write_cutoff_ms: 3,
      seq_floors: { bindings: 12 },
    };
    for (const root of [before, fenced]) expect(text(root)).toContain('"format_version":3');
    expect(text(before)).toContain('"retired":[]');
    expect(decodeRoot(encodeRoot(before), ns)).toEqual({ ...before, retired: [] });
    expect(decodeRoot(encodeRoot(fenced), ns)).toEqual(fenced);
  });

  it('a root of another format_version, or without its retired list, is corrupt', () => {
    const wire = text(before);
    for (const version of [1, 2, 4]) {
      expect(() =>
        decodeRoot(new TextEncoder().encode(wire.replace('"format_version":3', `"format_version":${version}`)), ns),
      ).toThrow(`unknown format_version ${version}`);
    }
    const payload = JSON.stringify({ namespace_id: ns, generation: 1, groups: {} });
    const withoutRetired = `{"kind":"metadata_root","format_version":3,"payload_checksum":"sha256:${createHash('sha256').update(payload).digest('hex')}","payload":${payload}}`;
    expect(() => decodeRoot(new TextEncoder().encode(withoutRetired), ns)).toThrow(/retired/);
  });

  it('a collector stamps each unstamped retirement visible once, and raises the lost-write cutoff only upward', () => {
    const retiring: RootState = {
      ...before,
      retired: [
        { key: a, retired_at_ms: 7, visible_at_ms: 8 },
        { key: b, retired_at_ms: 7 },
      ],
    };
    const stamped = stampRetirements(retiring, 50);
    expect(stamped?.retired).toEqual([
      { key: a, retired_at_ms: 7, visible_at_ms: 8 },
      { key: b, retired_at_ms: 7, visible_at_ms: 50 },
    ]);
    expect(stamped?.generation).toBe(before.generation + 1);
    expect(stampRetirements(stamped!, 60)).toBeUndefined();
    const condemned = condemnLostWrites(before, 1000);
    expect(condemned?.lost_write_cutoff_ms).toBe(1000);
    expect(condemnLostWrites(condemned!, 999)).toBeUndefined();
    expect(isCondemned(condemned!, new Date(1000))).toBe(true);
    expect(isCondemned(condemned!, new Date(1001))).toBe(false);
    expect(isCondemned(condemned!, undefined)).toBe(false);
  });

  it("a publication that drops tombstones raises its group's seq floor in the same root, never lowers it", () => {
    const plan = planPublication(
      { ...before, seq_floors: { bindings: 30 } },
      { group, inputs: [a], outputs: [out], retiredAtMs: 42, seqFloor: 20 },
    );
    expect(plan.kind === 'publish' && plan.root.seq_floors).toEqual({ bindings: 30 });
    const raised = planPublication(before, { group, inputs: [a], outputs: [out], retiredAtMs: 42, seqFloor: 20 });
    expect(raised.kind === 'publish' && raised.root.seq_floors).toEqual({ bindings: 20 });
  });

  it('a retired list naming a foreign key, or one key twice, is corrupt', () => {
    const foreign = {
      ...before,
      retired: [{ key: inputSegmentKey(namespaceId('other'), newSegmentId(), 'mseg'), retired_at_ms: 1 }],
    };
    expect(() => decodeRoot(encodeRoot(foreign), ns)).toThrow(RootCorruptError);
    const twice = {
      ...before,
      retired: [
        { key: a, retired_at_ms: 1 },
        { key: a, retired_at_ms: 2 },
      ],
    };
    expect(() => decodeRoot(encodeRoot(twice), ns)).toThrow(/twice/);
  });
});

describe('the fate of a segment in a pass', () => {
  const [live, due, inGrace, future, again, lost, young, unstamped] = [
    input(),
    input(),
    staged(),
    input(),
    input(),
    input(),
    input(),
    input(),
  ];
  const root: RootState = {
    namespace_id: ns,
    generation: 9,
    groups: { bindings: [live], inodes: [again] },
    // The grace counts from the visibility stamp, never from the writer's clock (`retired_at_ms`).
    retired: [
      { key: due, retired_at_ms: 0, visible_at_ms: rules.nowMs - rules.readerGraceMs },
      { key: inGrace, retired_at_ms: 0, visible_at_ms: rules.nowMs - rules.readerGraceMs + 1 },
      { key: future, retired_at_ms: 0, visible_at_ms: rules.nowMs + 60_000 },
      { key: again, retired_at_ms: 0, visible_at_ms: 0 },
      { key: unstamped, retired_at_ms: 0 },
    ],
  };
  const old = new Date(rules.nowMs - rules.lostWriteGraceMs);

  it.each([
    ['a referenced segment', live, old, 'referenced'],
    ['a retired segment at exactly the reader grace', due, undefined, 'retired_due'],
    ['a retired output 1 ms inside the grace', inGrace, old, 'retired_in_grace'],
    ['a retirement in the future', future, old, 'retired_in_grace'],
    ["a retirement no pass has stamped visible, however old its writer's clock", unstamped, old, 'retired_in_grace'],
    ['a retired segment another group references again', again, old, 'referenced'],
    ['an unknown input at exactly T', lost, old, 'lost_write'],
    ['an unknown input 1 ms younger than T', young, new Date(old.getTime() + 1), 'young'],
    ['an unknown input with no timestamp', young, undefined, 'young'],
    ['an unknown input from the future', young, new Date(rules.nowMs + 1), 'young'],
    ['an unknown staged output (the job-prefix reclaim decides it)', staged(), old, 'job_prefix'],
  ] as const)('%s', (_, key, lastModified, fate) => {
    expect(decideSegment(root, key, lastModified, rules)).toBe(fate);
  });

  it('only due retired segments no group references are due; the prefix reclaim keeps the others', () => {
    expect(dueRetiredKeys(root, rules)).toEqual([due]);
    expect([live, inGrace, future, again, unstamped].every((k) => isRetainedByRoot(root, k, rules))).toBe(true);
    expect(isRetainedByRoot(root, due, rules)).toBe(false);
  });

  it('records go only for due segments that are gone, so the retired list shrinks as segments go', () => {
    expect(withoutReclaimed(root, new Set([inGrace, again]), rules)).toBeUndefined();
    const next = withoutReclaimed(root, new Set([due, inGrace]), rules);
    expect(next?.generation).toBe(10);
    expect(next?.retired?.map((r) => r.key)).toEqual([inGrace, future, again, unstamped]);
  });
});
