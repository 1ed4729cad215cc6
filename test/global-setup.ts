import type { TestProject } from 'vitest/node';
import { SEARCH_ATTRIBUTES, startMinio, startMoto, startSeaweedfs, startTemporalDevServer } from '../src/devservers';
import { extraStoreKinds } from './support/stores';

/**
 * Starts one Temporal dev server, one MinIO and one moto for the whole integration run; test files
 * share them and keep apart by unique buckets, prefixes and workflow ids. Servers that did start are
 * stopped again if another one fails, so a failed setup leaves nothing running.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const started = Date.now();
  const withSeaweedfs = extraStoreKinds().includes('seaweedfs');
  const results = await Promise.allSettled([
    startTemporalDevServer({ uiPort: 'none', searchAttributes: SEARCH_ATTRIBUTES }),
    startMinio(),
    startMoto(),
    ...(withSeaweedfs ? [startSeaweedfs()] : []),
  ]);
  const stopAll = async (): Promise<void> => {
    await Promise.all(results.map((r) => (r.status === 'fulfilled' ? r.value.stop() : undefined)));
  };
  const [temporal, minio, moto, seaweedfs] = results;
  if (
    temporal.status === 'rejected' ||
    minio.status === 'rejected' ||
    moto.status === 'rejected' ||
    seaweedfs?.status === 'rejected'
  ) {
    await stopAll();
    const reasons = results.flatMap((r) => (r.status === 'rejected' ? [r.reason] : []));
    throw new AggregateError(reasons, `integration servers failed to start:\n${reasons.map(String).join('\n\n')}`);
  }

  const s3 = ({ endpoint, accessKey, secretKey, region }: typeof minio.value) => ({
    endpoint,
    accessKey,
    secretKey,
    region,
  });
  project.provide('temporalAddress', temporal.value.address);
  project.provide('minio', s3(minio.value));
  project.provide('moto', s3(moto.value));
  project.provide('seaweedfs', seaweedfs?.status === 'fulfilled' ? s3(seaweedfs.value) : undefined);
  console.log(`integration servers ready in ${Date.now() - started} ms`);
  return stopAll;
}
