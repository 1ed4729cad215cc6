/**
 * The store probe (`verifyStore`) against the real servers: every property holds on MinIO, moto and
 * the embedded store; a store that takes `If-Match` / `If-None-Match` and ignores them (Google Cloud
 * Storage's XML API, Garage; here MinIO behind a proxy that strips them) is refused, and no worker
 * starts on it.
 */
import { PutBucketVersioningCommand, S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import { STORE_PROBE_PREFIX } from '../../src/keys';
import {
  createS3ObjectStore,
  STORE_PROPERTIES,
  StoreUnfitError,
  verifyStore,
  type ConditionalDelete,
  type ObjectStore,
  type StoreCheck,
} from '../../src/store';
import { startS3FaultProxy, type S3FaultProxy } from '../support/s3-fault-proxy';
import {
  createTestBucket,
  openTestStore,
  s3ClientConfig,
  STORE_KINDS,
  type StoreKind,
  type TestStore,
} from '../support/stores';
import { startTestWorker, testSettings } from '../support/temporal';

const settings = testSettings(2000);
const probe = (store: ObjectStore) => verifyStore(store, { clockSafetyMarginMs: settings.timing.clockSafetyMarginMs });
/** The measured rows of docs/stores.md (scripts/check-stores.sh prints SeaweedFS's). */
const printCheck = (label: string, check: StoreCheck) =>
  console.log(
    `store probe on ${label}: ${check.durationMs} ms, versioning ${check.versioning}, conditional delete ${check.conditionalDelete}\n${check.properties.map((p) => `  ${p.property}: ${p.outcome} (${p.detail})`).join('\n')}`,
  );
/**
 * What each store does with a conditional delete of a stale ETag, as measured (docs/stores.md); SeaweedFS's is printed,
 * not asserted.
 */
const CONDITIONAL_DELETE: Partial<Record<StoreKind, ConditionalDelete>> = {
  minio: 'ignored',
  moto: 'honoured',
  embedded: 'honoured',
};
const failedProperties = (check: StoreCheck) =>
  check.properties.filter((p) => p.outcome === 'failed').map((p) => p.property);

describe.each(STORE_KINDS)('the store probe on %s', (kind) => {
  let fixture: TestStore;
  beforeAll(async () => {
    fixture = await openTestStore(kind);
  });
  afterAll(async () => fixture?.store.close());

  it('every property holds, and the probe leaves nothing under its prefix', async () => {
    const check = await probe(fixture.store);
    printCheck(kind, check);
    expect(check.properties.map((p) => [p.property, p.outcome])).toEqual(
      Object.keys(STORE_PROPERTIES).map((id) => [id, 'held']),
    );
    expect(check).toMatchObject({ fit: true, versioning: 'unversioned' });
    expect((await fixture.store.list({ prefix: STORE_PROBE_PREFIX })).objects).toEqual([]);
  });

  it.skipIf(CONDITIONAL_DELETE[kind] === undefined)(
    `reports whether a conditional delete of a stale ETag is refused: ${CONDITIONAL_DELETE[kind]}`,
    async () => {
      expect((await probe(fixture.store)).conditionalDelete).toBe(CONDITIONAL_DELETE[kind]);
    },
  );

  it.skipIf(kind === 'embedded')(
    'reports a bucket with versioning enabled, whose deletions leave noncurrent versions',
    async () => {
      const client = new S3Client(s3ClientConfig(fixture.endpoint!));
      const bucket = await createTestBucket(fixture.endpoint!);
      await client.send(
        new PutBucketVersioningCommand({ Bucket: bucket, VersioningConfiguration: { Status: 'Enabled' } }),
      );
      const versioned = createS3ObjectStore({ bucket, client, operationDeadlineMs: 30_000 });
      const check = await probe(versioned);
      expect(check).toMatchObject({ fit: true, versioning: 'enabled' });
      await versioned.close();
    },
  );
});

describe('a store that ignores conditional writes (MinIO behind a proxy that strips If-Match and If-None-Match)', () => {
  let direct: TestStore;
  let proxy: S3FaultProxy;
  let stripped: ObjectStore;
  beforeAll(async () => {
    direct = await openTestStore('minio');
    const minio = inject('minio');
    proxy = await startS3FaultProxy(minio.endpoint, {}, { stripConditionsSignedAs: minio });
    stripped = createS3ObjectStore({
      bucket: direct.bucket!,
      client: new S3Client(s3ClientConfig({ ...minio, endpoint: proxy.endpoint })),
      operationDeadlineMs: 30_000,
    });
  });
  afterAll(async () => {
    await stripped?.close();
    await proxy?.stop();
    await direct?.store.close();
  });

  it('fails the create race (every writer wins), the stale and the missing If-Match', async () => {
    const check = await probe(stripped);
    printCheck('MinIO behind the condition-stripping proxy', check);
    expect(check.fit).toBe(false);
    expect(failedProperties(check)).toEqual(['create-race', 'stale-if-match', 'if-match-missing']);
    expect(check.properties[0]?.detail).toBe('16 of 16 writers were told they created the key');
    expect((await direct.store.list({ prefix: STORE_PROBE_PREFIX })).objects).toEqual([]);
  });

  it('a worker refuses to start on it, naming the property and the store', async () => {
    const started = startTestWorker(stripped, settings, undefined, undefined, { storeCheck: 'run' });
    await expect(started).rejects.toBeInstanceOf(StoreUnfitError);
    await expect(started).rejects.toThrow(
      new RegExp(
        `^store s3://${direct.bucket} failed the store check: create-race \\(a put-if-absent race of 16 writers has exactly one winner\\)`,
      ),
    );
  });

  it('the same worker starts on the proxy when it only forwards, so the refusal is the store check', async () => {
    const honest = await startS3FaultProxy(inject('minio').endpoint);
    const through = createS3ObjectStore({
      bucket: direct.bucket!,
      client: new S3Client(s3ClientConfig({ ...inject('minio'), endpoint: honest.endpoint })),
      operationDeadlineMs: 30_000,
    });
    try {
      const worker = await startTestWorker(through, settings, undefined, undefined, { storeCheck: 'run' });
      await worker.stop();
    } finally {
      await through.close();
      await honest.stop();
    }
  });
});
