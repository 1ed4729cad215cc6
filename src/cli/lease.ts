/**
 * `lease show`, `lease list` and `lease delete`: what the store says about job prefixes, judged at now with the
 * configured expiry; removing a corrupt lease.
 */
import { Option, type Command } from 'commander';
import { firstLineOf } from '../errors';
import {
  jobId,
  jobPrefix,
  leaseKey,
  namespaceId,
  parseCompactionKey,
  type MetadataCompactionId,
  type NamespaceId,
} from '../keys';
import { decideOwner, MAX_LEASE_BYTES, type LeaseState } from '../lease';
import { leaseReadOf, readLease, readRootIfAny, type LeaseRead } from '../protocol';
import { referencedKeys, type RootState } from '../root';
import { listJobPrefixes, listNamespaces } from '../collector/listing';
import { inBatches } from '../store/batches';
import { NotFoundError, ObjectTooLargeError, type ObjectStore } from '../store';
import type { CliContext } from './context';
import { CliError, ExitCode } from './exit-codes';
import { isoTime, jsonArrayWriter, printFields, printJson, tableWriter } from './output';

/**
 * A prefix's state at one clock: `published` when the namespace root names segments under it (the
 * job published them: they stay while the root names them, whatever its lease), otherwise its
 * lease's: `active` is live (the job runs, or ended less than an expiry ago without publishing),
 * `expired` an active lease past its expiry, `reaping` claimed by the collector (a job that still
 * ran is fenced), `corrupt` undecodable, `orphaned` no lease: what is under it goes to the collector.
 */
export const PREFIX_STATUSES = ['active', 'expired', 'reaping', 'corrupt', 'orphaned', 'published'] as const;
export type PrefixStatus = (typeof PREFIX_STATUSES)[number];
/** What the lease alone says, the collector's own decision. */
export type LeaseStatusName = Exclude<PrefixStatus, 'published'>;

/**
 * The collector's own decision (src/lease), named for an operator: the CLI never judges expiry by a rule of its own.
 */
export function prefixStatus(
  read: Parameters<typeof decideOwner>[0],
  nowMs: number,
  leaseExpiryMs: number,
): LeaseStatusName {
  if ('lease' in read && read.lease.status === 'reaping') return 'reaping';
  // Judged as no pass: a `reaping` lease is some pass's claim, told apart above.
  const owner = decideOwner(read, nowMs, leaseExpiryMs, '').owner;
  return (
    {
      none: 'orphaned',
      corrupt: 'corrupt',
      collector: 'reaping',
      another_pass: 'reaping',
      job: 'active',
      expired: 'expired',
    } as const
  )[owner];
}

/**
 * How many segments under each job's prefix the root names: in its groups (current) or in its retired list (retired,
 * kept for readers).
 */
export function publishedByJob(root: RootState): Map<MetadataCompactionId, { current: number; retired: number }> {
  const byJob = new Map<MetadataCompactionId, { current: number; retired: number }>();
  const count = (key: string, kind: 'current' | 'retired') => {
    const parsed = parseCompactionKey(key);
    if (parsed.kind !== 'staged_segment') return;
    const counts = byJob.get(parsed.jobId) ?? { current: 0, retired: 0 };
    counts[kind] += 1;
    byJob.set(parsed.jobId, counts);
  };
  for (const key of referencedKeys(root)) count(key, 'current');
  for (const { key } of root.retired ?? []) count(key, 'retired');
  return byJob;
}

/**
 * A lease's status, unless the root names the job's segments: `published` then, a corrupt lease excepted (it needs an
 * operator either way).
 */
const withPublication = (lease: LeaseStatusName, published: boolean): PrefixStatus =>
  published && lease !== 'corrupt' ? 'published' : lease;

/**
 * The namespace's root as the configured codec reads it, undefined when there is none; when it cannot
 * be read, undefined too, and one line on stderr says that published jobs are not told apart there.
 */
async function rootForStatus(ctx: CliContext, store: ObjectStore, ns: NamespaceId): Promise<RootState | undefined> {
  try {
    return (await readRootIfAny(store, ns, await ctx.rootCodec()))?.root;
  } catch (err) {
    ctx.out.error(
      `the root of namespace ${ns} cannot be read (${firstLineOf(err)}): statuses there are the leases' alone, a published job's among them`,
    );
    return undefined;
  }
}

