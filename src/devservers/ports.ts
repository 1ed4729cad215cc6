import { createServer } from 'node:net';

/**
 * A TCP port on 127.0.0.1 that was free a moment ago. The OS may hand it out again before the
 * caller binds it, so this suits test servers that fail loudly on a clash, not production.
 */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      if (address === null || typeof address === 'string') {
        server.close();
        reject(new Error(`unexpected listen address ${String(address)}`));
        return;
      }
      server.close(() => resolve(address.port));
    });
  });
}
