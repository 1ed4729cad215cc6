/**
 * No credential value reaches a log or a Temporal history (docs/security.md). A compaction and two
 * collector passes (one clean, one failing on a corrupt lease) run against a MinIO of their own
 * whose credentials are random and come from the environment, as in production; every log line at
 * DEBUG (SDK, Core and console) and every event, search attribute and memo of those runs is then
 * searched for the credential values, and for the records' values (object contents).
 */
import { randomBytes } from 'node:crypto';
import { Client, Connection } from '@temporalio/client';
import { DefaultLogger, NativeConnection, Runtime, type LogEntry } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { startCompaction } from '../../src/client';
import { resolveSettings, shrunkTiming } from '../../src/config';
import { startMinio, type S3Server } from '../../src/devservers';
import { leaseKey, namespaceId, newJobId } from '../../src/keys';
import { updateRoot } from '../../src/protocol';
import { jsonRootCodec } from '../../src/root';
import { createS3ObjectStore, objectStoreFromEnv, type ObjectStore } from '../../src/store';
import { createWorker } from '../../src/worker';
import { makeInputs, writeInputs } from '../support/records';
import { createTestBucket } from '../support/stores';

const logged: string[] = [];
const capture = (entry: LogEntry) => logged.push(`${entry.level} ${entry.message} ${JSON.stringify(entry.meta ?? {})}`);
Runtime.install({
  logger: new DefaultLogger('DEBUG', capture),
  telemetryOptions: { logging: { filter: { core: 'DEBUG', other: 'DEBUG' }, forward: {} } },
});

const secret = (n: number) => randomBytes(n).toString('hex');
const credentials = { accessKey: `AK${secret(10).toUpperCase()}`, secretKey: `sk-${secret(20)}` };
/**
 * Bytes as text, so JSON payloads in a history are searched as what they say (a Buffer reaches the replacer through its
 * toJSON).
 */
const asText = (value: unknown) =>
  JSON.stringify(value, (key, v: unknown) => {
    if (v instanceof Uint8Array) return Buffer.from(v).toString('utf8');
    // A fetched history carries payload bytes as base64: search the decoded text beside the encoding.
    if (key === 'data' && typeof v === 'string') return `${v} ${Buffer.from(v, 'base64').toString('utf8')}`;
    const json = v as { type?: unknown; data?: unknown } | null;
    return json?.type === 'Buffer' && Array.isArray(json.data)
      ? Buffer.from(json.data as number[]).toString('utf8')
      : v;
  });

