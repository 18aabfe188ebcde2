/**
 * GC step 2 on one shard, evict: for each scope over its byte quota (tenant, class, then global),
 * remove the least recently used records of that scope in this shard. A quota is over the whole
 * plane: on a sharded plane each shard evicts down to the fill level L at which the shards together
 * hold the quota, Σ min(shard's bytes, L) = quota (water-filling over the shards' usage of that scope;
 * a shard under L keeps everything). L does not move when another shard has evicted down to it, so
 * shards collected one after another, or by different runners under their own leases, together end
 * within the quota after one round. (A share proportional to the shard's part of the whole usage
 * re-read at each shard does move: one run over 4 shards left 24.5 kB of a 20 kB quota,
 * test/src/kvtier/metadata/redis-cluster-evict.test.ts.) Keys are content hashes, so shards fill
 * evenly and L is close to quota / S. The cluster evicts approximately, not exactly, the globally
 * oldest — the price of never merging every shard's index in one walk (docs/cluster-metadata.md).
 * An unsharded plane's level is the whole quota.
 */
import type { ShardPass } from './gc-run.ts';
import { scopeTagsOf, type BlockRecord } from './metadata/metadata-plane.ts';
import type { QuotaScope } from './retention-policy.ts';

export async function evictShard(pass: ShardPass): Promise<void> {
  const { run, plane } = pass;
  run.progress.phase = 'evict';
  const quotas = run.deps.policy.quotas().sort((a, b) => scopeRank(b.scope) - scopeRank(a.scope));
  // Rebuilt records carry a guessed last use, class and tenant: the run that wrote them evicts nothing.
  if (quotas.length === 0 || run.aborted() || pass.rebuiltThisRun) return;
  const usage = await plane.usage();
  const shards = plane.shardUsages ? await plane.shardUsages() : [usage];
  // A real run's usage already lacks what expiry removed; a dry run's does not.
  const removedBefore = run.dryRun ? new Map<string, number>() : new Map(pass.freedByScope);
  for (const { scope, quotaBytes } of quotas) {
    const tag = tagOf(scope);
    const shardBytes = usage.bytes[tag] ?? 0;
    // This shard as just read; the others as they stand (evicted already or not: L is the same).
    const share = fillLevel(shards.map((other, s) => (s === pass.shard && shards.length > 1 ? shardBytes : (other.bytes[tag] ?? 0))), quotaBytes);
    const used = () => shardBytes - (pass.freedByScope.get(tag) ?? 0) + (removedBefore.get(tag) ?? 0);
    let cursor: string | undefined;
    while (!run.aborted() && used() > share) {
      const page = await plane.scanByLastUse({ cursor, limit: run.batchSize });
      run.progress.scannedBlocks += page.records.length;
      const victims: BlockRecord[] = [];
      let excess = used() - share;
      for (const record of page.records) {
        if (excess <= 0) break;
        if (pass.counted.has(record.key) || !scopeTagsOf(record).includes(tag)) continue;
        victims.push(record);
        excess -= record.sizeBytes;
      }
      await pass.removeBatch(victims, 'evicted');
      run.emit();
      if (page.cursor === undefined) break;
      cursor = page.cursor;
    }
  }
}

/** The level L with Σ min(bytes[s], L) = quota; Infinity when the shards hold no more than the quota. */
export function fillLevel(bytes: readonly number[], quota: number): number {
  if (bytes.reduce((total, n) => total + n, 0) <= quota) return Infinity;
  const sorted = [...bytes].sort((a, b) => a - b);
  let left = quota;
  for (let i = 0; i < sorted.length; i++) {
    const level = left / (sorted.length - i);
    if (sorted[i] >= level) return level;
    left -= sorted[i];
  }
  return 0;
}

function scopeRank(scope: QuotaScope): number {
  return scope.kind === 'tenant' ? 2 : scope.kind === 'class' ? 1 : 0;
}

function tagOf(scope: QuotaScope): string {
  return scope.kind === 'global' ? 'g' : scope.kind === 'class' ? `c:${scope.name}` : `t:${scope.name}`;
}
