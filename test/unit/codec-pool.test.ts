/**
 * The compactor's pool: zstd off the calling thread in batches, each reply paired with its request, failures
 * contained.
 */
import { randomBytes } from 'node:crypto';
import { gzipSync, zstdCompressSync, zstdDecompressSync } from 'node:zlib';
import { describe, expect, it, vi } from 'vitest';
import {
  compactorPool,
  gzipOnPool,
  zstdCompressOnPool as zstdCompressBatch,
  zstdDecompressOnPool as zstdDecompressBatch,
} from '../../src/segments/pool';
import { BLOCKS_PER_POOL_TASK, BlockSegmentBuilder, readBlockSegment } from '../../src/segments/blocks';

const zstdCompressOnPool = async (raw: Uint8Array, level: number) => (await zstdCompressBatch([raw], level))[0]!;
const zstdDecompressOnPool = async (compressed: Uint8Array, maxOutputLength: number) =>
  (await zstdDecompressBatch([{ compressed, maxOutputLength }]))[0]!;

describe("the compactor's pool", () => {
  it('has the threads COMPACTION_COMPACTOR_THREADS sets, read when it starts', () => {
    vi.stubEnv('COMPACTION_COMPACTOR_THREADS', '3');
    expect(compactorPool().options.maxThreads).toBe(3);
    vi.unstubAllEnvs();
  });

  it('compresses and decompresses like node:zlib, each of many concurrent requests getting its own answer', async () => {
    const blocks = Array.from({ length: 64 }, (_, i) =>
      Buffer.concat([Buffer.from(`block ${i} `.repeat(200)), randomBytes(i * 37)]),
    );
    const compressed = await Promise.all(blocks.map((raw) => zstdCompressOnPool(raw, 1)));
    compressed.forEach((bytes, i) => expect(zstdDecompressSync(bytes).equals(blocks[i]!)).toBe(true));
    const raws = await Promise.all(blocks.map((raw) => zstdDecompressOnPool(zstdCompressSync(raw), raw.length)));
    raws.forEach((raw, i) => expect(raw.equals(blocks[i]!)).toBe(true));
  });

  it('codes a batch in one task, each result in its place, views of one buffer and blocks handed over alike', async () => {
    const run = vi.spyOn(compactorPool(), 'run');
    const blocks = Array.from({ length: 8 }, (_, i) => Buffer.from(`block ${i} `.repeat(100 + i * 50)));
    const whole = Buffer.concat(blocks);
    let at = 0;
    const views = blocks.map((block) => whole.subarray(at, (at += block.length)));
    const compressed = await zstdCompressBatch(views, 1);
    expect(whole.equals(Buffer.concat(blocks))).toBe(true); // the caller's buffer untouched
    const handedOver = blocks.map((block) => {
      const own = Buffer.allocUnsafeSlow(block.length);
      block.copy(own);
      return own;
    });
    // The same bytes in the same order: zstd is deterministic at a level.
    expect(await zstdCompressBatch(handedOver, 1, { handOver: true })).toEqual(compressed);
    const raws = await zstdDecompressBatch(
      compressed.map((bytes, i) => ({ compressed: bytes, maxOutputLength: blocks[i]!.length })),
    );
    raws.forEach((raw, i) => expect(raw.equals(blocks[i]!)).toBe(true));
    expect(run).toHaveBeenCalledTimes(3);
    run.mockRestore();
  });

  it('a v2 segment is compressed and read back in batches of blocks, one pool task a batch', async () => {
    const run = vi.spyOn(compactorPool(), 'run');
    const builder = new BlockSegmentBuilder({ background: true });
    const records = Array.from({ length: 12_000 }, (_, i) => ({
      key: `key-${String(i).padStart(8, '0')}`,
      seq: i + 1,
      value: randomBytes(48).toString('hex'),
    }));
    for (const record of records) builder.add(record);
    const segment = await builder.finish();
    const compressions = run.mock.calls.length;
    run.mockClear();
    // The whole segment is received at once: every batch is full but the last.
    const blocks = [];
    for await (const block of readBlockSegment('segment', (async function* () {})(), segment)) blocks.push(block);
    expect(blocks.length).toBeGreaterThan(2 * BLOCKS_PER_POOL_TASK);
    expect(blocks.flat().map((r) => r.toRecord())).toEqual(records);
    expect(compressions).toBe(Math.ceil(blocks.length / BLOCKS_PER_POOL_TASK));
    expect(run.mock.calls.length).toBe(Math.ceil(blocks.length / BLOCKS_PER_POOL_TASK));
    run.mockRestore();
  });

  it('gzips byte for byte as node:zlib on this thread (a re-run of a cut writes the same bytes)', async () => {
    const raw = Buffer.from('{"key":"k","seq":1,"value":"v"}\n'.repeat(5000));
    expect((await gzipOnPool(raw, 3)).equals(gzipSync(raw, { level: 3 }))).toBe(true);
  });

  it('takes a view of a larger buffer without touching the rest of it', async () => {
    const whole = Buffer.from('0123456789'.repeat(1000));
    const view = whole.subarray(100, 5100);
    expect((await zstdDecompressOnPool(await zstdCompressOnPool(view, 1), view.length)).equals(view)).toBe(true);
    expect(whole.toString('latin1', 0, 10)).toBe('0123456789');
  });

  it('fails a request that is not zstd, or would decompress past its bound, and goes on serving others', async () => {
    await expect(zstdDecompressOnPool(Buffer.from('not zstd at all'), 1024)).rejects.toThrow();
    const raw = Buffer.alloc(10_000, 7);
    await expect(zstdDecompressOnPool(zstdCompressSync(raw), 9_999)).rejects.toThrow();
    expect((await zstdDecompressOnPool(zstdCompressSync(raw), raw.length)).equals(raw)).toBe(true);
  });

  it('a thread that dies fails the tasks it held only (its own and at most one more); the others finish and the pool serves on', async () => {
    // Slow to compress (level 19), so every thread is busy when one of them is stopped; two more tasks than threads,
    // each given to the least busy thread, so a thread holds two at most.
    const raw = Buffer.from(randomBytes(256 << 10).toString('hex'));
    const pool = compactorPool();
    const tasks = Array.from({ length: pool.options.maxThreads + 2 }, () => zstdCompressOnPool(raw, 19));
    while (pool.threads.length < pool.options.maxThreads) await new Promise((resolve) => setTimeout(resolve, 10));
    await new Promise((resolve) => setTimeout(resolve, 50)); // every thread has taken its first task
    await pool.threads[0]!.terminate();
    const settled = await Promise.allSettled(tasks);
    const failed = settled.filter((s) => s.status === 'rejected').length;
    expect(failed).toBeGreaterThanOrEqual(1);
    expect(failed).toBeLessThanOrEqual(2);
    for (const s of settled) if (s.status === 'fulfilled') expect(zstdDecompressSync(s.value).equals(raw)).toBe(true);
    expect((await zstdDecompressOnPool(zstdCompressSync(raw), raw.length)).equals(raw)).toBe(true);
  }, 60_000);
});
