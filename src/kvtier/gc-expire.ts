/**
 * GC step 1 on one shard, expire: walk each class's last-use index oldest first up to now − that
 * class's smallest TTL (its policy TTL, or a shorter tenant override), then the capped records; remove
 * those past their TTL (class and tenant TTL under the current policy, capped by the client hint).
 * Below now − the class's longest TTL every row is expired whatever its tenant or cap: taken without
 * judging, one plane call per batch (judged and removed atomically inside the plane). Per class, the
 * walk reads expired rows only (unless a tenant override is shorter).
 */
import type { ShardPass } from './gc-run.ts';
import type { RetentionPolicy } from './retention-policy.ts';

export async function expireShard(pass: ShardPass): Promise<void> {
  const { run, plane } = pass;
  const { policy } = run.deps;
  run.progress.phase = 'expire';
  // First the blobs an earlier run removed the records of but did not delete (killed, storage failure).
  if (!run.dryRun) await pass.finishPendingDeletes();
  const classes = Object.entries((await plane.usage()).blocks)
    .filter(([tag, blocks]) => tag.startsWith('c:') && blocks > 0)
    .map(([tag]) => tag.slice(2))
    .sort();
  if (!run.dryRun) for (const trafficClass of classes) await takeExpired(pass, trafficClass, run.now - ttlRangeOfClass(policy, trafficClass).max);
  // Then what needs judging: classes whose tenants' TTLs differ (up to now − the shortest), and the capped records.
  const walks: { trafficClass?: string; capped?: boolean; maxLastUseAt: number }[] = [
    ...classes
      .map((trafficClass) => ({ trafficClass, range: ttlRangeOfClass(policy, trafficClass) }))
      .filter(({ range }) => run.dryRun || range.min < range.max)
      .map(({ trafficClass, range }) => ({ trafficClass, maxLastUseAt: run.now - range.min })),
    { capped: true, maxLastUseAt: run.now - 1 },
  ];
  for (const walk of walks) {
    let cursor: string | undefined;
    do {
      if (run.aborted()) break;
      const page = await plane.scanByLastUse({ ...walk, cursor, limit: run.batchSize });
      cursor = page.cursor;
      run.progress.scannedBlocks += page.records.length;
      const candidates = page.records.filter((record) => !pass.counted.has(record.key) && run.isExpired(record));
      await pass.removeBatch(candidates, 'expired', true);
      run.emit();
    } while (cursor !== undefined);
    // Every removal of this walk lands (and is counted) before the next walk or step reads.
    if (await pass.settleRemoval()) run.emit();
  }
}

/**
 * Takes every row of `trafficClass` at or below `maxLastUseAt`. Two batches in flight: the plane
 * takes batch n + 1 while this process counts batch n and deletes its blobs. Once asked for, a batch
 * is always awaited and its blobs deleted, abort or not.
 */
async function takeExpired(pass: ShardPass, trafficClass: string, maxLastUseAt: number): Promise<void> {
  const { run, plane } = pass;
  const take = () => {
    const taking = plane.removeByLastUse({ trafficClass, maxLastUseAt, limit: run.batchSize, journal: true });
    taking.catch(() => undefined); // awaited below; handled there
    return taking;
  };
  let next: ReturnType<typeof take> | undefined = run.aborted() ? undefined : take();
  while (next !== undefined) {
    const taken = await next;
    next = taken.more && !run.aborted() ? take() : undefined;
    await pass.settleRemoval();
    run.progress.scannedBlocks += taken.keys.length;
    pass.tallyFreed(taken.freed, 'expired');
    pass.deleteInFlight(taken.keys);
    run.emit();
  }
}

/**
 * The shortest and longest policy TTL a record of `trafficClass` can have: the class's own
 * (a class the policy no longer has falls back to the default class) and tenant overrides.
 * Client hints only shorten a TTL; those records are walked separately (capped).
 */
export function ttlRangeOfClass(policy: RetentionPolicy, trafficClass: string): { min: number; max: number } {
  const doc = policy.toJSON();
  const own = (Object.hasOwn(doc.classes, trafficClass) ? doc.classes[trafficClass] : doc.classes[doc.defaultClass]).ttlMs;
  let min = own;
  let max = own;
  for (const override of Object.values(doc.tenants)) {
    const ttl = override.ttlMs?.[trafficClass];
    if (ttl === undefined) continue;
    min = Math.min(min, ttl);
    max = Math.max(max, ttl);
  }
  return { min, max };
}
