/**
 * Integration setup: a test fails when a worker process it started died of an uncaught exception or
 * unhandled rejection. (In the test process itself vitest already fails the run on any unhandled
 * error, reporting it under "Unhandled Errors".)
 */
import { afterAll, afterEach } from 'vitest';
import { takeWorkerCrashes } from '../support/worker-env';

const failOnCrashes = () => {
  const crashes = takeWorkerCrashes();
  if (crashes.length > 0) throw new Error(crashes.join('\n'));
};
afterEach(failOnCrashes);
afterAll(failOnCrashes);
