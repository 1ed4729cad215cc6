/**
 * The segment readers alone: one segment of `--records` records per format, encoded once, then read
 * `--rounds` times from memory in 256 KiB chunks (a store's read window) the way the compactor reads
 * (`readMergeBatches`: v2 values stay encoded); each round prints the CPU time of this thread, which
 * parses and checks every record (v1's gunzip and v2's zstd run on other threads).
 * Run: `eval "$(scripts/provision.sh)" && npx tsx bench/segment-read.ts --shape metadata`.
 */
import { cpus, loadavg } from 'node:os';
import { Readable } from 'node:stream';
import { Command } from 'commander';
import {
  encodeSegment,
  readMergeBatches,
  SEGMENT_FORMAT_VERSIONS,
  type SegmentFormatVersion,
  type SegmentRecord,
} from '../src/segments';
import { whole } from './support/args';

/**
 * Values: `metadata` an object listing's (ASCII JSON, escaped quotes in v1), `unicode` the same with non-Latin text
 * (two-byte strings in JavaScript).
 */
const SHAPES = {
  metadata: (k: number): string =>
    `{"size":${(k * 7919) % 104_857_600},"mtime":${1_764_800_000_000 + k},"etag":"${(k * 2654435761).toString(16)}","class":"STANDARD"}`,
  unicode: (k: number): string => `{"name":"文件-${k}-данные","size":${(k * 7919) % 104_857_600},"tag":"ü${k % 97}"}`,
} as const;

const opts = new Command('segment-read')
  .option('--records <n>', 'records in the segment', whole, 400_000)
  .option('--rounds <n>', 'reads of the same bytes', whole, 6)
  .option('--shape <name>', `values: ${Object.keys(SHAPES).join(' or ')}`, 'metadata')
  .option('--formats <v,…>', 'segment formats', (raw) => raw.split(',').map(Number), [1, 2])
  .parse()
  .opts<{ records: number; rounds: number; shape: keyof typeof SHAPES; formats: number[] }>();

const CHUNK_BYTES = 256 * 1024;

async function main(): Promise<void> {
  const value = SHAPES[opts.shape];
  if (value === undefined) throw new Error(`unknown shape ${opts.shape}`);
  const records: SegmentRecord[] = Array.from({ length: opts.records }, (_, k) => {
    const key = `k${String(k * 3).padStart(10, '0')}`;
    return k % 7 === 0 ? { key, seq: k, tombstone: true } : { key, seq: k, value: value(k) };
  });
  console.log(
    `machine: ${cpus().length} × ${cpus()[0]?.model.split(' ').slice(0, 2).join(' ')}, node ${process.version}, ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')} loadavg`,
  );
  for (const format of opts.formats) {
    if (!(SEGMENT_FORMAT_VERSIONS as readonly number[]).includes(format))
      throw new Error(`unknown segment format ${format}`);
    const bytes = encodeSegment(records, format as SegmentFormatVersion);
    const chunks = Array.from({ length: Math.ceil(bytes.length / CHUNK_BYTES) }, (_, i) =>
      bytes.subarray(i * CHUNK_BYTES, (i + 1) * CHUNK_BYTES),
    );
    for (let round = 0; round < opts.rounds; round++) {
      const before = process.threadCpuUsage();
      let read = 0;
      for await (const batch of readMergeBatches('bench', Readable.from(chunks))) read += batch.length;
      const cpu = process.threadCpuUsage(before);
      const ms = (cpu.user + cpu.system) / 1000;
      console.log(
        `v${format} ${opts.shape}: ${read} records, ${(bytes.length / 1e6).toFixed(1)} MB: ${ms.toFixed(0)} ms of CPU, ${((read / ms) * 1000).toFixed(0)} records per CPU-second`,
      );
    }
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