/** Listing pages of namespaces and job prefixes, and lease reads in flight at once. */
const PAGE_SIZE = 100;
const READ_CONCURRENCY = 16;

async function objectsUnder(store: ObjectStore, prefix: string): Promise<{ count: number; bytes: number }> {
  let count = 0;
  let bytes = 0;
  let cursor: string | undefined;
  do {
    const page = await store.list({ prefix, cursor });
    count += page.objects.length;
    bytes += page.objects.reduce((n, o) => n + o.size, 0);
    cursor = page.nextCursor;
  } while (cursor);
  return { count, bytes };
}

const leaseFields = (lease: LeaseState | undefined) =>
  lease && { ownerId: lease.owner_id, startedAtMs: lease.started_at_ms, heartbeatAtMs: lease.heartbeat_at_ms };

async function showLease(
  ctx: CliContext,
  nsArg: string,
  jobArg: string,
  options: { json?: boolean; raw?: boolean },
): Promise<void> {
  const ns = namespaceId(nsArg);
  const job = jobId(jobArg);
  if (options.raw) return showRawLease(ctx, ns, job, options);
  const { leaseExpiryMs } = ctx.settings().timing;
  const store = await ctx.store();
  const read = await readLease(store, { namespaceId: ns, jobId: job });
  const prefix = jobPrefix(ns, job);
  const objects = await objectsUnder(store, prefix);
  const key = leaseKey(ns, job);
  const root = objects.count ? await rootForStatus(ctx, store, ns) : undefined;
  const published = (root && publishedByJob(root).get(job)) ?? { current: 0, retired: 0 };
  const named = published.current + published.retired;
  // What stays and what goes: the segments the root names stay while it names them (retired ones for the reader grace);
  // the collector takes the rest.
  const fate =
    named === 0
      ? `the collector reclaims them once no live lease owns them`
      : `${named} of them named by the namespace root (${published.current} current, ${published.retired} retired and kept for readers): ` +
        `they stay while it names them; the collector reclaims the other ${objects.count - named} once no live lease owns them`;
  if ('missing' in read) {
    const left = objects.count
      ? `${objects.count} objects (${objects.bytes} bytes) remain under ${prefix}, ${fate}`
      : 'nothing is stored under its prefix';
    throw new CliError(
      ExitCode.notFound,
      `no lease at ${key}; ${left}. List the namespace's jobs with \`compaction-lease lease list --namespace ${ns}\``,
    );
  }
  const nowMs = ctx.nowMs();
  const leaseStatus = prefixStatus(read, nowMs, leaseExpiryMs);
  const status = withPublication(leaseStatus, named > 0);
  const lease = 'lease' in read ? read.lease : undefined;
  const expiresAtMs = lease?.status === 'active' ? lease.heartbeat_at_ms + leaseExpiryMs : undefined;
  if (options.json) {
    printJson(ctx.out, {
      namespaceId: ns,
      jobId: job,
      key,
      status,
      leaseStatus,
      live: leaseStatus === 'active',
      nowMs,
      leaseExpiryMs,
      expiresAtMs,
      lease: lease ?? null,
      corrupt: 'corrupt' in read ? read.corrupt : undefined,
      objects,
      published,
    });
    return;
  }
  printFields(ctx.out, [
    ['lease', key],
    [
      'status',
      `${status}${status === 'published' ? `, lease ${leaseStatus}` : ''}${leaseStatus === 'active' ? ' (live)' : ''} at ${isoTime(nowMs)}`,
    ],
    ...(lease
      ? ([
          ['owner', lease.owner_id],
          ['started', isoTime(lease.started_at_ms)],
          ['heartbeat', isoTime(lease.heartbeat_at_ms)],
          [
            'expires',
            expiresAtMs === undefined
              ? 'never (claimed by the collector)'
              : `${isoTime(expiresAtMs)} (expiry ${leaseExpiryMs} ms)`,
          ],
        ] as const)
      : []),
    ...('corrupt' in read ? ([['corrupt', read.corrupt]] as const) : []),
    ['objects', `${objects.count} under ${prefix}, ${objects.bytes} bytes${objects.count ? `: ${fate}` : ''}`],
  ]);
}

/**
 * The lease object as stored, for a lease too damaged to decode: its bytes verbatim, with the ETag `lease delete` asks
 * for.
 */
