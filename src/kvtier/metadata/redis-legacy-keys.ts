/**
 * Keys of the Redis plane's naming before the Redis Cluster hash tag: `<p>gen`, `<p>use`, `<p>cap`,
 * `<p>usage`, `<p>orph` and the record buckets `<p>r:<bits>:<hex>`. A plane upgraded past the rename
 * starts a new generation under `<p>{0}:…` (GC rebuilds it from storage), and nothing reads the old
 * keys again: they are removed once, at the first open after the upgrade, and the sweep is marked
 * done in the new naming so later opens skip it.
 */
import type { Redis } from 'ioredis';

import type { KvTierLogger } from '../logger.ts';

const LEGACY_SINGLE_KEYS = ['gen', 'use', 'cap', 'usage', 'orph'];
/** Keys unlinked per command and read per SCAN page. */
const SWEEP_BATCH = 1000;

/** Escapes a literal for a Redis glob (SCAN MATCH). */
function globLiteral(text: string): string {
  return text.replace(/[*?[\]\\]/g, (c) => `\\${c}`);
}

function regexLiteral(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, (c) => `\\${c}`);
}

/**
 * Removes the old naming's keys under `prefix` (SCAN + UNLINK in batches) unless `doneMarker`
 * says an earlier open did; returns how many keys went. Only the exact old names and the old
 * bucket pattern match: the tagged keys (`<p>{0}:…`) and any other key are left alone.
 */
export async function removeLegacyPlaneKeys(redis: Redis, prefix: string, doneMarker: string, logger: KvTierLogger): Promise<number> {
  if ((await redis.exists(doneMarker)) === 1) return 0;
  let removed = await unlinkEach(redis, LEGACY_SINGLE_KEYS.map((name) => `${prefix}${name}`));
  const bucket = new RegExp(`^${regexLiteral(prefix)}r:\\d{1,2}:[0-9a-f]{1,4}$`);
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${globLiteral(prefix)}r:*`, 'COUNT', SWEEP_BATCH);
    cursor = next;
    const old = keys.filter((key) => bucket.test(key));
    removed += await unlinkEach(redis, old);
  } while (cursor !== '0');
  await redis.set(doneMarker, String(removed));
  if (removed > 0) logger.info({ removed, prefix }, `removed ${removed} Redis keys of the metadata plane's naming before the cluster hash tag`);
  return removed;
}

/** One UNLINK per key, pipelined: the old keys hash to different Redis Cluster slots (a multi-key UNLINK would be refused there). */
async function unlinkEach(redis: Redis, keys: string[]): Promise<number> {
  if (keys.length === 0) return 0;
  const pipeline = redis.pipeline();
  for (const key of keys) pipeline.unlink(key);
  let removed = 0;
  for (const [error, count] of (await pipeline.exec()) ?? []) {
    if (error !== null) throw error;
    removed += Number(count);
  }
  return removed;
}
