import { CreateBucketCommand, GetObjectCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { Connection } from '@temporalio/client';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, inject, it } from 'vitest';
import { SEARCH_ATTRIBUTES, startTemporalDevServer } from '../../src/devservers';

describe('integration servers', () => {
  it('Temporal answers and has the custom search attributes', async () => {
    const connection = await Connection.connect({ address: inject('temporalAddress') });
    try {
      const info = await connection.workflowService.getSystemInfo({});
      expect(info.serverVersion).toMatch(/^\d+\.\d+/);
      const { customAttributes } = await connection.operatorService.listSearchAttributes({ namespace: 'default' });
      expect(Object.keys(customAttributes ?? {})).toEqual(expect.arrayContaining(Object.keys(SEARCH_ATTRIBUTES)));
    } finally {
      await connection.close();
    }
  });

  it("a dev server whose database file lies in a directory not made yet starts (the demo's ./data in a fresh clone)", async () => {
    const server = await startTemporalDevServer({
      uiPort: 'none',
      dbFilename: join(mkdtempSync(join(tmpdir(), 'devserver-')), 'data', 'temporal.db'),
    });
    try {
      const connection = await Connection.connect({ address: server.address });
      await connection.close();
    } finally {
      await server.stop();
    }
  });

  it.each(['minio', 'moto'] as const)('%s round-trips an object', async (name) => {
    const { endpoint, accessKey, secretKey, region } = inject(name);
    const s3 = new S3Client({
      endpoint,
      region,
      forcePathStyle: true,
      credentials: { accessKeyId: accessKey, secretAccessKey: secretKey },
    });
    try {
      const Bucket = `smoke-${Date.now()}`;
      await s3.send(new CreateBucketCommand({ Bucket }));
      await s3.send(new PutObjectCommand({ Bucket, Key: 'a/b.txt', Body: 'hello' }));
      const got = await s3.send(new GetObjectCommand({ Bucket, Key: 'a/b.txt' }));
      expect(await got.Body?.transformToString()).toBe('hello');
    } finally {
      s3.destroy();
    }
  });
});
