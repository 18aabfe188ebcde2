/**
 * GC step 2 on one shard, evict: for each scope over its byte quota (tenant, class, then global),
 * remove the least recently used records of that scope in this shard. A sharded plane's shard evicts
 * its share of the scope's excess: the quota scaled by the shard's share of the scope's bytes (keys
 * are content hashes, so shards fill evenly). The cluster then evicts approximately, not exactly, the
 * globally oldest — the price of never merging every shard's index in one walk
 * (docs/cluster-metadata.md). An unsharded plane's share is the whole quota.
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
  const whole = plane.wholeUsage ? await plane.wholeUsage() : usage;
  // A real run's usage already lacks what expiry removed; a dry run's does not.
  const removedBefore = run.dryRun ? new Map<string, number>() : new Map(pass.freedByScope);
  for (const { scope, quotaBytes } of quotas) {
    const tag = tagOf(scope);
    const shardBytes = usage.bytes[tag] ?? 0;
    const wholeBytes = whole.bytes[tag] ?? 0;
    const share = wholeBytes > shardBytes ? (quotaBytes * shardBytes) / wholeBytes : quotaBytes;
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

function scopeRank(scope: QuotaScope): number {
  return scope.kind === 'tenant' ? 2 : scope.kind === 'class' ? 1 : 0;
}

function tagOf(scope: QuotaScope): string {
  return scope.kind === 'global' ? 'g' : scope.kind === 'class' ? `c:${scope.name}` : `t:${scope.name}`;
}
