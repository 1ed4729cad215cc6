/**
 * The k-way merge alone: v2 segments of `--sources` inputs (keys like bench/compaction.ts's, each in
 * about two sources) are decoded into record batches once, then merged `--rounds` times from memory;
 * each round prints the CPU time of this thread, so the merge's own cost is seen without the store,
 * the codec threads or the writers. Run: `eval "$(scripts/provision.sh)" && npx tsx bench/merge.ts --sources 128`.
 */
import { cpus, loadavg } from 'node:os';
import { Readable } from 'node:stream';
import { Command } from 'commander';
import { encodeSegment, mergeSegments, readMergeBatches, type MergeRecord, type SegmentRecord } from '../src/segments';
import { whole } from './support/args';

const opts = new Command('merge')
  .option('--sources <n>', 'sources merged at once', whole, 8)
  .option('--records <n>', 'records in all', whole, 1_760_000)
  .option('--rounds <n>', 'merges of the same batches', whole, 6)
  .parse()
  .opts<{ sources: number; records: number; rounds: number }>();

/** Source `s`'s records: keys about `sources / 2` apart on average, so each is in about two sources. */
function sourceRecords(s: number, records: number, keySpace: number): SegmentRecord[] {
  const out: SegmentRecord[] = [];
  const meanGap = keySpace / records;
  for (
    let k = Math.floor(Math.random() * meanGap);
    out.length < records;
    k += 1 + Math.floor(-Math.log(1 - Math.random()) * (meanGap - 1))
  ) {
    const key = `k${String(k).padStart(10, '0')}`;
    out.push(
      (k + s) % 7 === 0
        ? { key, seq: s * records + out.length, tombstone: true }
        : { key, seq: s * records + out.length, value: `v${k}` },
    );
  }
  return out;
}

async function main(): Promise<void> {
  const perSource = Math.ceil(opts.records / opts.sources);
  const keySpace = Math.ceil((perSource * opts.sources) / 2);
  const decoded: MergeRecord[][][] = [];
  for (let s = 0; s < opts.sources; s++) {
    const batches: MergeRecord[][] = [];
    for await (const batch of readMergeBatches(
      `source-${s}`,
      Readable.from([encodeSegment(sourceRecords(s, perSource, keySpace), 2)]),
    ))
      batches.push(batch);
    decoded.push(batches);
  }
  async function* replayed(batches: MergeRecord[][]): AsyncGenerator<MergeRecord[]> {
    yield* batches;
  }
  console.log(
    `machine: ${cpus().length} × ${cpus()[0]?.model.split(' ').slice(0, 2).join(' ')}, node ${process.version}, ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')} loadavg`,
  );
  for (let round = 0; round < opts.rounds; round++) {
    const before = process.threadCpuUsage();
    let out = 0;
    for await (const batch of mergeSegments(decoded.map(replayed), { dropTombstones: false })) out += batch.length;
    const cpu = process.threadCpuUsage(before);
    const ms = (cpu.user + cpu.system) / 1000;
    console.log(
      `${opts.sources} sources, ${perSource * opts.sources} records in, ${out} out: ${ms.toFixed(0)} ms of CPU, ${(((perSource * opts.sources) / ms) * 1000).toFixed(0)} records per CPU-second`,
    );
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
