import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

export interface ServerSpec {
  /** Used in error messages and the default log file name. */
  name: string;
  command: string;
  args: string[];
  /** Merged over process.env. */
  env?: Record<string, string>;
  /** stdout and stderr of the server are appended here; default: a fresh file under os.tmpdir(). */
  logFile?: string;
  /** One readiness probe. Must bound its own duration; a throw counts as "not ready yet". */
  probe: () => Promise<boolean>;
  readyTimeoutMs: number;
}

export interface ServerProcess {
  readonly logFile: string;
  /** SIGTERM, then SIGKILL after 5 s; resolves once the process has exited. Idempotent. */
  stop(): Promise<void>;
}

const STOP_GRACE_MS = 5_000;
const POLL_INTERVAL_MS = 200;
const LOG_TAIL_BYTES = 4_096;

// Children still running. A test run that dies (uncaught error, process.exit, signal) must not
// leave servers holding ports and CPU on a 2-core CI machine, so they are SIGKILLed on the way out.
const live = new Set<ChildProcess>();
let exitHooksInstalled = false;

function killLive(): void {
  for (const child of live) child.kill('SIGKILL');
}

function installExitHooks(): void {
  if (exitHooksInstalled) return;
  exitHooksInstalled = true;
  process.on('exit', killLive);
  // A signal with no listener terminates Node without emitting 'exit'. Kill the children, then,
  // if nobody else handles the signal, re-raise it so the default termination still happens.
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.once(signal, () => {
      killLive();
      if (process.listenerCount(signal) === 0) process.kill(process.pid, signal);
    });
  }
}

function logTail(logFile: string): string {
  try {
    const size = statSync(logFile).size;
    const length = Math.min(size, LOG_TAIL_BYTES);
    const buffer = Buffer.alloc(length);
    const fd = openSync(logFile, 'r');
    try {
      readSync(fd, buffer, 0, length, size - length);
    } finally {
      closeSync(fd);
    }
    return length === 0 ? '(empty)' : buffer.toString('utf8');
  } catch (err) {
    return `(log unreadable: ${String(err)})`;
  }
}

type Exit = { code: number | null; signal: NodeJS.Signals | null } | { error: Error };

function describeExit(exit: Exit): string {
  if ('error' in exit) return `failed to run: ${exit.error.message}`;
  return exit.signal !== null ? `was killed by ${exit.signal}` : `exited with code ${exit.code}`;
}

/**
 * Spawns a server and resolves once `probe` reports it ready. On timeout or early exit the
 * process is stopped and the error carries the tail of its log.
 */
export async function startServer(spec: ServerSpec): Promise<ServerProcess> {
  const logFile = spec.logFile ?? join(mkdtempSync(join(tmpdir(), 'compaction-lease-')), `${spec.name}.log`);
  // Output goes straight to a file, not a pipe: nobody has to drain it, and it survives us.
  const fd = openSync(logFile, 'a');
  let child: ChildProcess;
  try {
    child = spawn(spec.command, spec.args, { stdio: ['ignore', fd, fd], env: { ...process.env, ...spec.env } });
  } finally {
    closeSync(fd);
  }

  installExitHooks();
  live.add(child);
  let exit: Exit | undefined;
  const exited = new Promise<void>((resolve) => {
    const done = (e: Exit): void => {
      exit ??= e;
      live.delete(child);
      resolve();
    };
    child.once('exit', (code, signal) => done({ code, signal }));
    child.once('error', (error) => done({ error }));
  });

  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> => {
    stopping ??= (async () => {
      if (exit !== undefined) return;
      child.kill('SIGTERM');
      const escalate = setTimeout(() => child.kill('SIGKILL'), STOP_GRACE_MS);
      await exited;
      clearTimeout(escalate);
    })();
    return stopping;
  };

  const fail = (what: string): Error =>
    new Error(
      `${spec.name} (${spec.command} ${spec.args.join(' ')}) ${what}; log ${logFile} ends with:\n${logTail(logFile)}`,
    );

  const deadline = Date.now() + spec.readyTimeoutMs;
  for (;;) {
    const ready = await Promise.race([spec.probe().catch(() => false), exited.then(() => false)]);
    if (exit !== undefined) throw fail(`${describeExit(exit)} before becoming ready`);
    if (ready) return { logFile, stop };
    if (Date.now() >= deadline) {
      await stop();
      throw fail(`was not ready within ${spec.readyTimeoutMs} ms`);
    }
    await sleep(POLL_INTERVAL_MS);
  }
}

/** GET `url` with a short timeout; true on any 2xx. */
export async function httpOk(url: string, timeoutMs = 2_000): Promise<boolean> {
  const res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
  await res.body?.cancel();
  return res.ok;
}
