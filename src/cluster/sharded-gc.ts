/**
 * One GC lease per metadata-plane shard (docs/cluster-metadata.md, "One GC lease per shard"): a
 * sharded plane's shard s is collected only under `kvtier:gc:leader:{s}`, and several GC runners
 * (workers taking the per-shard `gc` jobs, gc-schedule.ts) collect different shards at once.
 *
 *   runner A: lease {0} → GC shard 0 … lease {2} held by B → skip …
 *   runner B: lease {2} → GC shard 2 …
 *
 * The lease key carries the shard's own hash tag `{s}`, the tag of the plane's shard s, so on a
 * Redis Cluster it lives on the primary that holds that shard: a failing-over primary stalls only the
 * GC of its own shards. A runner holds every lease it took until it is done with all of them (two
 * runners of one tick never collect one shard twice); a runner that dies stops renewing, and its
 * leases expire after at most `ttlMs`, when the next runner takes those shards.
 */
import { mergeGcReports, type GcReport, type RedisClient as Redis } from '../kvtier/index.ts';
import { ClusterError } from './errors.ts';
import { GC_LEADER_KEY, gcUnderClusterLease } from './exclusive-gc.ts';
import { RedisLeaderLock, type LeaderLease, type LeaseHolder } from './leader-lock.ts';

/** Lease key of plane shard `shard` (the shard's `{s}` tag). */
export function shardLeaseKey(shard: number, base = GC_LEADER_KEY): string {
  return `${base}:{${shard}}`;
}

export interface ShardedGcOptions {
  redis: Redis;
  owner: string;
  /** The plane's shard count S. */
  shards: number;
  /** Shards this runner tries, in order; default all, starting at one picked from `owner` (runners start apart). */
  only?: readonly number[];
  ttlMs?: number;
  /** Lease key base; default `kvtier:gc:leader`. */
  key?: string;
}

export interface ShardedGcResult<R> {
  /** Shards this runner collected, with their reports (`lost`: the lease lapsed while it ran; the run stopped at its next batch). */
  ran: { shard: number; report: R; lost?: string }[];
  /** Shards another runner holds. */
  skipped: { shard: number; heldBy: LeaseHolder | null }[];
  /** Shards whose lease could not be read or whose GC failed (e.g. its primary unreachable). */
  failed: { shard: number; message: string }[];
}

/** Takes each free shard's lease in turn and runs `gc(shard, signal)` under it; `signal` aborts if that lease is lost. */
export async function runShardedGc<R>(options: ShardedGcOptions, gc: (shard: number, signal: AbortSignal) => Promise<R>): Promise<ShardedGcResult<R>> {
  const { shards } = options;
  const order = options.only ?? Array.from({ length: shards }, (_, i) => (i + startOf(options.owner, shards)) % shards);
  for (const shard of order) {
    if (!Number.isInteger(shard) || shard < 0 || shard >= shards) throw new ClusterError('BAD_OPTION', `GC shard ${shard}: the plane has ${shards} shards (0..${shards - 1})`, { param: 'shard' });
  }
  const result: ShardedGcResult<R> = { ran: [], skipped: [], failed: [] };
  const held: LeaderLease[] = [];
  try {
    for (const shard of order) {
      const lock = new RedisLeaderLock(options.redis, shardLeaseKey(shard, options.key), { owner: options.owner, ttlMs: options.ttlMs });
      let lease: LeaderLease;
      try {
        const attempt = await lock.tryAcquire();
        if (!attempt.acquired) {
          result.skipped.push({ shard, heldBy: attempt.heldBy });
          continue;
        }
        lease = attempt.lease;
      } catch (error) {
        result.failed.push({ shard, message: `taking the GC lease of shard ${shard} failed: ${(error as Error).message}` });
        continue;
      }
      held.push(lease);
      try {
        const report = await gc(shard, lease.signal);
        result.ran.push(lease.signal.aborted ? { shard, report, lost: (lease.signal.reason as Error).message } : { shard, report });
      } catch (error) {
        result.failed.push({ shard, message: (error as Error).message });
      }
    }
  } finally {
    await Promise.allSettled(held.map((lease) => lease.release()));
  }
  return result;
}

/** Where a runner starts: spread by its name, so runners of one tick start on different shards. */
function startOf(owner: string, shards: number): number {
  let hash = 0;
  for (let i = 0; i < owner.length; i++) hash = (hash * 31 + owner.charCodeAt(i)) >>> 0;
  return hash % shards;
}

/**
 * For a GC job (BullMQ `gc`, admin `POST /admin/gc`): one plane shard (S = 1) keeps the one cluster
 * lease; S > 1 collects `only` (a per-shard job's shard) or every free shard, each under its own
 * lease, and merges their reports. Nothing free: KVT_ERR_CLUSTER_GC_BUSY naming the holders.
 */
export async function gcUnderShardLeases(
  redis: Redis,
  owner: string,
  shards: number,
  only: readonly number[] | undefined,
  gc: (shards: number[] | undefined, signal: AbortSignal) => Promise<GcReport>,
): Promise<GcReport> {
  if (shards <= 1) return gcUnderClusterLease(redis, owner, (signal) => gc(undefined, signal));
  const result = await runShardedGc({ redis, owner, shards, only }, (shard, signal) => gc([shard], signal));
  if (result.ran.length === 0) {
    if (result.failed.length > 0) throw new ClusterError('REDIS', `GC of shards ${result.failed.map((f) => f.shard).join(', ')} failed: ${result.failed.map((f) => f.message).join('; ')}`);
    const holders = result.skipped.map(({ shard, heldBy }) => `shard ${shard} held by ${heldBy?.owner ?? 'another node (lease just released)'}`).join(', ');
    throw new ClusterError('GC_BUSY', `GC skipped: ${holders}; retry when they finish`);
  }
  const report = mergeGcReports(result.ran.map((ran) => ran.report));
  for (const { shard, message } of result.failed) report.errors.push({ code: 'KVT_ERR_CLUSTER_REDIS', message: `shard ${shard}: ${message}` });
  report.shards.skipped.push(...result.skipped.map((skipped) => skipped.shard), ...result.failed.map((failed) => failed.shard));
  return report;
}
