/** How a Redis plane is opened, and the checks its options pass before any connection is made. */
import { PlaneError } from '../errors.ts';
import type { KvTierLogger } from '../logger.ts';
import { shardBitsOf } from './redis-plane-shards.ts';

export interface RedisMetadataPlaneOptions {
  /** `redis://host:port/db` or `redis-cluster://host:port,…` (redis-connection.ts); defaults to `REDIS_URL`. */
  url?: string;
  /** Key prefix; default `kvtier:plane:` (no `{` or `}`: the plane adds its own hash tag). */
  keyPrefix?: string;
  connectTimeoutMs?: number;
  logger?: KvTierLogger;
  /** Renewals buffered before a flush; default 8192. */
  renewBatchKeys?: number;
  /** Longest a renewal waits in the buffer (wall ms); default 1000. */
  renewFlushMs?: number;
  /**
   * Records are spread over 2^bucketBits hashes (1..16, default 16: sized for
   * 10^6–10^7 blocks, 15–150 per hash; past 128 per hash raise Redis'
   * hash-max-listpack-entries or a hash turns into a ~2× larger hashtable).
   * Every node of a cluster must use the same value.
   */
  bucketBits?: number;
  /**
   * Shards S = 2^k (1..256, default 1): a block's shard is the top k bits of its key, shard s's keys
   * carry the hash tag `{s}` (spread over a Redis Cluster's primaries). Fixed per deployment: a node
   * opening a plane made with another S fails with KVT_ERR_PLANE_SHARDS (redis-plane-shards.ts).
   */
  shards?: number;
}

/** The Redis address (options, else REDIS_URL), once bucketBits, keyPrefix and shards are known good. */
export function checkedPlaneUrl(options: RedisMetadataPlaneOptions): string {
  const url = options.url ?? process.env.REDIS_URL;
  if (url === undefined || url === '') {
    throw new PlaneError('KVT_ERR_PLANE_OPEN', 'RedisMetadataPlane needs a url (or REDIS_URL), e.g. redis://127.0.0.1:6379');
  }
  const bits = options.bucketBits ?? 16;
  if (!Number.isInteger(bits) || bits < 1 || bits > 16) throw new PlaneError('KVT_ERR_PLANE_OPEN', `bucketBits must be an integer 1..16, got ${bits}`);
  if (/[{}]/.test(options.keyPrefix ?? '')) throw new PlaneError('KVT_ERR_PLANE_OPEN', `keyPrefix must not contain { or } (the plane adds its own Redis Cluster hash tag), got ${JSON.stringify(options.keyPrefix)}`);
  shardBitsOf(options.shards ?? 1);
  return url;
}
