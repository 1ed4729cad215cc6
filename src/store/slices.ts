/**
 * Hands a buffer on in sixteenths (at least 4 KiB each): a consumer that reads ahead by chunk count
 * (`Readable.from`, which `readSegment` uses, buffers 16) then holds about one buffer more, not
 * sixteen. The slices share the buffer's memory.
 */
export function* inSixteenths(bytes: Uint8Array): Generator<Uint8Array> {
  const slice = Math.max(4096, Math.ceil(bytes.length / 16));
  for (let at = 0; at < bytes.length; at += slice) yield bytes.subarray(at, at + slice);
}
