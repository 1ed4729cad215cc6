import { createServer } from 'node:net';

// Ports this process has handed out. Servers started side by side (the test setup starts them in
// parallel) each release their probe socket before binding, so the OS could give two of them the
// same port; remembering what was handed out keeps them apart.
const handedOut = new Set<number>();
const MAX_PICKS = 100;
/** A server's failure to bind a port; the port, when the message names it ("listen tcp 127.0.0.1:PORT: bind: …"). */
const PORT_CLASH = /(?::(\d+): bind: )?address already in use|EADDRINUSE/i;

function osAssignedPort(): Promise<number> {
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

/**
 * A TCP port on 127.0.0.1 that was free a moment ago and that this process has not handed out
 * before. Another process may still take it before the caller binds it, so this suits test servers
 * that fail loudly on a clash (see `retryOnPortClash`), not production.
 */
export async function freePort(): Promise<number> {
  for (let pick = 0; pick < MAX_PICKS; pick++) {
    const port = await osAssignedPort();
    if (!handedOut.has(port)) {
      handedOut.add(port);
      return port;
    }
  }
  throw new Error(`no TCP port on 127.0.0.1 that this process has not used already after ${MAX_PICKS} picks`);
}

/**
 * Starts a server whose ports `start` chooses with `freePort`, and starts it again (up to
 * `attempts` times in all) while it fails because one of them was taken by someone else before the
 * server bound it. A port the caller fixed (`fixedPort`) is not ours to change: a clash on it is not
 * retried, a clash on one of the others `start` chose is.
 */
export async function startOnFreePorts<T>(
  fixedPort: number | undefined,
  start: () => Promise<T>,
  attempts = 3,
): Promise<T> {
  if (fixedPort) handedOut.add(fixedPort); // so that no port chosen beside it is the same
  for (let attempt = 1; ; attempt++) {
    try {
      return await start();
    } catch (err) {
      if (attempt >= attempts || !(err instanceof Error)) throw err;
      const clash = PORT_CLASH.exec(err.message);
      if (clash === null || (fixedPort && Number(clash[1] ?? fixedPort) === fixedPort)) throw err;
    }
  }
}
