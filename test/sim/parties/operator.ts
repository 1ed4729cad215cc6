/**
 * An operator's hand on the bucket, outside every protocol: a root deleted (a mistake, a bad
 * restore, a lifecycle rule) and put back from the copy taken before; a root or a lease overwritten
 * with bytes that do not decode; the lease of a job that looks stuck deleted; foreign objects under
 * the namespace. Each acts directly on the bucket (no request, no fault). When faults heal the
 * operator repairs what is still broken.
 */
import {
  compactionsPrefix,
  inputSegmentsPrefix,
  parseCompactionKey,
  rootKey,
  type MetadataCompactionId,
} from '../../../src/keys';
import { decodeLease } from '../../../src/lease';
import type { Env } from '../env';
import type { Party } from '../sim';
import { shortKey } from '../trace';

export type OperatorAct =
  | { readonly kind: 'delete root'; readonly restoreAfterMs: number | undefined }
  | { readonly kind: 'corrupt root'; readonly restoreAfterMs: number | undefined }
  | { readonly kind: 'corrupt a lease' }
  /**
   * The lease of a job that looks stuck (active, its heartbeat older than two refresh intervals)
   * deleted by hand, as an operator unblocking a group would: its job may still be live, its
   * publication in flight. Looked for again every refresh interval until one is found or faults heal.
   */
  | { readonly kind: 'delete a stuck lease' }
  | { readonly kind: 'foreign objects' };

export interface OperatorPlan {
  readonly acts: readonly { readonly afterMs: number; readonly act: OperatorAct }[];
}

const CORRUPT = new TextEncoder().encode(
  '{"kind":"compaction_lease","format_version":1,"payload_checksum":"sha256:00","payload":{}}',
);

/** The keys the operator put that no collector may ever delete. */
export const foreignKeys = (env: Env): string[] => [
  `${inputSegmentsPrefix(env.ns)}notes.txt`,
  `${inputSegmentsPrefix(env.ns)}seg_not-a-segment.mseg`,
  `${compactionsPrefix(env.ns)}README`,
];

export class Operator {
  /** The root as it was before the operator broke it: what a restore puts back. */
  private backup: Uint8Array | undefined;

  constructor(
    private readonly env: Env,
    private readonly party: Party,
  ) {}

  async run(plan: OperatorPlan): Promise<void> {
    let at = 0;
    for (const { afterMs, act } of [...plan.acts].sort((a, b) => a.afterMs - b.afterMs)) {
      await this.party.sleep(afterMs - at);
      at = afterMs;
      this.act(act);
    }
  }

  private act(act: OperatorAct): void {
    const { sim, ns } = this.env;
    const world = sim.world;
    const root = rootKey(ns);
    sim.count(`operator: ${act.kind}`);
    switch (act.kind) {
      case 'delete root':
      case 'corrupt root': {
        const current = world.peek(root);
        if (!current) return;
        // The last root that decoded is the one to put back: a root already broken is no backup.
        if (this.env.invariants.root !== undefined) this.backup = current.body;
        this.party.log(act.kind);
        sim.operate(() =>
          act.kind === 'delete root'
            ? world.deleteMany([root])
            : world.put(root, new TextEncoder().encode('{"kind":"metadata_root"')),
        );
        if (act.restoreAfterMs !== undefined) sim.scheduler.at(sim.now + act.restoreAfterMs, () => this.restoreRoot());
        return;
      }
      case 'corrupt a lease': {
        const lease = world.keys().find((k) => parseCompactionKey(k).kind === 'lease');
        if (!lease) return;
        this.party.log(`corrupts ${shortKey(lease)}`);
        sim.operate(() => world.put(lease, CORRUPT));
        return;
      }
      case 'delete a stuck lease':
        this.deleteStuckLease();
        return;
      case 'foreign objects':
        this.party.log('puts foreign objects');
        for (const key of foreignKeys(this.env))
          sim.operate(() => world.put(key, new TextEncoder().encode('not ours')));
    }
  }

  /**
   * Deletes the active lease whose heartbeat is the oldest, if one is older than two refresh intervals; else looks
   * again an interval later.
   */
  private deleteStuckLease(): void {
    const { sim, ns, timing } = this.env;
    if (sim.healed) return;
    const heartbeats = sim.world.keys().flatMap((key) => {
      const staged = parseCompactionKey(key);
      if (staged.kind !== 'lease') return [];
      try {
        const lease = decodeLease(sim.world.peek(key)!.body, {
          namespaceId: ns,
          jobId: staged.jobId as MetadataCompactionId,
        });
        return lease.status === 'active' ? [{ key, heartbeatMs: lease.heartbeat_at_ms }] : [];
      } catch {
        return [];
      }
    });
    const stalest = heartbeats.sort((a, b) => a.heartbeatMs - b.heartbeatMs)[0];
    if (!stalest || sim.now - stalest.heartbeatMs <= 2 * timing.leaseRefreshIntervalMs) {
      sim.scheduler.at(sim.now + timing.leaseRefreshIntervalMs, () => this.deleteStuckLease());
      return;
    }
    this.party.log(`deletes ${shortKey(stalest.key)}, its heartbeat ${sim.now - stalest.heartbeatMs} ms old`);
    sim.count(
      `operator: a lease deleted ${sim.now - stalest.heartbeatMs < timing.leaseExpiryMs ? 'before' : 'after'} it expired`,
    );
    sim.operate(() => sim.world.deleteMany([stalest.key]));
  }

  /**
   * Puts the backed-up root back where the root is missing or does not decode; a root written since stays (its writer
   * re-created it).
   */
  restoreRoot(): void {
    const { sim, ns, invariants } = this.env;
    if (!this.backup) return;
    const root = rootKey(ns);
    const present = sim.world.has(root);
    if (present && invariants.root !== undefined) {
      this.party.log('root restore refused: a root that decodes stands there (written since the loss)');
      sim.count('operator: root restore refused');
      return;
    }
    this.party.log('restores the root from its backup');
    const backup = this.backup;
    sim.operate(() => sim.world.put(root, backup));
    this.backup = undefined;
  }

  /**
   * After faults heal: the root restored, every lease that does not decode deleted (the operator's repair), so liveness
   * can be judged.
   */
  repair(): void {
    const { sim } = this.env;
    this.restoreRoot();
    for (const key of sim.world.keys()) {
      if (parseCompactionKey(key).kind !== 'lease') continue;
      if (
        sim.world.peek(key)?.body.length === CORRUPT.length &&
        Buffer.from(sim.world.peek(key)!.body).equals(CORRUPT)
      ) {
        this.party.log(`repairs ${shortKey(key)}: deletes the corrupt lease`);
        sim.operate(() => sim.world.deleteMany([key]));
      }
    }
  }
}
