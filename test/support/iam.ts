/**
 * MinIO users bound to the IAM policies of docs/security.md, so role tests run the very JSON an
 * operator copies: each policy is the fenced json block under its role's heading, with `BUCKET`
 * replaced by the test's bucket. Users are made through MinIO's admin API, signed with the root
 * credentials.
 */
import { createCipheriv, pbkdf2Sync, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Sha256 } from '@smithy/core/checksum';
import { SignatureV4 } from '@smithy/signature-v4';
import type { S3Endpoint } from '../../src/devservers';

export type Role = 'worker' | 'collector' | 'reader';

interface PolicyStatement {
  readonly Sid: string;
  readonly [field: string]: unknown;
}

export interface PolicyDocument {
  readonly Version: string;
  readonly Statement: readonly PolicyStatement[];
}

const SECURITY_DOC = join(__dirname, '..', '..', 'docs', 'security.md');

/**
 * Where each role's policy is in the document; the reader is the collector's statements the document names for the CLI.
 */
const HEADINGS = { worker: '### Compaction worker', collector: '### Collector (GC) worker' } as const;
const READER_STATEMENTS = ['HeadBucket', 'ListNamespacesAndJobPrefixes', 'ReadRootAndLeases', 'ReadManifests'];

/** The first json block after `heading` and before the next heading of docs/security.md, as written there. */
function policyUnder(heading: string): PolicyDocument {
  const doc = readFileSync(SECURITY_DOC, 'utf8');
  const start = doc.indexOf(`\n${heading}\n`);
  if (start < 0) throw new Error(`docs/security.md has no heading "${heading}"`);
  const section = doc.slice(start + heading.length + 2).split(/\n#{1,3} /)[0] ?? '';
  const block = /```json\n([\s\S]*?)\n```/.exec(section)?.[1];
  if (block === undefined) throw new Error(`docs/security.md has no json block under "${heading}"`);
  return JSON.parse(block) as PolicyDocument;
}

/** The role's policy exactly as docs/security.md shows it, `BUCKET` still in its ARNs. */
export function documentedPolicy(role: Role): PolicyDocument {
  if (role !== 'reader') return policyUnder(HEADINGS[role]);
  const collector = policyUnder(HEADINGS.collector);
  const Statement = collector.Statement.filter((s) => READER_STATEMENTS.includes(s.Sid));
  if (Statement.length !== READER_STATEMENTS.length) {
    throw new Error(
      `the collector's policy in docs/security.md lacks one of the statements the CLI needs: ${READER_STATEMENTS.join(', ')}`,
    );
  }
  return { ...collector, Statement };
}

/**
 * madmin's `EncryptData` in its PBKDF2-SHA256 / AES-256-GCM variant, which every MinIO decrypts:
 * salt(32) | 0x02 | nonce(8) | one sio-go fragment. sio-go seals the (empty) associated data under
 * sequence number 0, and the final fragment under the next one with the flag 0x80 before that tag.
 */
function encryptForAdmin(rootSecret: string, plaintext: string): Buffer {
  const data = Buffer.from(plaintext);
  if (data.length > 1 << 14) throw new Error('one sio fragment holds at most 16 KiB');
  const salt = randomBytes(32);
  const nonce = randomBytes(8);
  const key = pbkdf2Sync(rootSecret, salt, 8192, 32, 'sha256');
  const seal = (sequence: number, message: Buffer, associated: Buffer): Buffer => {
    const iv = Buffer.alloc(12);
    nonce.copy(iv);
    iv.writeUInt32LE(sequence, 8);
    const cipher = createCipheriv('aes-256-gcm', key, iv).setAAD(associated);
    return Buffer.concat([cipher.update(message), cipher.final(), cipher.getAuthTag()]);
  };
  const finalAssociated = Buffer.concat([Buffer.from([0x80]), seal(0, Buffer.alloc(0), Buffer.alloc(0))]);
  return Buffer.concat([salt, Buffer.from([0x02]), nonce, seal(1, data, finalAssociated)]);
}

/** One PUT to MinIO's admin API (`/minio/admin/v3/{operation}`), signed with the root credentials. */
async function adminPut(
  root: S3Endpoint,
  operation: string,
  query: Record<string, string>,
  body: string | Buffer,
): Promise<void> {
  const url = new URL(root.endpoint);
  const signer = new SignatureV4({
    service: 's3',
    region: root.region,
    sha256: Sha256,
    credentials: { accessKeyId: root.accessKey, secretAccessKey: root.secretKey },
  });
  const path = `/minio/admin/v3/${operation}`;
  const signed = await signer.sign({
    method: 'PUT',
    protocol: url.protocol,
    hostname: url.hostname,
    port: Number(url.port),
    path,
    query,
    headers: { host: url.host },
    body,
  });
  const response = await fetch(`${url.origin}${path}?${new URLSearchParams(query)}`, {
    method: 'PUT',
    headers: signed.headers,
    body,
  });
  if (!response.ok) throw new Error(`MinIO admin ${operation} failed: ${response.status} ${await response.text()}`);
}

/**
 * A new MinIO user whose only policy is the role's from docs/security.md for `bucket`; returns its endpoint and
 * credentials.
 */
export async function createRoleUser(root: S3Endpoint, bucket: string, role: Role): Promise<S3Endpoint> {
  const policy = JSON.stringify(documentedPolicy(role)).replace(
    /arn:aws:s3:::BUCKET(?=[/"])/g,
    `arn:aws:s3:::${bucket}`,
  );
  const accessKey = `${role}-${randomBytes(4).toString('hex')}`;
  const secretKey = randomBytes(20).toString('hex');
  await adminPut(root, 'add-canned-policy', { name: accessKey }, policy);
  await adminPut(
    root,
    'add-user',
    { accessKey },
    encryptForAdmin(root.secretKey, JSON.stringify({ secretKey, status: 'enabled' })),
  );
  await adminPut(
    root,
    'set-user-or-group-policy',
    { policyName: accessKey, userOrGroup: accessKey, isGroup: 'false' },
    '',
  );
  return { ...root, accessKey, secretKey };
}
