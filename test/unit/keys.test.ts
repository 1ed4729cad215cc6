import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  compactionsPrefix,
  inputSegmentKey,
  familyGroup,
  InvalidKeyError,
  jobId,
  jobPrefix,
  leaseKey,
  namespaceId,
  namespacePrefix,
  newJobId,
  newSegmentId,
  parseCompactionKey,
  parseJobPrefix,
  parseNamespacePrefix,
  rootKey,
  segmentId,
  stagedSegmentKey,
  type MetadataCompactionId,
  type NamespaceId,
  type SegmentId,
} from '../../src/keys';

const ns = namespaceId('demo');
const job = jobId(`cmp_${'ab'.repeat(16)}`);
const seg = segmentId(`seg_${'01'.repeat(16)}`);

describe('key grammar', () => {
  it('builds every key of spec section 2 from validated ids', () => {
    expect(rootKey(ns)).toBe('namespaces/demo/metadata/root.json');
    expect(jobPrefix(ns, job)).toBe(`namespaces/demo/metadata/compactions/${job}/`);
    expect(leaseKey(ns, job)).toBe(`namespaces/demo/metadata/compactions/${job}/lease.json`);
    expect(stagedSegmentKey(ns, job, seg, 'mseg')).toBe(
      `namespaces/demo/metadata/compactions/${job}/segments/${seg}.mseg`,
    );
  });

  it('the job prefix ends in a slash, so one job id never covers another that extends it', () => {
    const short = jobPrefix(ns, job);
    expect(short.endsWith('/')).toBe(true);
    expect(leaseKey(ns, jobId(`cmp_${'ab'.repeat(16)}`)).startsWith(short)).toBe(true);
  });

  it('the lease sorts before the staged segments of its job', () => {
    expect(leaseKey(ns, job) < stagedSegmentKey(ns, job, seg, 'mseg')).toBe(true);
  });

  it.each(['', '..', 'a/b', 'Demo', 'a'.repeat(64), '-lead', 'ünï', 'a..b', ' a', 'a.b'])(
    'rejects namespace id %j with a typed error naming it',
    (bad) => {
      expect(() => namespaceId(bad)).toThrow(InvalidKeyError);
      expect(() => namespaceId(bad)).toThrow(/namespace id/);
    },
  );

  it('an id of 300 characters is quoted to its first 64 (its length and a digest say the rest), for every kind of id', () => {
    const long = `${'n'.repeat(299)}!`;
    for (const [validate, subject] of [
      [namespaceId, 'namespace id'],
      [familyGroup, 'family group'],
      [jobId, 'job id'],
    ] as const) {
      const message = (() => {
        try {
          validate(long);
        } catch (err) {
          return (err as Error).message;
        }
        return '';
      })();
      expect(message).toMatch(
        new RegExp(`^invalid ${subject} "${'n'.repeat(64)}… \\(300 characters, digest [0-9a-f]{14}\\)": must be `),
      );
      expect(message).not.toContain('n'.repeat(65));
    }
  });

  it.each([
    'cmp_',
    `cmp_${'A'.repeat(32)}`,
    `cmp_${'a'.repeat(31)}`,
    `cmp_${'a'.repeat(33)}`,
    `seg_${'a'.repeat(32)}`,
    '../x',
  ])('rejects job id %j', (bad) => expect(() => jobId(bad)).toThrow(InvalidKeyError));

  it('every key builder validates its ids at run time: a raw string cast to an id type builds no key', () => {
    const badNs = '../demo' as NamespaceId;
    const badJob = `cmp_${'ab'.repeat(16)}/../x` as MetadataCompactionId;
    const badSeg = '../../root.json' as SegmentId;
    const builders: [string, () => string][] = [
      ['namespacePrefix', () => namespacePrefix(badNs)],
      ['rootKey', () => rootKey(badNs)],
      ['compactionsPrefix', () => compactionsPrefix(badNs)],
      ['inputSegmentKey (namespace)', () => inputSegmentKey(badNs, seg, 'mseg')],
      ['inputSegmentKey (segment)', () => inputSegmentKey(ns, badSeg, 'mseg')],
      ['jobPrefix (namespace)', () => jobPrefix(badNs, job)],
      ['jobPrefix (job)', () => jobPrefix(ns, badJob)],
      ['leaseKey (namespace)', () => leaseKey(badNs, job)],
      ['leaseKey (job)', () => leaseKey(ns, badJob)],
      ['stagedSegmentKey (namespace)', () => stagedSegmentKey(badNs, job, seg, 'mseg')],
      ['stagedSegmentKey (job)', () => stagedSegmentKey(ns, badJob, seg, 'mseg')],
      ['stagedSegmentKey (segment)', () => stagedSegmentKey(ns, job, badSeg, 'mseg')],
      ['parseJobPrefix (namespace)', () => String(parseJobPrefix(badNs, 'namespaces/../demo/metadata/compactions/'))],
    ];
    for (const [name, build] of builders) expect(build, name).toThrow(InvalidKeyError);
  });

  it('generates ids of the grammar from 128 random bits, deterministically from a given source', () => {
    expect(newJobId()).toMatch(/^cmp_[0-9a-f]{32}$/);
    expect(newSegmentId()).toMatch(/^seg_[0-9a-f]{32}$/);
    const zeros = (b: Uint8Array) => b.fill(7);
    expect(newJobId(zeros)).toBe(`cmp_${'07'.repeat(16)}`);
  });

  it('classifies listed keys as lease, staged segment or unrecognised', () => {
    expect(parseCompactionKey(leaseKey(ns, job))).toEqual({ kind: 'lease', namespaceId: ns, jobId: job });
    expect(parseCompactionKey(stagedSegmentKey(ns, job, seg, 'mseg'))).toEqual({
      kind: 'staged_segment',
      namespaceId: ns,
      jobId: job,
      segmentId: seg,
      extension: 'mseg',
    });
    for (const odd of [
      `${jobPrefix(ns, job)}notes.txt`,
      `${jobPrefix(ns, job)}segments/../lease.json`,
      `namespaces/demo/metadata/compactions/${job}x/lease.json`,
      `namespaces/demo/metadata/compactions/${job}/lease.json/`,
      `namespaces/demo/metadata/compactions/${job}/segments/${seg}`,
      `namespaces/Demo/metadata/compactions/${job}/lease.json`,
    ]) {
      expect(parseCompactionKey(odd)).toEqual({ kind: 'unrecognised', key: odd });
    }
  });

  it('parses discovered namespace and job prefixes, and nothing else', () => {
    expect(parseNamespacePrefix('namespaces/demo/')).toBe('demo');
    expect(parseNamespacePrefix('namespaces/../')).toBeUndefined();
    expect(parseJobPrefix(ns, jobPrefix(ns, job))).toBe(job);
    expect(parseJobPrefix(ns, `${jobPrefix(ns, job)}x/`)).toBeUndefined();
    expect(parseJobPrefix(ns, `namespaces/other/metadata/compactions/${job}/`)).toBeUndefined();
  });

  it('every key that parses as a lease or staged segment is rebuilt exactly by the builders', () => {
    fc.assert(
      fc.property(
        fc.string({ unit: fc.constantFrom(...'namespace/mtdcoiplj.sg_0123456789abcdef'.split('')), maxLength: 140 }),
        (key) => {
          const parsed = parseCompactionKey(key);
          if (parsed.kind === 'lease') expect(leaseKey(parsed.namespaceId, parsed.jobId)).toBe(key);
          if (parsed.kind === 'staged_segment') {
            expect(stagedSegmentKey(parsed.namespaceId, parsed.jobId, parsed.segmentId, parsed.extension)).toBe(key);
          }
        },
      ),
    );
  });
});
