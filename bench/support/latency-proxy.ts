/**
 * A child process that holds every S3 request for a fixed time before forwarding it to MinIO: the
 * round trip of a store that is not on this machine. Run apart from the benchmark so its CPU is not
 * counted as the compactor's. Prints its endpoint on one line, then serves until killed.
 *
 *     npx tsx bench/support/latency-proxy.ts <target endpoint> <delay ms>
 */
import { startS3FaultProxy } from '../../test/support/s3-fault-proxy';

const [target, delayMs] = process.argv.slice(2);
void startS3FaultProxy(target!, { probabilities: { delay: 1 }, delayMs: Number(delayMs) }).then((proxy) =>
  console.log(proxy.endpoint),
);