async function showRawLease(
  ctx: CliContext,
  ns: NamespaceId,
  job: MetadataCompactionId,
  options: { json?: boolean },
): Promise<void> {
  const key = leaseKey(ns, job);
  const object = await rawLease(await ctx.store(), key, ns);
  const body = new TextDecoder().decode(object.body);
  const fields = {
    key,
    etag: object.etag,
    lastModified: object.lastModified?.toISOString(),
    size: object.body.byteLength,
  };
  if (options.json) printJson(ctx.out, { ...fields, body });
  else {
    printFields(ctx.out, [
      ['lease', key],
      ['etag', object.etag],
      ['modified', fields.lastModified ?? '-'],
      ['size', `${fields.size} bytes`],
    ]);
    ctx.out.line(body);
  }
}

/** One GET of the lease object, bytes and ETag together; a missing one is exit 3. */
async function rawLease(store: ObjectStore, key: string, ns: NamespaceId) {
  try {
    return await store.get(key, { maxBytes: MAX_LEASE_BYTES });
  } catch (err) {
    if (err instanceof NotFoundError)
      throw new CliError(
        ExitCode.notFound,
        `no lease at ${key}. List the namespace's jobs with \`compaction-lease lease list --namespace ${ns}\``,
      );
    if (err instanceof ObjectTooLargeError)
      throw new CliError(ExitCode.failed, `${err.message}: read it with the store's own tools`);
    throw err;
  }
}

/**
 * Deletes a corrupt lease, and nothing else: a valid lease is the collector's to claim and a live
 * one is never removed by hand. `etag` must be the one `lease show --raw` printed, so only the bytes
 * the operator read are deleted. No job or collector ever writes over a corrupt lease (their CAS
 * needs a lease they could decode), so between that check and the delete only a person could change it.
 */
async function deleteCorruptLease(
  ctx: CliContext,
  nsArg: string,
  jobArg: string,
  options: { etag: string },
): Promise<void> {
  const ns = namespaceId(nsArg);
  const job = jobId(jobArg);
  const key = leaseKey(ns, job);
  const store = await ctx.store();
  const object = await rawLease(store, key, ns);
  if (object.etag !== options.etag) {
    throw new CliError(
      ExitCode.failed,
      `lease ${key} has ETag ${object.etag}, not ${options.etag}: it changed since it was read; read it again with \`compaction-lease lease show ${ns} ${job} --raw\``,
    );
  }
  const status = prefixStatus(
    leaseReadOf(object, { namespaceId: ns, jobId: job }),
    ctx.nowMs(),
    ctx.settings().timing.leaseExpiryMs,
  );
  if (status !== 'corrupt') {
    throw new CliError(
      ExitCode.usage,
      `lease ${key} is ${status}, not corrupt: \`lease delete\` removes only corrupt leases; the collector claims expired ones and a live one belongs to its job`,
    );
  }
  const { failed } = await store.deleteMany([key]);
  if (failed.length)
    throw new CliError(
      ExitCode.failed,
      `deleting ${key} failed (${failed.map((f) => `${f.code}: ${f.message}`).join('; ')}): retry`,
    );
  ctx.out.line(
    `deleted corrupt lease ${key}; what is under ${jobPrefix(ns, job)} is now orphaned and the collector reclaims it after the staging grace`,
  );
  ctx.out.line(`then: compaction-lease gc schedule unpause --note "deleted corrupt lease ${key}"`);
}

interface LeaseRow {
  readonly namespaceId: NamespaceId;
  readonly jobId: MetadataCompactionId;
  readonly status: PrefixStatus;
  /** What the lease alone says (see {@link PREFIX_STATUSES}). */
  readonly leaseStatus: LeaseStatusName;
  readonly ownerId?: string;
  readonly startedAtMs?: number;
  readonly heartbeatAtMs?: number;
  readonly corrupt?: string;
}

