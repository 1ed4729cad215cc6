/**
 * `npm run build`'s second step: the workflows of the build (lib/workflows) bundled into lib/, where a worker started
 * from the build loads them instead of running webpack itself (src/worker/bundle.ts).
 */
import { join } from 'node:path';
import { DefaultLogger } from '@temporalio/worker';
import { writeWorkflowBundle } from '../src/worker/bundle';

const lib = join(__dirname, '..', 'lib');
writeWorkflowBundle(lib, join(lib, 'workflows'), new DefaultLogger('WARN'))
  .then((path) => console.log(`workflow bundle: ${path}`))
  .catch((err: unknown) => {
    console.error(err);
    process.exitCode = 1;
  });
