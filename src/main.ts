/**
 * The README's run command, for now: the lease protocol on the embedded store (or S3 when
 * `COMPACTION_S3_BUCKET` is set) at shrunk timings: a job creates and refreshes its lease by
 * CAS, stops, the lease expires, a collector claims it, and the job's next refresh is fenced.
 */
import { hostname } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { shrunkTiming } from './config';
import { leaseKey, namespaceId, newJobId } from './keys';
import { claimLeaseState, createLeaseState, decodeLease, encodeLease, isLeaseLive, nextHeartbeatMs, refreshLeaseState } from './lease';
import { objectStoreFromEnv, PreconditionFailedError } from './store';

async function main(): Promise<void> {
  const timing = shrunkTiming(200);
  const store = objectStoreFromEnv(process.env, timing.operationDeadlineMs * 10);
  await store.verifyAccess();
  const ns = namespaceId('demo');
  const job = newJobId();
  const ids = { namespaceId: ns, jobId: job };
  const key = leaseKey(ns, job);
  console.log(`store ${store.description}; lease ${key}`);

  const startedAt = Date.now();
  const started = performance.now();
  let lease = createLeaseState({ jobId: job, namespaceId: ns, ownerId: `demo@${hostname()}`, nowMs: startedAt });
  let { etag } = await store.putIfAbsent(key, encodeLease(lease));
  console.log(`job created the lease: ${lease.status}, heartbeat ${lease.heartbeat_at_ms}`);
  for (let i = 0; i < 3; i++) {
    await sleep(timing.leaseRefreshIntervalMs);
    lease = refreshLeaseState(lease, nextHeartbeatMs(lease, startedAt + performance.now() - started));
    ({ etag } = await store.putIfMatch(key, encodeLease(lease), etag));
    console.log(`job refreshed by CAS: heartbeat ${lease.heartbeat_at_ms}, ETag ${etag}`);
  }

  console.log(`job stops refreshing; waiting ${timing.leaseExpiryMs} ms for the lease to expire`);
  await sleep(timing.leaseExpiryMs + 1);
  const read = await store.get(key);
  const seen = decodeLease(read.body, ids);
  const now = Date.now();
  console.log(`collector reads it: live at now? ${isLeaseLive(seen, now, timing.leaseExpiryMs)}`);
  await store.putIfMatch(key, encodeLease(claimLeaseState(seen)), read.etag);
  console.log(`collector claimed it: ${decodeLease((await store.get(key)).body, ids).status}`);

  const late = refreshLeaseState(lease, nextHeartbeatMs(lease, startedAt + performance.now() - started));
  try {
    await store.putIfMatch(key, encodeLease(late), etag);
    throw new Error('a refresh after the claim succeeded: the store is unfit');
  } catch (err) {
    if (!(err instanceof PreconditionFailedError)) throw err;
    console.log('job refresh after the claim: 412 Precondition Failed, the job is fenced and publishes nothing');
  }
  await store.deleteMany([key]);
  console.log('collector deleted the lease it claimed');
  await store.close();
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? `${err.name}: ${err.message}` : err);
  process.exit(1);
});
