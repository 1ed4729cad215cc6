/**
 * The rules a collector pass decides by, declared once: each step takes the part of them it uses
 * (`Pick`), so a rule has one name and one meaning from the workflow's input down to the store.
 */

/** Everything a pass decides by; fixed when the pass starts and carried in its input, never read from a worker. */
export interface PassRules {
  /** The pass's clock: every expiry and age decision of the pass uses it. */
  readonly nowMs: number;
  /** An `active` lease whose heartbeat is older than this at `nowMs` is expired. */
  readonly leaseExpiryMs: number;
  /** A staged segment younger than this at `nowMs` is retained: its job may still publish it. */
  readonly stagingGraceMs: number;
  /** A retired segment stays this long after its `retired_at_ms`, for readers of older roots (spec 6a). */
  readonly readerGraceMs: number;
  /**
   * An input segment the root neither names nor retires (a lost write) goes once its `LastModified` is this old (spec
   * 6a.4); longer than any writer's budget.
   */
  readonly lostWriteGraceMs: number;
  /**
   * Plan and report every claim and deletion, execute none: the executor runs the plan against a dry-run store
   * (src/store/dry-run).
   */
  readonly dryRun: boolean;
  /** Job prefixes per listing page; a run may continue as new between pages. */
  readonly prefixesPerPage: number;
  /** Job prefixes of a page claimed and reclaimed at once. */
  readonly prefixConcurrency: number;
  /** Staged candidates collected before the root is re-read and they are deleted. */
  readonly keysPerFlush: number;
  /** Bounds every list of a report. */
  readonly reportLimit: number;
  /**
   * The pass's id (`newPassId`): the `owner_id` of every lease it claims, so its claims are its own
   * (spec 6.2), and where its manifests go (`namespaces/{ns}/metadata/gc/{passId}/`).
   */
  readonly passId: string;
  /** `false`: the pass writes no deletion manifests (a benchmark's baseline); otherwise it does. */
  readonly manifests?: boolean;
  /**
   * How often a pass refreshes a claim while it walks the claimed prefix, as a job refreshes its
   * lease: a claim older than the lease expiry is another pass's to take over.
   */
  readonly leaseRefreshIntervalMs: number;
  /** A pass's manifests older than this at `nowMs` (by the clock in their pass id) are reclaimed; unset, none are. */
  readonly manifestRetentionMs?: number;
}

/** What an owner decision and a claim use. */
export type OwnerRules = Pick<PassRules, 'nowMs' | 'leaseExpiryMs' | 'passId'>;

/** What the walk of a claimed or orphaned job prefix uses. */
export type ReclaimOptions = Pick<
  PassRules,
  'nowMs' | 'stagingGraceMs' | 'readerGraceMs' | 'keysPerFlush' | 'reportLimit' | 'passId' | 'leaseRefreshIntervalMs'
>;

/** What the judgement of a retired segment uses (spec 6a). */
export type RetiredRules = Pick<PassRules, 'nowMs' | 'readerGraceMs' | 'lostWriteGraceMs'>;

/** What the reclaim of a namespace's retired segments uses. */
export type RetiredReclaimOptions = Pick<
  PassRules,
  'nowMs' | 'readerGraceMs' | 'lostWriteGraceMs' | 'keysPerFlush' | 'reportLimit'
>;
