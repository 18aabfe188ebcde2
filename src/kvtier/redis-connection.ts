/**
 * The one way every kvtier process connects to Redis (plane, policy, stats, queues, streams, leases,
 * routing, stored Responses). A Redis address is either
 *
 *   redis://host:port[/db], rediss://…     one Redis (REDIS_URL)
 *   redis-cluster://host:port,host:port…  a Redis Cluster (KVTIER_REDIS_CLUSTER=host:port,… as config
 *                                          writes it): an ioredis Cluster over those seed nodes
 *
 * Callers pass the same ioredis options for both; for a cluster the per-connection ones go to every
 * node's connection (`redisOptions`) and the client-level ones (lazyConnect, offline queue, auto
 * pipelining) to the Cluster. A cluster client follows MOVED/ASK and, after a primary fails, refreshes
 * its slot map and retries (retryDelayOnFailover / ClusterDown / TryAgain below) — commands issued
 * during a failover wait for the promoted replica instead of failing.
 *
 * Invariant: on a cluster every command and script touches one slot (keys hash-tagged by family:
 * docs/cluster-metadata.md "Key families and slots"); the cluster tests count CROSSSLOT errors on
 * every node (INFO errorstats) and expect none.
 *
 * ioredis is loaded on first use (createRequire), so the embedded default never loads it.
 */
import { createRequire } from 'node:module';

import type { Cluster, ClusterOptions, Redis, RedisOptions } from 'ioredis';

import { KvTierConfigError } from './errors.ts';

/** One Redis or a Redis Cluster: the commands kvtier uses are the same on both. */
export type RedisClient = Redis | Cluster;

export const CLUSTER_SCHEME = 'redis-cluster://';

export interface RedisConnectOptions extends RedisOptions {
  /** Cluster only: sharded pub/sub (SSUBSCRIBE) through one subscriber per shard primary. */
  shardedSubscribers?: boolean;
}

export function isClusterAddress(address: string): boolean {
  return address.startsWith(CLUSTER_SCHEME);
}

/** Seed nodes of a cluster address or of a `host:port,host:port` list; throws on anything else. */
export function clusterSeeds(addressOrSpec: string): { host: string; port: number }[] {
  const spec = isClusterAddress(addressOrSpec) ? addressOrSpec.slice(CLUSTER_SCHEME.length) : addressOrSpec;
  const seeds = spec
    .split(',')
    .map((part) => part.trim())
    .filter((part) => part.length > 0)
    .map((part) => {
      const match = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):(\d{1,5})$/.exec(part);
      const port = match ? Number(match[2]) : 0;
      if (!match || port < 1 || port > 65535) throw new KvTierConfigError('address', `"${part}" is not host:port`);
      return { host: match[1].replace(/^\[|\]$/g, ''), port };
    });
  if (seeds.length === 0) throw new KvTierConfigError('address', 'no host:port given');
  return seeds;
}

/** `host:port,…` → the address form every component takes. */
export function clusterAddress(spec: string): string {
  return CLUSTER_SCHEME + clusterSeeds(spec).map(({ host, port }) => (host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`)).join(',');
}

/** Without the password of a redis:// URL, for messages. */
export function redactAddress(address: string): string {
  return address.replace(/\/\/([^@/]*)@/, '//***@');
}

let ioredis: typeof import('ioredis') | undefined;

/** A client for `address` (not connected when `lazyConnect`). */
export function createRedisClient(address: string, options: RedisConnectOptions = {}): RedisClient {
  ioredis ??= createRequire(import.meta.url)('ioredis') as typeof import('ioredis');
  const { shardedSubscribers, ...redisOptions } = options;
  if (!isClusterAddress(address)) return new ioredis.Redis(address, redisOptions);
  const { lazyConnect, enableOfflineQueue, enableAutoPipelining, retryStrategy, ...perNode } = redisOptions;
  const clusterOptions: ClusterOptions = {
    lazyConnect,
    enableOfflineQueue: enableOfflineQueue ?? true,
    enableAutoPipelining,
    shardedSubscribers,
    // A failover: the slot map is refreshed and the command retried on the promoted replica.
    retryDelayOnFailover: 100,
    retryDelayOnClusterDown: 100,
    retryDelayOnTryAgain: 100,
    retryDelayOnMoved: 0,
    maxRedirections: 64,
    slotsRefreshTimeout: 2000,
    clusterRetryStrategy: retryStrategy ?? ((times: number) => Math.min(100 * times, 1000)),
    redisOptions: perNode,
  };
  return withSettlingConnect(new ioredis.Cluster(clusterSeeds(address), clusterOptions));
}

/**
 * A Cluster whose connect() settles, and whose duplicates' do too. After fetching the slots ioredis
 * runs a ready check (CLUSTER INFO); reading cluster_state:fail (a primary down, its replica not yet
 * promoted) it reconnects on its own with a new attempt and leaves the promise of the connect() that
 * was awaited unsettled for good. BullMQ awaits exactly that when it resets a worker's blocking
 * connection (a duplicate of the worker's client) after a read that did not come back: with a
 * failover in that window the worker never fetched a job again, its client ready all along
 * (test/src/cluster/failover-worker.test.ts). Here connect() also settles when the client gets ready
 * or ends by any attempt.
 */
function withSettlingConnect(cluster: Cluster): Cluster {
  const connect = cluster.connect.bind(cluster);
  // One wait for the client's next ready or end, shared by every connect() in flight: ioredis's own
  // reconnects call connect() too, once per retry, for as long as the cluster state stays fail.
  let readyOrEnd: Promise<void> | null = null;
  const nextReadyOrEnd = (): Promise<void> =>
    (readyOrEnd ??= new Promise<void>((resolve, reject) => {
      const settle = (error?: Error): void => {
        cluster.off('ready', onReady);
        cluster.off('end', onEnd);
        readyOrEnd = null;
        if (error) reject(error);
        else resolve();
      };
      const onReady = (): void => settle();
      // ioredis's own message for a closed client: BullMQ tells connection errors by it.
      const onEnd = (): void => settle(new Error('Connection is closed.'));
      cluster.on('ready', onReady);
      cluster.on('end', onEnd);
    }));
  cluster.connect = () => Promise.race([connect(), nextReadyOrEnd()]);
  const duplicate = cluster.duplicate.bind(cluster);
  cluster.duplicate = ((...args: Parameters<Cluster['duplicate']>) => withSettlingConnect(duplicate(...args))) as Cluster['duplicate'];
  return cluster;
}

/**
 * KEYS `pattern` over the whole keyspace: on a cluster on every primary (a plain KEYS reaches one
 * random node there). Only for small, hash-tagged families (worker heartbeats), never the plane.
 */
export async function keysOnEveryPrimary(redis: RedisClient, pattern: string): Promise<string[]> {
  if (!('nodes' in redis && typeof redis.nodes === 'function' && 'isCluster' in redis && redis.isCluster)) return (redis as Redis).keys(pattern);
  const found = await Promise.all((redis as Cluster).nodes('master').map((node) => node.keys(pattern)));
  return [...new Set(found.flat())];
}
