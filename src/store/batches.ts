/**
 * Splits `items` into batches of `size` and runs `work` on at most `concurrency` of them at once, keeping batch order.
 */
export async function inBatches<T, R>(
  items: readonly T[],
  size: number,
  concurrency: number,
  work: (batch: T[]) => Promise<R>,
): Promise<R[]> {
  const batches: T[][] = [];
  for (let i = 0; i < items.length; i += size) batches.push(items.slice(i, i + size));
  const results: R[] = new Array(batches.length);
  let next = 0;
  const lanes = Array.from({ length: Math.min(concurrency, batches.length) }, async () => {
    while (next < batches.length) {
      const index = next++;
      results[index] = await work(batches[index] as T[]);
    }
  });
  await Promise.all(lanes);
  return results;
}
