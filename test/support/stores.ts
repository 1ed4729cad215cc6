/** Store fixtures for integration tests: a fresh bucket (or database file) per call, on the real servers. */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CreateBucketCommand, S3Client, type S3ClientConfig } from '@aws-sdk/client-s3';
import { inject } from 'vitest';
import type { S3Endpoint } from '../../src/devservers';
import { createEmbeddedObjectStore, createS3ObjectStore, type ObjectStore } from '../../src/store';

export type StoreKind = 'minio' | 'moto' | 'embedded' | 'seaweedfs';
/**
 * The stores every run covers, and SeaweedFS when `COMPACTION_TEST_STORES=seaweedfs` asks for it
 * (scripts/check-stores.sh; its binary takes a long build, so the normal suite does without it).
 */
export const STORE_KINDS: readonly StoreKind[] = ['minio', 'moto', 'embedded', ...extraStoreKinds()];

export function extraStoreKinds(env: NodeJS.ProcessEnv = process.env): StoreKind[] {
  return (env.COMPACTION_TEST_STORES ?? '').split(',').includes('seaweedfs') ? ['seaweedfs'] : [];
}

let counter = 0;
const uniqueName = (kind: string) => `${kind}-${process.pid}-${Date.now().toString(36)}-${counter++}`;

export function s3ClientConfig(endpoint: S3Endpoint): S3ClientConfig {
  return {
    endpoint: endpoint.endpoint,
    region: endpoint.region,
    forcePathStyle: true,
    credentials: { accessKeyId: endpoint.accessKey, secretAccessKey: endpoint.secretKey },
  };
}

/** A new empty bucket on the named server; only tests create buckets. */
export async function createTestBucket(endpoint: S3Endpoint): Promise<string> {
  const bucket = uniqueName('test').toLowerCase();
  const client = new S3Client(s3ClientConfig(endpoint));
  await client.send(new CreateBucketCommand({ Bucket: bucket }));
  client.destroy();
  return bucket;
}

export interface TestStore {
  readonly kind: StoreKind;
  readonly store: ObjectStore;
  /** S3 servers: how to reach them (to build a second client, e.g. with faults). */
  readonly endpoint?: S3Endpoint;
  readonly bucket?: string;
  /** Embedded store: the database file another process can open. */
  readonly path?: string;
}

export async function openTestStore(kind: StoreKind, options: { client?: S3Client } = {}): Promise<TestStore> {
  if (kind === 'embedded') {
    const path = join(mkdtempSync(join(tmpdir(), 'compaction-lease-')), 'store.sqlite');
    return { kind, store: createEmbeddedObjectStore({ path }), path };
  }
  const endpoint = kind === 'seaweedfs' ? inject('seaweedfs') : inject(kind);
  if (!endpoint)
    throw new Error(`no ${kind} server: the global setup starts it only with COMPACTION_TEST_STORES=${kind}`);
  const bucket = await createTestBucket(endpoint);
  const client = options.client ?? new S3Client(s3ClientConfig(endpoint));
  return { kind, endpoint, bucket, store: createS3ObjectStore({ bucket, client, operationDeadlineMs: 30_000 }) };
}
