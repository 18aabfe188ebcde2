/**
 * The retention simulator's Redis replays (bench/retention-sim.ts): the trace against the Redis
 * metadata plane on one deployment — a standalone redis-server, or a Redis Cluster with a sharded
 * plane — and the figures of that replay: throughputs, GC CPU (this process + every server that
 * holds the plane, INFO cpu) and plane bytes per live record (MEMORY USAGE over every node).
 */
import { join } from 'node:path';

import type { Redis } from 'ioredis';

import { RedisMetadataPlane } from '../src/kvtier/index.ts';
import { replay } from './retention-sim-replay.ts';
import type { Trace } from './retention-sim-trace.ts';

export interface RedisDeployment {
  label: string;
  /** redis://… (standalone) or redis-cluster://… (the plane's address). */
  url: string;
  /** One admin connection per server holding plane keys (a cluster's primaries). */
  nodes: Redis[];
  shards: number;
  bucketBits: number;
}

const sum = async (nodes: Redis[], each: (node: Redis) => Promise<number>) => (await Promise.all(nodes.map(each))).reduce((a, b) => a + b, 0);

const usedMemory = async (node: Redis) => Number(/used_memory:(\d+)/.exec(await node.info('memory'))![1]);

const cpuSeconds = async (node: Redis) => {
  const info = await node.info('cpu');
  return Number(/used_cpu_user:([\d.]+)/.exec(info)![1]) + Number(/used_cpu_sys:([\d.]+)/.exec(info)![1]);
};

/** MEMORY USAGE summed over every plane key on one node (record hashes, last-use index, usage, markers). */
async function planeKeyBytes(node: Redis): Promise<number> {
  let total = 0;
  let cursor = '0';
  do {
    const [next, keys] = await node.scan(cursor, 'MATCH', 'kvtier:plane:*', 'COUNT', 1000);
    cursor = next;
    // One pipeline per page: a round trip (and a socket write) per key made this the bench's largest cost.
    const pipeline = node.pipeline();
    for (const key of keys) pipeline.call('MEMORY', 'USAGE', key, 'SAMPLES', '0');
    for (const [error, bytes] of (await pipeline.exec()) ?? []) {
      if (error !== null) throw error;
      total += Number(bytes);
    }
  } while (cursor !== '0');
  return total;
}

/** MEMORY USAGE of up to 256 record hashes per node, per record they hold: Redis' own accounting of a record. */
async function recordHashBytes(nodes: Redis[]): Promise<number> {
  let bytes = 0;
  let records = 0;
  for (const node of nodes) {
    for (const key of (await node.keys('kvtier:plane:{*}:r:*')).slice(0, 256)) {
      bytes += Number(await node.call('MEMORY', 'USAGE', key, 'SAMPLES', '0'));
      records += await node.hlen(key);
    }
  }
  return records > 0 ? Math.round(bytes / records) : 0;
}

export async function replayRedis(trace: Trace, deployment: RedisDeployment, dir: string): Promise<Record<string, number>> {
  const { nodes } = deployment;
  const plane = await RedisMetadataPlane.open({ url: deployment.url, shards: deployment.shards, bucketBits: deployment.bucketBits });
  try {
    const empty = await sum(nodes, usedMemory);
    let infoAtPeak = 0;
    const redis = await replay(trace, plane, {
      label: deployment.label,
      dir: join(dir, deployment.label),
      measureBytes: async () => {
        infoAtPeak = (await sum(nodes, usedMemory)) - empty;
        return sum(nodes, planeKeyBytes);
      },
      serverCpuSeconds: () => sum(nodes, cpuSeconds),
      // A sharded plane is collected shard by shard, as runners do under per-shard leases.
      gcPlanes: deployment.shards > 1 ? Array.from({ length: deployment.shards }, (_, s) => plane.shard(s)) : undefined,
    });
    const live = (await plane.usage()).blocks.g ?? 0;
    const full = await sum(nodes, usedMemory);
    return {
      shards: deployment.shards,
      blocks: redis.blocks,
      trace_hit_ratio: Number((redis.hitBlocks / (redis.hitBlocks + redis.missBlocks)).toFixed(3)),
      peak_live_blocks: redis.peakLive,
      renewals: redis.renewals,
      renewals_per_s: Math.round(redis.renewals / redis.renewSeconds),
      upserts_per_s: Math.round(redis.upserts / redis.upsertSeconds),
      gc_removed_blocks: redis.gcRemoved,
      gc_blocks_per_s: Math.round(redis.gcRemoved / redis.gcSeconds),
      gc_rows_read_per_removed: Number((redis.gcRowsRead / Math.max(1, redis.gcRemoved)).toFixed(2)),
      // CPU per removed block (this process + the servers) and the rate those would give one after the other on an idle box.
      gc_cpu_us_per_block: Number((((redis.gcCpuSeconds + redis.gcRedisCpuSeconds) * 1e6) / Math.max(1, redis.gcRemoved)).toFixed(1)),
      gc_redis_cpu_us_per_block: Number(((redis.gcRedisCpuSeconds * 1e6) / Math.max(1, redis.gcRemoved)).toFixed(1)),
      gc_blocks_per_cpu_s: Math.round(redis.gcRemoved / Math.max(1e-9, redis.gcCpuSeconds + redis.gcRedisCpuSeconds)),
      gc_scan_us_per_row: Number(((redis.gcScanSeconds * 1e6) / Math.max(1, redis.gcRowsRead)).toFixed(1)),
      gc_remove_us_per_block: Number(((redis.gcRemoveSeconds * 1e6) / Math.max(1, redis.gcRemoved)).toFixed(1)),
      live_blocks_end: live,
      meta_bytes_per_block: redis.peakBytesPerBlock,
      meta_info_bytes_per_block: Math.round(infoAtPeak / Math.max(1, redis.peakLive)),
      meta_info_bytes_per_block_end: Math.round((full - empty) / Math.max(1, live)),
      record_hash_bytes_per_record: await recordHashBytes(nodes),
    };
  } finally {
    await plane.close();
  }
}