describe('credentials in logs and histories', () => {
  let minio: S3Server;
  let store: ObjectStore;
  let client: Client;
  let connection: Connection;
  let workerConnection: NativeConnection;
  let stopWorker: () => Promise<void>;
  const workflowIds: string[] = [];
  let recordValues: string[] = [];
  let wrongSecretError = '';
  const wrongSecret = `wrong-${secret(16)}`;
  const taskQueue = `secrets-${secret(4)}`;

  beforeAll(async () => {
    minio = await startMinio(credentials);
    const bucket = await createTestBucket(minio);
    Object.assign(process.env, {
      COMPACTION_S3_BUCKET: bucket,
      COMPACTION_S3_FORCE_PATH_STYLE: 'true',
      AWS_ENDPOINT_URL_S3: minio.endpoint,
      AWS_REGION: minio.region,
      AWS_ACCESS_KEY_ID: credentials.accessKey,
      AWS_SECRET_ACCESS_KEY: credentials.secretKey,
    });
    const settings = resolveSettings({
      timing: shrunkTiming(1000, 5000),
      targetSegmentBytes: 4096,
      heartbeatTimeoutMs: 5000,
      ownerId: 'secrets-test',
    });
    store = objectStoreFromEnv(process.env, settings.timing.operationDeadlineMs);
    workerConnection = await NativeConnection.connect({ address: inject('temporalAddress') });
    const worker = await createWorker({ store, settings, connection: workerConnection, taskQueue });
    const running = worker.run();
    stopWorker = async () => {
      worker.shutdown();
      await running;
    };
    connection = await Connection.connect({ address: inject('temporalAddress') });
    client = new Client({ connection });

    const ns = `secrets-${secret(4)}`;
    const inputs = makeInputs(3, 300);
    recordValues = inputs.flat().flatMap((r) => ('value' in r && r.value.length > 12 ? [r.value] : []));
    await writeInputs(store, ns, 'bindings', inputs);
    const compaction = await startCompaction(client, { namespaceId: ns, group: 'bindings', taskQueue });
    expect((await compaction.result()).outcome).toBe('published');
    workflowIds.push(compaction.workflowId);

    const cleanPass = `gc-${secret(4)}`;
    await client.workflow.execute('gcWorkflow', { taskQueue, workflowId: cleanPass, args: [{ namespaces: [ns] }] });
    workflowIds.push(cleanPass, `${cleanPass}/${ns}`);
    const corrupt = namespaceId(`corrupt-${secret(4)}`);
    // With a root, so the pass reads the corrupt lease (a namespace without one is skipped before its leases).
    await updateRoot(store, corrupt, (root) => root, { codec: jsonRootCodec });
    await store.put(leaseKey(corrupt, newJobId()), new TextEncoder().encode('not a lease'));
    const failingPass = `gc-${secret(4)}`;
    await client.workflow
      .execute('gcWorkflow', { taskQueue, workflowId: failingPass, args: [{ namespaces: [corrupt] }] })
      .catch(() => undefined);
    workflowIds.push(failingPass, `${failingPass}/${corrupt}`);

    const { S3Client } = await import('@aws-sdk/client-s3');
    const rejected = createS3ObjectStore({
      bucket,
      client: new S3Client({
        endpoint: minio.endpoint,
        region: minio.region,
        forcePathStyle: true,
        credentials: { accessKeyId: credentials.accessKey, secretAccessKey: wrongSecret },
      }),
    });
    wrongSecretError = await rejected.verifyAccess().then(
      () => 'no error',
      (err: unknown) =>
        `${String(err)} ${asText(err)} ${err instanceof Error ? String(err.cause) + (err.stack ?? '') : ''}`,
    );
    await rejected.close();
  }, 300_000);

  afterAll(async () => {
    await stopWorker?.();
    await workerConnection?.close();
    await connection?.close();
    await store?.close();
    await minio?.stop();
  });

  const histories = async (): Promise<string> => {
    const texts: string[] = [];
    for (const id of workflowIds) {
      const handle = client.workflow.getHandle(id);
      const description = await handle.describe();
      texts.push(
        asText(await handle.fetchHistory()),
        asText(description.typedSearchAttributes),
        asText(description.memo),
        asText(description.raw),
      );
    }
    return texts.join('\n');
  };

  it('the runs logged at DEBUG and recorded histories of five workflows', async () => {
    const text = await histories();
    console.log(
      `secrets: ${logged.length} log lines, ${workflowIds.length} workflows, ${text.length} characters of history searched`,
    );
    expect(logged.length).toBeGreaterThan(100);
    expect(text.length).toBeGreaterThan(10_000);
  });

  it('no log line holds the access key id or the secret key', () => {
    const leaks = logged.filter((line) => line.includes(credentials.accessKey) || line.includes(credentials.secretKey));
    expect(leaks).toEqual([]);
  });

  it('no history, search attribute or memo holds the access key id or the secret key', async () => {
    const text = await histories();
    expect(text.includes(credentials.accessKey)).toBe(false);
    expect(text.includes(credentials.secretKey)).toBe(false);
  });

  it('no history holds a record value of the segments compacted', async () => {
    const text = await histories();
    expect(recordValues.length).toBeGreaterThan(100);
    expect(recordValues.filter((v) => text.includes(v))).toEqual([]);
  });

  it('a rejected secret is named as a setting, never quoted', () => {
    expect(wrongSecretError).toMatch(/AWS_SECRET_ACCESS_KEY/);
    expect(wrongSecretError.includes(wrongSecret)).toBe(false);
    expect(wrongSecretError.includes(credentials.secretKey)).toBe(false);
  });
});
