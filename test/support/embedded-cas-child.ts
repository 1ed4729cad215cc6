/**
 * Child process of the cross-process CAS test: waits for the start time, then tries one CAS and prints whether it won.
 */
import { createEmbeddedObjectStore } from '../../src/store';

const [path, key, etag, startAt] = process.argv.slice(2) as [string, string, string, string];
const store = createEmbeddedObjectStore({ path });
setTimeout(
  () => {
    store
      .putIfMatch(key, new TextEncoder().encode(`written by ${process.pid}`), etag)
      .then(
        () => 'won',
        (e: Error) => e.name,
      )
      .then(async (outcome) => {
        process.stdout.write(outcome);
        await store.close();
      }, console.error);
  },
  Math.max(0, Number(startAt) - Date.now()),
);
