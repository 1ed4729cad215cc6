/**
 * Hands a buffer on in sixteenths (at least 4 KiB each): a consumer that reads ahead by chunk count
 * (`Readable.from`, which `readSegment` uses, buffers 16) then holds about one buffer more, not
 * sixteen. The slices share the buffer's memory.
 */
export function* inSixteenths(bytes: Uint8Array): Generator<Uint8Array> {
  const slice = Math.max(4096, Math.ceil(bytes.length / 16));
  for (let at = 0; at < bytes.length; at += slice) yield bytes.subarray(at, at + slice);
}

/** Bytes [start, end) of a stream of chunks: those before are skipped, those after never read. */
export async function* withinRange(
  chunks: AsyncIterable<Uint8Array>,
  { start, end }: { readonly start: number; readonly end: number },
): AsyncGenerator<Uint8Array> {
  let at = 0;
  for await (const chunk of chunks) {
    const [from, to] = [Math.max(start - at, 0), Math.min(end - at, chunk.length)];
    at += chunk.length;
    if (from < to) yield chunk.subarray(from, to);
    if (at >= end) return;
  }
}
