/**
 * Peak memory of one compaction attempt over a wide group, on MinIO: the reference compactor through
 * the activity's attempt store (src/store/attempt.ts: a stream read to its end is forgotten) beside
 * the same store keeping every stream it opened (the control: what an attempt store that forgot
 * nothing would hold). Same inputs, same bucket, each variant in a process of its own, so each peak
 * RSS (the kernel's VmHWM) is that variant's alone.
 *
 * Run: `eval "$(scripts/provision.sh)" && npx tsx bench/wide-attempt-memory.ts --inputs 10000`
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { cpus, loadavg, release } from 'node:os';
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';
import { Command } from 'commander';
import { referenceCompactor, stagedStore } from '../src/compactor';
import { startMinio } from '../src/devservers';
import { familyGroup, inputSegmentKey, namespaceId, newJobId, newSegmentId } from '../src/keys';
import { readRoot, updateRoot } from '../src/protocol';
import { addSegments, groupSegments, jsonRootCodec } from '../src/root';
import { encodeSegment, SEGMENT_EXTENSION } from '../src/segments';
import { createS3ObjectStore, type ObjectStore, type StreamedObject, type StreamOptions } from '../src/store';
import { attemptStore } from '../src/store/attempt';
import { inBatches } from '../src/store/batches';
import { whole } from './support/args';

const opts = new Command()
  .option('--inputs <n>', 'input segments of the group', whole, 10_000)
  .option('--records <n>', 'records per input segment (about 40 bytes each after gzip)', whole, 500)
  .option('--max-fan-in <n>', 'sources one merge reads at once', whole, 128)
  .option('--variant <name>', 'internal: run one variant (forget | keep) against BENCH_S3 and print its figures')
  .parse()
  .opts<{ inputs: number; records: number; maxFanIn: number; variant?: 'forget' | 'keep' }>();

const ns = namespaceId('wide');
const group = familyGroup('inodes');

interface Endpoint {
  readonly endpoint: string;
  readonly region: string;
  readonly accessKey: string;
  readonly secretKey: string;
}

const storeAt = (s3: Endpoint): ObjectStore =>
  createS3ObjectStore({
    bucket: 'bench',
    client: new S3Client({
      endpoint: s3.endpoint,
      region: s3.region,
      forcePathStyle: true,
      credentials: { accessKeyId: s3.accessKey, secretAccessKey: s3.secretKey },
    }),
  });

/**
 * The store an attempt sees: `forget` is the activity's; `keep` also holds every stream it opened until the attempt
 * ends, as before.
 */
function variantStore(store: ObjectStore, variant: 'forget' | 'keep'): ObjectStore {
  const attempt = attemptStore(store).store;
  if (variant === 'forget') return attempt;
  const kept: StreamedObject[] = [];
  return Object.assign(Object.create(attempt) as ObjectStore, {
    getStream: async (key: string, options?: StreamOptions) => {
      const object = await attempt.getStream(key, options);
      kept.push(object);
      return object;
    },
  });
}

/**
 * 64 characters that gzip cannot shrink much, so an input's bytes (and its first read window) are its records' size.
 */
const noise = (n: number): string => createHash('sha256').update(String(n)).digest('hex');

const statusKb = (field: string): number =>
  Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync('/proc/self/status', 'utf8'))?.[1] ?? 0);

async function runVariant(variant: 'forget' | 'keep', s3: Endpoint): Promise<void> {
  const store = storeAt(s3);
  const inputs = [...groupSegments((await readRoot(store, ns, jsonRootCodec)).root, group)];
  const job = { namespaceId: ns, jobId: newJobId() };
  const baseline = statusKb('VmRSS');
  const started = performance.now();
  const result = await referenceCompactor.compact({
    job: { ...job, group },
    inputs,
    store: stagedStore(variantStore(store, variant), job),
    limits: { targetSegmentBytes: 1 << 20, maxFanIn: opts.maxFanIn },
    resume: undefined,
    heartbeat: () => {},
  });
  console.log(
    JSON.stringify({
      variant,
      ms: Math.round(performance.now() - started),
      outputs: result.outputs.length,
      baselineKb: baseline,
      peakKb: statusKb('VmHWM'),
    }),
  );
  await store.close();
}

async function main(): Promise<void> {
  if (opts.variant) {
    return runVariant(opts.variant, JSON.parse(process.env.BENCH_S3 as string) as Endpoint);
  }
  const minio = await startMinio();
  try {
    const s3: Endpoint = {
      endpoint: minio.endpoint,
      region: minio.region,
      accessKey: minio.accessKey,
      secretKey: minio.secretKey,
    };
    const client = new S3Client({
      endpoint: s3.endpoint,
      region: s3.region,
      forcePathStyle: true,
      credentials: { accessKeyId: s3.accessKey, secretAccessKey: s3.secretKey },
    });
    await client.send(new CreateBucketCommand({ Bucket: 'bench' }));
    const store = storeAt(s3);
    const seeding = performance.now();
    const inputs = Array.from({ length: opts.inputs }, () => inputSegmentKey(ns, newSegmentId(), SEGMENT_EXTENSION));
    // Every input holds its own keys and one shared key, so the merge reads each to its end and meets them all.
    await inBatches(
      inputs.map((key, i) => ({ key, i })),
      1,
      32,
      async ([input]) => {
        const { key, i } = input as { key: string; i: number };
        const records = Array.from({ length: opts.records }, (_, r) => ({
          key: `inode/${String(i).padStart(6, '0')}/${String(r).padStart(3, '0')}`,
          seq: i * opts.records + r,
          value: noise(i * opts.records + r),
        }));
        await store.put(key, encodeSegment([{ key: 'inode/!shared', seq: i, value: `from ${i}` }, ...records]));
      },
    );
    await updateRoot(store, ns, (root) => addSegments(root, group, inputs), { codec: jsonRootCodec });
    await store.close();
    console.log(
      `machine: ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, linux ${release()}, node ${process.version}, load ${loadavg()[0]?.toFixed(2)}`,
    );
    console.log(
      `group: ${opts.inputs} inputs of ${opts.records + 1} records on MinIO, seeded in ${((performance.now() - seeding) / 1000).toFixed(1)} s; fan-in ${opts.maxFanIn}`,
    );
    for (const variant of ['forget', 'keep'] as const) {
      const out = execFileSync(
        process.execPath,
        ['--import', 'tsx', __filename, '--variant', variant, '--max-fan-in', String(opts.maxFanIn)],
        {
          env: { ...process.env, BENCH_S3: JSON.stringify(s3) },
          encoding: 'utf8',
          maxBuffer: 64 * 1024 * 1024,
        },
      );
      const r = JSON.parse(out.trim().split('\n').at(-1) as string) as {
        ms: number;
        outputs: number;
        baselineKb: number;
        peakKb: number;
      };
      const label = variant === 'forget' ? 'finished streams forgotten (now)' : 'every stream kept (before)';
      console.log(
        `${label.padEnd(34)} ${(r.ms / 1000).toFixed(1).padStart(6)} s, ${r.outputs} outputs, peak RSS ${(r.peakKb / 1024).toFixed(0)} MiB (${(r.baselineKb / 1024).toFixed(0)} MiB before the attempt)`,
      );
    }
  } finally {
    await minio.stop();
  }
}

void main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
