// Probe: sequential vs range-parallel listing, and DeleteObjects concurrency, on a fresh MinIO.
import { mkdtempSync } from 'node:fs';
import { S3Client, CreateBucketCommand, ListObjectsV2Command, PutObjectCommand, DeleteObjectsCommand } from '@aws-sdk/client-s3';
import { startMinio } from '/work/main/src/devservers';
import { NodeHttpHandler } from '@smithy/node-http-handler';
import { Agent } from 'node:http';

const N = Number(process.argv[2] ?? 20000);
async function main() {
  const minio = await startMinio({ dataDir: mkdtempSync('/dev/shm/probe-') } as never);
  const client = new S3Client({ endpoint: minio.endpoint, region: minio.region, forcePathStyle: true, credentials: { accessKeyId: minio.accessKey, secretAccessKey: minio.secretKey },
    requestHandler: new NodeHttpHandler({ httpAgent: new Agent({ keepAlive: true, maxSockets: 256 }) }) });
  const Bucket = 'probe';
  await client.send(new CreateBucketCommand({ Bucket }));
  const prefix = 'namespaces/p/metadata/compactions/cmp_x/segments/';
  const hex = () => Array.from({ length: 32 }, () => '0123456789abcdef'[Math.floor(Math.random() * 16)]).join('');
  const keys = Array.from({ length: N }, () => `${prefix}seg_${hex()}.mseg`);
  let t = Date.now(); let i = 0;
  await Promise.all(Array.from({ length: 64 }, async () => { while (i < keys.length) { const k = keys[i++]!; await client.send(new PutObjectCommand({ Bucket, Key: k, Body: 'x'.repeat(100) })); } }));
  console.log(`seeded ${N} in ${(Date.now() - t) / 1000}s`);
  const listRange = async (after: string | undefined, upTo: string | undefined) => {
    let n = 0; let start = after;
    for (;;) {
      const out = await client.send(new ListObjectsV2Command({ Bucket, Prefix: prefix, StartAfter: start, MaxKeys: 1000 }));
      const ks = (out.Contents ?? []).map((o) => o.Key!);
      const inRange = upTo === undefined ? ks : ks.filter((k) => k <= upTo);
      n += inRange.length;
      if (!out.IsTruncated || inRange.length < ks.length || ks.length === 0) return n;
      start = ks.at(-1);
    }
  };
  for (const rep of [1, 2]) {
    t = Date.now(); const seq = await listRange(undefined, undefined); const seqMs = Date.now() - t;
    const bounds = '0123456789abcdef'.split('').map((d) => `${prefix}seg_${d}`);
    const ranges: [string | undefined, string | undefined][] = [[undefined, bounds[0]], ...bounds.map((b, j) => [b, bounds[j + 1]] as [string, string | undefined])];
    t = Date.now(); const par = (await Promise.all(ranges.map(([a, b]) => listRange(a, b)))).reduce((x, y) => x + y, 0); const parMs = Date.now() - t;
    console.log(`rep ${rep}: sequential ${seq} keys ${seqMs} ms (${Math.round(seq / seqMs * 1000)}/s); 17 ranges parallel ${par} keys ${parMs} ms (${Math.round(par / parMs * 1000)}/s)`);
  }
  // Delete throughput by concurrency, 1000 keys per request, on disjoint slices.
  let off = 0;
  for (const conc of [4, 8, 16]) {
    const slice = keys.slice(off, off + Math.floor(N / 3)); off += slice.length;
    const chunks: string[][] = []; for (let j = 0; j < slice.length; j += 1000) chunks.push(slice.slice(j, j + 1000));
    t = Date.now(); let c = 0;
    await Promise.all(Array.from({ length: conc }, async () => { while (c < chunks.length) { const ch = chunks[c++]!; await client.send(new DeleteObjectsCommand({ Bucket, Delete: { Objects: ch.map((Key) => ({ Key })), Quiet: true } })); } }));
    const ms = Date.now() - t;
    console.log(`delete ${slice.length} with ${conc} in flight: ${ms} ms (${Math.round(slice.length / ms * 1000)}/s)`);
  }
  await minio.stop();
}
main().catch((e) => { console.error(e); process.exit(1); });
