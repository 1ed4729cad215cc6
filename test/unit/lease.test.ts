import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { encodeEnvelope } from '../../src/envelope';
import { jobId, namespaceId } from '../../src/keys';
import {
  claimLeaseState,
  claimUnleasedState,
  createLeaseState,
  decideOwner,
  decodeLease,
  encodeLease,
  isLeaseLive,
  LeaseCorruptError,
  LeaseTransitionError,
  nextHeartbeatMs,
  refreshLeaseState,
  type LeaseState,
} from '../../src/lease';
import { decodeRoot, encodeRoot, RootCorruptError } from '../../src/root';
import { TEST_PASS_ID } from '../support/pass';

const ns = namespaceId('demo');
const job = jobId('cmp_0123456789abcdef0123456789abcdef');
const ids = { namespaceId: ns, jobId: job };
const active = createLeaseState({ jobId: job, namespaceId: ns, ownerId: 'worker-7@host', nowMs: 1000 });
const golden = (name: string) => readFileSync(join(__dirname, '..', 'golden', name));
const text = (lease: LeaseState) => new TextDecoder().decode(encodeLease(lease));
const bytes = (s: string) => new TextEncoder().encode(s);

describe('lease codec', () => {
  it.each([
    ['lease-active.json', refreshLeaseState(active, 3000)],
    ['lease-reaping.json', claimLeaseState(refreshLeaseState(active, 3000), 'gc_0000000004000_0123456789abcdef', 4000)],
  ])('golden file %s round-trips byte for byte', (file, lease) => {
    expect(Buffer.from(encodeLease(lease))).toEqual(golden(file));
    expect(decodeLease(golden(file), ids)).toEqual(lease);
  });

  it('encodes the seed fields in the seed order inside the envelope', () => {
    expect(text(active)).toMatch(
      /^\{"kind":"compaction_lease","format_version":1,"payload_checksum":"sha256:[0-9a-f]{64}","payload":\{"job_id":"cmp_[0-9a-f]{32}","namespace_id":"demo","owner_id":"worker-7@host","status":"active","started_at_ms":1000,"heartbeat_at_ms":1000\}\}$/,
    );
  });

  const corruptions: [string, (s: string) => string, RegExp][] = [
    ['not JSON', (s) => s.slice(0, -1), /not JSON/],
    ['empty', () => '', /empty object/],
    ['a wrong checksum', (s) => s.replace(/sha256:[0-9a-f]{4}/, 'sha256:0000'), /payload_checksum/],
    [
      'payload bytes changed but still valid',
      (s) => s.replace('"heartbeat_at_ms":1000', '"heartbeat_at_ms":1001'),
      /payload_checksum/,
    ],
    ['an unknown kind', (s) => s.replace('compaction_lease', 'metadata_root'), /kind/],
    ['an unknown format version', (s) => s.replace('"format_version":1', '"format_version":2'), /format_version/],
    ['an unknown envelope field', (s) => s.replace('{"kind"', '{"extra":1,"kind"'), /envelope/],
    ['a missing envelope field', (s) => s.replace(/"payload_checksum":"[^"]*",/, ''), /envelope/],
  ];
  it.each(corruptions)('rejects %s as corrupt, naming the key', (_, mutate, reason) => {
    const decode = () => decodeLease(bytes(mutate(text(active))), ids);
    expect(decode).toThrow(LeaseCorruptError);
    expect(decode).toThrow(reason);
    expect(decode).toThrow(
      /namespaces\/demo\/metadata\/compactions\/cmp_0123456789abcdef0123456789abcdef\/lease\.json/,
    );
  });

  it.each([
    ['an unknown payload field', { ...active, cursor: 5 }, /cursor/],
    [
      'a missing payload field',
      { job_id: job, namespace_id: ns, owner_id: 'w', status: 'active', started_at_ms: 1 },
      /heartbeat_at_ms/,
    ],
    ['a wrong type', { ...active, heartbeat_at_ms: '1000' }, /heartbeat_at_ms/],
    ['an unknown status', { ...active, status: 'done' }, /status/],
    ['another job than its key', { ...active, job_id: 'cmp_ffffffffffffffffffffffffffffffff' }, /names job/],
    ['another namespace than its key', { ...active, namespace_id: 'other' }, /names namespace/],
  ])('rejects a well-framed payload with %s', (_, payload, reason) => {
    const decode = () => decodeLease(encodeEnvelope('compaction_lease', payload), ids);
    expect(decode).toThrow(LeaseCorruptError);
    expect(decode).toThrow(reason);
  });

  describe('repeated members and a byte-order mark are corruption', () => {
    // The golden active lease (heartbeat 3000, checksum over its payload) with a second, unchecksummed
    // payload appended: JSON.parse keeps the last one, so the old decoder read a `reaping` lease.
    const DOUBLED_PAYLOAD =
      '{"kind":"compaction_lease","format_version":1,' +
      '"payload_checksum":"sha256:245f758c663bb6f422c0933748139305a37cd5044eb037f166b997bf949710c4",' +
      '"payload":{"job_id":"cmp_0123456789abcdef0123456789abcdef","namespace_id":"demo","owner_id":"worker-7@host","status":"active","started_at_ms":1000,"heartbeat_at_ms":3000},' +
      '"payload":{"job_id":"cmp_0123456789abcdef0123456789abcdef","namespace_id":"demo","owner_id":"worker-7@host","status":"reaping","started_at_ms":1000,"heartbeat_at_ms":3000}}';
    const goldenText = golden('lease-active.json').toString('utf8');

    it('the doubled-payload attack starts with the golden lease byte for byte', () => {
      expect(DOUBLED_PAYLOAD.startsWith(goldenText.slice(0, -1))).toBe(true);
    });

    it.each([
      ['a second payload appended to a live lease', DOUBLED_PAYLOAD, /member "payload" appears twice/],
      [
        'a second payload placed first',
        goldenText.replace('{"kind"', `{${DOUBLED_PAYLOAD.slice(DOUBLED_PAYLOAD.lastIndexOf('"payload"'), -1)},"kind"`),
        /member "payload" appears twice/,
      ],
      [
        'a repeated kind',
        goldenText.replace('{"kind":"compaction_lease",', '{"kind":"metadata_root","kind":"compaction_lease",'),
        /member "kind" appears twice/,
      ],
      [
        'a repeated field inside the payload',
        goldenText.replace('"status":"active"', '"status":"active","status":"reaping"'),
        /member "status" appears twice/,
      ],
      [
        'a repeated name spelt with an escape',
        goldenText.replace('"status":"active"', '"status":"active","st\\u0061tus":"reaping"'),
        /member "status" appears twice/,
      ],
      [
        'a repeated name deep inside an array',
        goldenText.replace('"format_version":1', '"format_version":1,"x":[{"a":1,"a":2}]'),
        /member "a" appears twice/,
      ],
    ])('%s', (_, wire, reason) => {
      const decode = () => decodeLease(bytes(wire), ids);
      expect(decode).toThrow(LeaseCorruptError);
      expect(decode).toThrow(reason);
    });

    it('the root shares the envelope: a repeated group is corrupt, equal names in different objects are not', () => {
      const seg = (n: number) => `namespaces/demo/metadata/segments/seg_${String(n).repeat(32)}.mseg`;
      const wire = new TextDecoder().decode(
        encodeRoot({ namespace_id: ns, generation: 1, groups: { bindings: [seg(1)], inodes: [seg(2)] } }),
      );
      expect(decodeRoot(bytes(wire), ns).groups).toEqual({ bindings: [seg(1)], inodes: [seg(2)] });
      // Nested objects each have their own names: the lease's payload and its envelope both name no member twice.
      expect(decodeLease(golden('lease-active.json'), ids).status).toBe('active');
      const repeated = () => decodeRoot(bytes(wire.replace(`"inodes":`, `"bindings":[],"inodes":`)), ns);
      expect(repeated).toThrow(RootCorruptError);
      expect(repeated).toThrow(
        /root namespaces\/demo\/metadata\/root\.json is corrupt: member "bindings" appears twice/,
      );
    });

    it('a byte-order mark before the golden lease', () => {
      const decode = () =>
        decodeLease(Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), golden('lease-active.json')]), ids);
      expect(decode).toThrow(LeaseCorruptError);
      expect(decode).toThrow(/byte-order mark/);
    });
  });

  it('rejects an object far larger than a lease without parsing it', () => {
    expect(() => decodeLease(new Uint8Array(100 * 1024 * 1024), ids)).toThrow(/more than a lease can be/);
  });

  it('decodes what it encodes, for any valid lease', () => {
    fc.assert(
      fc.property(
        fc.string({ minLength: 1, maxLength: 256 }),
        fc.nat(),
        fc.nat(),
        fc.boolean(),
        (owner, start, delta, reaping) => {
          let lease = refreshLeaseState(
            createLeaseState({ jobId: job, namespaceId: ns, ownerId: owner, nowMs: start }),
            start + delta + 1,
          );
          if (reaping) lease = claimLeaseState(lease, TEST_PASS_ID, Date.now());
          expect(decodeLease(encodeLease(lease), ids)).toEqual(lease);
        },
      ),
    );
  });
});

