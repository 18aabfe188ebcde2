/**
 * Cluster coordination for kvtier nodes that share one Redis and one block
 * store: the GC leader lease, cache-aware routing (hot prefix sets per worker),
 * the fetch-or-recompute estimator. Import from here only.
 */
export { ClusterError } from './errors.ts';
export { RedisLeaderLock, type AcquireResult, type LeaderLease, type LeaderLockOptions, type LeaseHolder } from './leader-lock.ts';
export { GC_LEADER_KEY, gcUnderClusterLease, runExclusiveGc, type ExclusiveGcOptions, type ExclusiveGcResult } from './exclusive-gc.ts';
export { gcUnderShardLeases, runShardedGc, shardLeaseKey, type ShardedGcOptions, type ShardedGcResult } from './sharded-gc.ts';
export { FetchOrRecompute, type FetchDecision, type FetchOrRecomputeOptions } from './fetch-or-recompute.ts';
export { CacheAwareRouter, HOT_WORKERS_KEY, pickWorker, routeKeys, WORKER_ROLES, type HotSetOptions, type RouteChoice, type WorkerRole } from './cache-aware-router.ts';
export { appendPurge, awaitPurgeAcks, PURGE_CHANNEL, PurgeFollower, purgeGeneration, purgesAfter, type LoggedPurge, type PurgeAck, type PurgeFilterShape, type PurgeOutcome } from './purge-log.ts';
