/**
 * Exactly one GC at a time across the cluster: every node that wants to GC
 * calls `runExclusiveGc`; the one that gets the `kvtier:gc:leader` lease runs,
 * the others return at once with "skipped: held by <owner>".
 *
 * Why a lease and not just idempotent GC: two concurrent runs would walk the
 * same expiry ranges, double-count what they removed, and double the delete
 * load on shared storage. Killing the holder mid-run is safe because GC
 * deletes storage first, then the index (src/kvtier/gc.ts): what is left is
 * index entries without a blob, which read as misses and go in the next run.
 */

import type { GcReport, RedisClient as Redis } from '../kvtier/index.ts';
import { ClusterError } from './errors.ts';
import { RedisLeaderLock, type LeaseHolder } from './leader-lock.ts';

export const GC_LEADER_KEY = 'kvtier:gc:leader';

export type ExclusiveGcResult<R = GcReport> =
  | { status: 'ran'; owner: string; report: R }
  | { status: 'skipped'; reason: string; heldBy: LeaseHolder | null }
  /** The lease lapsed while running (the run stopped at its next batch boundary, when it watches `signal`). */
  | { status: 'lost'; owner: string; report: R; reason: string };

export interface ExclusiveGcOptions {
  redis: Redis;
  owner: string;
  ttlMs?: number;
  key?: string;
}

/** `gc(signal)` runs only while this node holds the lease; `signal` aborts if the lease is lost. */
export async function runExclusiveGc<R = GcReport>(options: ExclusiveGcOptions, gc: (signal: AbortSignal) => Promise<R>): Promise<ExclusiveGcResult<R>> {
  const lock = new RedisLeaderLock(options.redis, options.key ?? GC_LEADER_KEY, { owner: options.owner, ttlMs: options.ttlMs });
  const attempt = await lock.tryAcquire();
  if (!attempt.acquired) {
    const who = attempt.heldBy ? `${attempt.heldBy.owner} since ${new Date(attempt.heldBy.since).toISOString()}` : 'another node (lease just released)';
    return { status: 'skipped', reason: `skipped: held by ${who}`, heldBy: attempt.heldBy };
  }
  const { lease } = attempt;
  try {
    const report = await gc(lease.signal);
    if (lease.signal.aborted) return { status: 'lost', owner: options.owner, report, reason: (lease.signal.reason as Error).message };
    return { status: 'ran', owner: options.owner, report };
  } finally {
    await lease.release();
  }
}

/**
 * For a GC job (BullMQ `gc` job, admin `POST /admin/gc`): the run's own
 * report when this node got the lease; a KVT_ERR_CLUSTER_GC_BUSY naming the
 * holder when another node is collecting now (the caller retries later).
 */
export async function gcUnderClusterLease<R>(redis: Redis, owner: string, gc: (signal: AbortSignal) => Promise<R>): Promise<R> {
  const result = await runExclusiveGc({ redis, owner }, gc);
  if (result.status === 'skipped') throw new ClusterError('GC_BUSY', `GC ${result.reason}; retry when it finishes`);
  return result.report;
}