describe('lease transitions', () => {
  it('a refresh strictly increases the heartbeat and keeps the rest', () => {
    const refreshed = refreshLeaseState(active, 1001);
    expect(refreshed).toEqual({ ...active, heartbeat_at_ms: 1001 });
    expect(() => refreshLeaseState(active, 1000)).toThrow(LeaseTransitionError);
    expect(nextHeartbeatMs(refreshed, 900)).toBe(1002);
    expect(nextHeartbeatMs(refreshed, 5000.7)).toBe(5000);
  });

  it('a claim names its pass and its clock, so two passes never write the same bytes; reaping never turns active again', () => {
    const claimed = claimLeaseState(active, TEST_PASS_ID, 5000);
    expect(claimed).toEqual({ ...active, status: 'reaping', owner_id: TEST_PASS_ID, heartbeat_at_ms: 5000 });
    const other = claimLeaseState(active, 'gc_0000000000002_00000000000000bb', 5000);
    expect(encodeLease(other)).not.toEqual(encodeLease(claimed));
    // A claim stamps no earlier than the lease's last write: the heartbeat strictly increases.
    expect(claimLeaseState(claimed, TEST_PASS_ID, 10).heartbeat_at_ms).toBe(5001);
    expect(() => claimLeaseState(active, '', 5000)).toThrow(LeaseTransitionError);
    expect(() => refreshLeaseState(claimed, 6000)).toThrow(LeaseTransitionError);
  });

  it('a prefix without a lease is claimed by a reaping lease of the pass, started at its clock', () => {
    expect(claimUnleasedState({ jobId: job, namespaceId: ns, passId: TEST_PASS_ID, nowMs: 7000 })).toEqual({
      job_id: job,
      namespace_id: ns,
      owner_id: TEST_PASS_ID,
      status: 'reaping',
      started_at_ms: 7000,
      heartbeat_at_ms: 7000,
    });
  });

  it('a lease is live up to and including heartbeat + expiry, and expired 1 ms after', () => {
    expect(isLeaseLive(active, 1000 + 500, 500)).toBe(true);
    expect(isLeaseLive(active, 1000 + 501, 500)).toBe(false);
    expect(isLeaseLive(claimLeaseState(active, TEST_PASS_ID, Date.now()), 0, 500)).toBe(false);
  });

  it("decides the owner of a prefix as spec 6.2 says: its own claim, another pass's live claim, an expired one to take over", () => {
    const pass = TEST_PASS_ID;
    expect(decideOwner({ missing: true }, 0, 500, pass)).toEqual({ owner: 'none' });
    expect(decideOwner({ corrupt: 'bad' }, 0, 500, pass)).toEqual({ owner: 'corrupt', reason: 'bad' });
    const ours = claimLeaseState(active, pass, 2000);
    expect(decideOwner({ lease: ours }, 9999, 500, pass)).toEqual({ owner: 'collector' });
    expect(decideOwner({ lease: ours }, 2500, 500, 'gc_0000000000002_00000000000000bb')).toEqual({
      owner: 'another_pass',
      passId: pass,
    });
    expect(decideOwner({ lease: ours }, 2501, 500, 'gc_0000000000002_00000000000000bb')).toEqual({
      owner: 'expired',
      lease: ours,
    });
    expect(decideOwner({ lease: active }, 1500, 500, pass)).toEqual({ owner: 'job' });
    expect(decideOwner({ lease: active }, 1501, 500, pass)).toEqual({ owner: 'expired', lease: active });
  });
});
