/** A cap on concurrent work: bounds the requests an adapter has in flight, and so the sockets they hold. */
export type Limiter = <T>(task: () => Promise<T>) => Promise<T>;

/** Runs at most `limit` tasks at once; the others wait in arrival order. */
export function createLimiter(limit: number): Limiter {
  let running = 0;
  const waiting: (() => void)[] = [];
  return async (task) => {
    if (running >= limit) await new Promise<void>((resolve) => waiting.push(resolve));
    else running++;
    try {
      return await task();
    } finally {
      // The slot passes straight to the next waiter, so a newcomer cannot overtake it.
      const next = waiting.shift();
      if (next) next();
      else running--;
    }
  };
}
