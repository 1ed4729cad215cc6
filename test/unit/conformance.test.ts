/**
 * The conformance kit (issue 20) on the embedded store: the reference formats and the test's binary
 * format pass it; a compactor with non-deterministic keys, one that writes outside its job prefix,
 * one whose progress is too large for heartbeat details, and a codec that loses the generation are
 * refused, each naming the fix.
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  jsonRootCodec,
  referenceCompactor,
  stagedOutputKey,
  writeInputSegment,
  type Compactor,
  type RootCodec,
} from '../../src/index';
import { OutsideJobPrefixError, ProgressRefusedError } from '../../src/error-classes';
import { checkFormat, FormatCheckError, type FormatUnderTest } from '../../src/testing';
import { binaryCompactor, sampleBinaryInputs, textRootCodec, writeBinaryInputs } from '../support/binary-format';

const binary: FormatUnderTest = {
  compactor: binaryCompactor,
  rootCodec: textRootCodec,
  writeInputs: async (store, ns, group) => void (await writeBinaryInputs(store, ns, group, sampleBinaryInputs(3, 300))),
};

describe('checkFormat', () => {
  it('the reference compactor and root.json codec pass every check', async () => {
    const passed = await checkFormat({
      compactor: referenceCompactor,
      rootCodec: jsonRootCodec,
      writeInputs: async (store, ns, group) => {
        for (let s = 0; s < 3; s++) {
          await writeInputSegment(
            store,
            { namespaceId: ns, group },
            Array.from({ length: 300 }, (_, i) => ({
              key: `k/${String(i * (s + 1)).padStart(5, '0')}`,
              seq: s * 1000 + i,
              value: `v${s}.${i}`,
            })),
          );
        }
      },
    });
    expect(passed).toHaveLength(7);
  });

  it('the reference compactor writing segment format v2, over v1 and v2 inputs and through intermediate runs, passes every check', async () => {
    const passed = await checkFormat({
      compactor: referenceCompactor,
      rootCodec: jsonRootCodec,
      limits: { targetSegmentBytes: 4096, maxFanIn: 2, segmentFormat: 2 },
      writeInputs: async (store, ns, group) => {
        for (let s = 0; s < 3; s++) {
          const records = Array.from({ length: 300 }, (_, i) => ({
            key: `k/${String(i * (s + 1)).padStart(5, '0')}`,
            seq: s * 1000 + i,
            value: `v${s}.${i}`,
          }));
          await writeInputSegment(store, { namespaceId: ns, group }, records, { segmentFormat: s % 2 === 0 ? 1 : 2 });
        }
      },
    });
    expect(passed).toHaveLength(7);
  });

  it('the binary segments and text root written against the public API pass every check', async () => {
    expect(await checkFormat(binary)).toHaveLength(7);
  });

  it('a compactor whose output keys differ between attempts is refused as non-deterministic', async () => {
    const random: Compactor = {
      async compact({ job, store }) {
        const key = stagedOutputKey(job, randomUUID(), 'lpb');
        await store.put(key, Buffer.from('LPB1'));
        return { outputs: [key], recordsOut: 0, bytesOut: 4 };
      },
    };
    const err = await checkFormat({ ...binary, compactor: random }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(FormatCheckError);
    expect((err as FormatCheckError).check).toMatch(/deterministic/);
    expect((err as Error).message).toMatch(/stagedOutputKey/);
  });

  it('a compactor that writes outside its job prefix is refused by the writer it is given', async () => {
    const stray: Compactor = {
      async compact({ job, store }) {
        await store.put(`namespaces/${job.namespaceId}/metadata/root.json`, Buffer.from('mine now'));
        return { outputs: [], recordsOut: 0, bytesOut: 0 };
      },
    };
    const err = await checkFormat({ ...binary, compactor: stray }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OutsideJobPrefixError);
    expect((err as Error).message).toMatch(/root\.json.*stagedOutputKey/);
  });

  it('a compactor whose progress is 100 KiB is refused by the heartbeat it is given, as in a worker', async () => {
    const bulky: Compactor = {
      async compact(attempt) {
        attempt.heartbeat({ seen: 'x'.repeat(100 * 1024) });
        return (binaryCompactor as Compactor).compact(attempt);
      },
    };
    const err = await checkFormat({ ...binary, compactor: bulky }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ProgressRefusedError);
    expect((err as Error).message).toMatch(/over the limit of 65536/);
  });

  it('a codec that does not write the generation is refused: every CAS must change the bytes', async () => {
    const forgetful: RootCodec = {
      encode: (root) => textRootCodec.encode({ ...root, generation: 0 }),
      decode: (bytes, ns) => textRootCodec.decode(bytes, ns),
    };
    const err = await checkFormat({ ...binary, rootCodec: forgetful }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(FormatCheckError);
    expect((err as FormatCheckError).check).toMatch(/round-trips/);
  });
});