/** Every job prefix of the namespaces, page by page: at most one page of rows is held at a time. */
async function* leaseRows(
  ctx: CliContext,
  store: ObjectStore,
  only: NamespaceId | undefined,
): AsyncGenerator<LeaseRow[]> {
  const { leaseExpiryMs } = ctx.settings().timing;
  const nowMs = ctx.nowMs();
  let afterNs: string | undefined;
  do {
    const namespaces = only ? { found: [only], next: undefined } : await listNamespaces(store, afterNs, PAGE_SIZE);
    for (const ns of namespaces.found) {
      let after: string | undefined;
      let published: Map<MetadataCompactionId, unknown> | undefined;
      do {
        const page = await listJobPrefixes(store, ns, after, PAGE_SIZE);
        // Read once per namespace, and only for one with job prefixes.
        if (page.found.length)
          published ??= await rootForStatus(ctx, store, ns).then((root) => (root ? publishedByJob(root) : new Map()));
        const reads = await inBatches(page.found, 1, READ_CONCURRENCY, ([job]) =>
          readLease(store, { namespaceId: ns, jobId: job as MetadataCompactionId }),
        );
        yield page.found.map((job, i) => {
          const read = reads[i] as LeaseRead;
          const leaseStatus = prefixStatus(read, nowMs, leaseExpiryMs);
          return {
            namespaceId: ns,
            jobId: job,
            status: withPublication(leaseStatus, published?.has(job) === true),
            leaseStatus,
            ...leaseFields('lease' in read ? read.lease : undefined),
            ...('corrupt' in read ? { corrupt: read.corrupt } : {}),
          };
        });
        after = page.next;
      } while (after !== undefined);
    }
    afterNs = namespaces.next;
  } while (afterNs !== undefined);
}

async function listLeases(
  ctx: CliContext,
  options: { namespace?: string; status?: PrefixStatus; json?: boolean },
): Promise<void> {
  const only = options.namespace === undefined ? undefined : namespaceId(options.namespace);
  const store = await ctx.store();
  const json = jsonArrayWriter(ctx.out);
  // Job ids, statuses and times have one width; the owner, of any width, goes last.
  const table = tableWriter(ctx.out, ['namespace', 'job', 'status', 'heartbeat', 'owner']);
  let shown = 0;
  for await (const page of leaseRows(ctx, store, only)) {
    const rows = page.filter((r) => !options.status || r.status === options.status);
    if (options.json) rows.forEach((r) => json.item(r));
    else if (rows.length) {
      table.rows(
        rows.map((r) => ({
          namespace: r.namespaceId,
          job: r.jobId,
          status: r.status,
          heartbeat: isoTime(r.heartbeatAtMs),
          owner: r.ownerId ?? '-',
        })),
      );
    }
    shown += rows.length;
  }
  if (options.json) json.end();
  else if (shown === 0)
    ctx.out.line(
      `no ${options.status ?? ''}${options.status ? ' ' : ''}job prefixes${only ? ` in namespace ${only}` : ''}`,
    );
}

export function addLeaseCommands(program: Command, ctx: CliContext): void {
  const lease = program
    .command('lease')
    .description('read job leases and what lies under their prefixes; delete a corrupt one');
  lease
    .command('show')
    .description(
      'the decoded lease of one job, live or expired at now with the configured expiry, the objects under its prefix and which of them the namespace root names (published)',
    )
    .argument('<namespace>', 'namespace id')
    .argument('<job>', 'job id (cmp_ + 32 hex digits)')
    .option('--raw', 'the stored bytes as they are, with their ETag (for a corrupt lease)')
    .option('--json', 'machine-readable output')
    .action((ns: string, job: string, options: { json?: boolean; raw?: boolean }) => showLease(ctx, ns, job, options));
  lease
    .command('delete')
    .description(
      'delete a corrupt lease (only a corrupt one, and only the bytes you read): its prefix becomes orphans the collector reclaims',
    )
    .argument('<namespace>', 'namespace id')
    .argument('<job>', 'job id (cmp_ + 32 hex digits)')
    .requiredOption('--etag <etag>', 'the ETag `lease show --raw` printed')
    .action((ns: string, job: string, options: { etag: string }) => deleteCorruptLease(ctx, ns, job, options));
  lease
    .command('list')
    .description(
      "every job prefix with its status (published, or its lease's: active, expired, reaping, corrupt, orphaned), read page by page",
    )
    .option('--namespace <namespace>', 'only this namespace')
    .addOption(new Option('--status <status>', 'only prefixes in this state').choices(PREFIX_STATUSES))
    .option('--json', 'machine-readable output: a JSON array, one element per prefix')
    .action((options: { namespace?: string; status?: PrefixStatus; json?: boolean }) => listLeases(ctx, options));
}
