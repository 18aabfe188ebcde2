/**
 * `npm run bench -- retention-sim`: replays a synthetic agent + chat trace of
 * KVTIER_BENCH_RETENTION_BLOCKS distinct blocks (default 10^6; 10^7 for the
 * long run) against the real metadata plane — the Redis driver on a
 * redis-server started here, then the LMDB driver — on an injected clock over
 * SIM_DAYS simulated days, with the cluster GC every 6 simulated hours.
 *
 * Trace (deterministic): sessions of 64 tenants; 60 % agent (3 turns a few
 * minutes apart, 4 new blocks a turn), 40 % chat (2 turns hours apart, 3 new
 * blocks a turn); every session starts with its tenant's 2 shared system
 * prompt blocks of its class; 5 % of chat sessions carry a 1 h client hint
 * (ttlMs cap). A turn renews every block of its prefix (hits) and writes its
 * new blocks (misses): block-weighted hit ratio ≈ DeepSeek's 56.3 %.
 *
 * Prints: `blocks` (distinct blocks written), `renewals_per_s` (renewals
 * handed to the plane and flushed, batched, per second of plane time),
 * `gc_blocks_per_s` (blocks expired and removed by runGc, per second of GC
 * time), `gc_cpu_us_per_block` / `gc_blocks_per_cpu_s` (GC's CPU: this
 * process + the redis-server's INFO cpu), `meta_bytes_per_block` (MEMORY
 * USAGE of every plane key at the peak of live records, per live record;
 * `meta_info_bytes_per_block`: INFO used_memory growth, the cross-check), the
 * trace's hit ratio, peak live blocks, and the same throughputs for LMDB
 * (`lmdb_*`). Progress per simulated day and the Redis figures (once that
 * replay ends) go to stderr; KVTIER_BENCH_RETENTION_PLANES=redis skips LMDB.
 *
 * KVTIER_BENCH_RETENTION_PLANES=redis,redis-cluster adds the same replay on a Redis Cluster of 3
 * primaries (no replicas: the bench measures the plane, not replication) with a 4-shard plane
 * (2^12 buckets per shard: the standalone plane's 2^14 in all), side by side with standalone Redis
 * in the same run: `cluster_*` are its figures, `cluster_*_over_standalone` the ratios, and
 * `crossslot_errors` the CROSSSLOT replies and failed script calls counted on every node.
 * Trace, replay and the Redis figures: retention-sim-trace.ts, -replay.ts, -redis.ts.
 */
import { mkdtemp, readdir, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { Redis } from 'ioredis';

import { LmdbMetadataPlane } from '../src/kvtier/index.ts';
import { startRedisCluster } from '../test/helpers/redis-cluster.ts';
import { startRedis } from '../test/helpers/redis-server.ts';
import { replay } from './retention-sim-replay.ts';
import { replayRedis } from './retention-sim-redis.ts';
import { SIM_DAYS, buildTrace, type Trace } from './retention-sim-trace.ts';

async function bytesUnder(path: string): Promise<number> {
  const info = await stat(path).catch(() => null);
  if (!info) return 0;
  if (!info.isDirectory()) return info.size;
  let total = 0;
  for (const name of await readdir(path)) total += await bytesUnder(join(path, name));
  return total;
}

export async function run(): Promise<Record<string, number>> {
  const target = Number(process.env.KVTIER_BENCH_RETENTION_BLOCKS ?? 1_000_000);
  const planes = (process.env.KVTIER_BENCH_RETENTION_PLANES ?? 'redis,lmdb').split(',');
  const trace = buildTrace(target);
  console.error(`[retention-sim] trace: ${trace.sessions} sessions, ${trace.turns.length} turns, ${trace.blocks} blocks over ${SIM_DAYS} days`);
  const dir = await mkdtemp(join(tmpdir(), 'kvtier-bench-retention-'));
  const out: Record<string, number> = { sim_days: SIM_DAYS };
  const bucketBits = target > 3_000_000 ? 16 : 14;
  try {
    const server = await startRedis();
    const admin = new Redis(server.url);
    try {
      Object.assign(out, await replayRedis(trace, { label: 'redis', url: server.url, nodes: [admin], shards: 1, bucketBits }, dir));
    } finally {
      admin.disconnect();
      await server.stop();
    }
    // A long run may be cut short during a later replay: the Redis figures are on stderr already.
    console.error(`[retention-sim] redis figures: ${JSON.stringify(out)}`);
    if (planes.includes('redis-cluster')) Object.assign(out, await replayCluster(trace, bucketBits, dir, out));
    if (planes.includes('lmdb')) Object.assign(out, await replayLmdb(trace, dir));
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
  return out;
}

/** The same replay on a Redis Cluster (3 primaries) with a 4-shard plane; figures prefixed `cluster_`. */
async function replayCluster(trace: Trace, bucketBits: number, dir: string, standalone: Record<string, number>): Promise<Record<string, number>> {
  const shards = 4;
  const cluster = await startRedisCluster({ primaries: 3, replicas: 0 });
  const nodes = cluster.topology().map(({ primary }) => new Redis({ host: '127.0.0.1', port: primary }));
  try {
    const figures = await replayRedis(trace, { label: 'redis-cluster', url: cluster.address, nodes, shards, bucketBits: bucketBits - Math.log2(shards) }, dir);
    const out: Record<string, number> = { cluster_primaries: nodes.length };
    for (const [name, value] of Object.entries(figures)) out[`cluster_${name}`] = value;
    out.cluster_gc_blocks_per_cpu_s_over_standalone = Number((figures.gc_blocks_per_cpu_s / standalone.gc_blocks_per_cpu_s).toFixed(3));
    out.cluster_renewals_per_s_over_standalone = Number((figures.renewals_per_s / standalone.renewals_per_s).toFixed(3));
    out.cluster_gc_blocks_per_s_over_standalone = Number((figures.gc_blocks_per_s / standalone.gc_blocks_per_s).toFixed(3));
    out.crossslot_errors = cluster.crossSlotErrors();
    console.error(`[retention-sim] redis-cluster figures: ${JSON.stringify(out)}`);
    return out;
  } finally {
    for (const node of nodes) node.disconnect();
    await cluster.stop();
  }
}

async function replayLmdb(trace: Trace, dir: string): Promise<Record<string, number>> {
  const lmdbPlane = await LmdbMetadataPlane.open({ path: join(dir, 'lmdb-plane') });
  const lmdb = await replay(trace, lmdbPlane, { label: 'lmdb', dir: join(dir, 'lmdb') });
  const lmdbLive = (await lmdbPlane.usage()).blocks.g ?? 0;
  await lmdbPlane.close();
  const lmdbFile = await bytesUnder(join(dir, 'lmdb-plane'));
  return {
    lmdb_renewals_per_s: Math.round(lmdb.renewals / lmdb.renewSeconds),
    lmdb_upserts_per_s: Math.round(lmdb.upserts / lmdb.upsertSeconds),
    lmdb_gc_blocks_per_s: Math.round(lmdb.gcRemoved / lmdb.gcSeconds),
    lmdb_gc_rows_read_per_removed: Number((lmdb.gcRowsRead / Math.max(1, lmdb.gcRemoved)).toFixed(2)),
    lmdb_gc_blocks_per_cpu_s: Math.round(lmdb.gcRemoved / Math.max(1e-9, lmdb.gcCpuSeconds)),
    lmdb_file_bytes_per_live_block: lmdbLive > 0 ? Math.round(lmdbFile / lmdbLive) : 0,
  };
}

if (import.meta.url === `file://${process.argv[1]}`) console.log(JSON.stringify(await run(), null, 2));
