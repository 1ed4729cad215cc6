/**
 * Preloaded (`--import`) into every worker process a test starts: an uncaught exception or an
 * unhandled rejection on the main thread is printed and ends the process with the exit code the
 * spawner passes in CRASH_GUARD_EXIT_CODE (worker-env.ts), which it reports, so the test fails
 * instead of a retry on another worker hiding the crash. Plain JavaScript: Temporal's workflow
 * threads inherit the flag without tsx's loader (and are left alone).
 */
import process from 'node:process';
import { inspect } from 'node:util';
import { isMainThread } from 'node:worker_threads';

const exitCode = Number(process.env.CRASH_GUARD_EXIT_CODE);
if (isMainThread && exitCode) {
  for (const event of ['uncaughtException', 'unhandledRejection']) {
    process.on(event, (err) => {
      process.stderr.write(`[crash-guard] ${event} in worker process ${process.pid}: ${inspect(err)}\n`);
      process.exit(exitCode);
    });
  }
}
