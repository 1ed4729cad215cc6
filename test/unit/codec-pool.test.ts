/** The block codec threads: zstd off the calling thread, each reply paired with its request, failures contained. */
import { randomBytes } from 'node:crypto';
import { gzipSync, zstdCompressSync, zstdDecompressSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { gzipOnPool, zstdCompressOnPool, zstdDecompressOnPool } from '../../src/segments/codec-pool';

describe('block codec pool', () => {
  it('compresses and decompresses like node:zlib, each of many concurrent requests getting its own answer', async () => {
    const blocks = Array.from({ length: 64 }, (_, i) =>
      Buffer.concat([Buffer.from(`block ${i} `.repeat(200)), randomBytes(i * 37)]),
    );
    const compressed = await Promise.all(blocks.map((raw) => zstdCompressOnPool(raw, 1)));
    compressed.forEach((bytes, i) => expect(zstdDecompressSync(bytes).equals(blocks[i]!)).toBe(true));
    const raws = await Promise.all(blocks.map((raw) => zstdDecompressOnPool(zstdCompressSync(raw), raw.length)));
    raws.forEach((raw, i) => expect(raw.equals(blocks[i]!)).toBe(true));
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
});
