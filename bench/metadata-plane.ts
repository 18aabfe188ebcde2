/**
 * `npm run bench -- metadata-plane`: the cluster metadata plane's own costs
 * (src/kvtier/metadata), Redis (a redis-server started here) and LMDB:
 * batched renewals per second, record writes per second, GC blocks judged and
 * removed per second (runGc over a plane of expired records, fs store), and
 * Redis memory per record (used_memory delta of a fill of
 * KVTIER_BENCH_PLANE_MEM_BLOCKS records, default 10^6, in the default layout:
 * 2^16 record hashes). Throughput over KVTIER_BENCH_PLANE_BLOCKS records
 * (default 200 000, spread over 2^14 hashes: ~12 per hash, as at 10^6).
 */
import { createHash } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { Redis } from 'ioredis';

import { FsBlobStore } from '../storage-adapters/index.ts';
import { BlockIndex, DAY_MS, LmdbMetadataPlane, ManualClock, RedisMetadataPlane, RetentionPolicy, defaultPolicyDoc, runGc, type BlockRecord, type MetadataPlane } from '../src/kvtier/index.ts';
import { startRedis } from '../test/helpers/redis-server.ts';

const T0 = Date.UTC(2026, 0, 1);

function records(n: number, from = 0): BlockRecord[] {
  const out: BlockRecord[] = [];
  for (let i = from; i < from + n; i++) {
    out.push({
      key: createHash('sha1').update(String(i)).digest('hex').slice(0, 32),
      trafficClass: i % 3 === 0 ? 'agent' : 'chat',
      tenant: `tenant-${i % 64}`,
      sizeBytes: 1 << 20,
      writer: `worker-${i % 8}`,
      createdAt: T0,
      lastUseAt: T0 + i,
      ttlMs: 0,
      depth: i % 32,
    });
  }
  return out;
}

async function measure(plane: MetadataPlane, all: BlockRecord[], dir: string): Promise<Record<string, number>> {
  let t = performance.now();
  for (let i = 0; i < all.length; i += 512) await plane.upsert(all.slice(i, i + 512));
  const upserts = all.length / ((performance.now() - t) / 1000);
  // Renewals: three hits per block, interleaved (coalesced to one write per block per flush).
  const rounds = 3;
  t = performance.now();
  for (let round = 0; round < rounds; round++) {
    for (let i = 0; i < all.length; i++) plane.renew([all[i].key], T0 + DAY_MS + round * 1000 + (i % 1000), [all[i].depth]);
    if (round === rounds - 1 || round % 1 === 0) await plane.flush();
  }
  const renewals = (rounds * all.length) / ((performance.now() - t) / 1000);
  // GC: every record expired (agent 3 d, chat 7 d) at T0 + 9 d.
  const clock = new ManualClock(T0 + 9 * DAY_MS);
  const store = await FsBlobStore.open({ dir: join(dir, 'blocks') });
  const index = BlockIndex.open({ path: join(dir, 'index') });
  const state = await plane.state();
  await plane.markTrusted(state.generation);
  t = performance.now();
  const report = await runGc({ plane, index, store, policy: new RetentionPolicy(defaultPolicyDoc()), clock }, { sweepOrphans: false, batchSize: 1024 });
  const gcSeconds = (performance.now() - t) / 1000;
  await index.close();
  await store.close();
  if (report.removed.expired.blocks !== all.length) throw new Error(`GC removed ${report.removed.expired.blocks} of ${all.length}`);
  return { upserts_per_s: Math.round(upserts), renewals_per_s: Math.round(renewals), gc_blocks_per_s: Math.round(all.length / gcSeconds) };
}

export async function run(): Promise<Record<string, number>> {
  const n = Number(process.env.KVTIER_BENCH_PLANE_BLOCKS ?? 200_000);
  const all = records(n);
  const out: Record<string, number> = { plane_blocks: n };
  const server = await startRedis();
  const admin = new Redis(server.url);
  const dir = await mkdtemp(join(tmpdir(), 'kvtier-bench-plane-'));
  try {
    const redisPlane = await RedisMetadataPlane.open({ url: server.url, bucketBits: 14 });
    const before = Number(/used_memory:(\d+)/.exec(await admin.info('memory'))![1]);
    await redisPlane.upsert(all.slice(0, 1)); // warm the scripts
    const redis = await measure(redisPlane, all, join(dir, 'redis'));
    await redisPlane.close();
    // Memory: a fresh fill in the default layout.
    await admin.flushall();
    const memBlocks = Number(process.env.KVTIER_BENCH_PLANE_MEM_BLOCKS ?? 1_000_000);
    const fill = await RedisMetadataPlane.open({ url: server.url });
    const empty = Number(/used_memory:(\d+)/.exec(await admin.info('memory'))![1]);
    for (let start = 0; start < memBlocks; start += 50_000) {
      const chunk = records(Math.min(50_000, memBlocks - start), start);
      for (let i = 0; i < chunk.length; i += 512) await fill.upsert(chunk.slice(i, i + 512));
    }
    const full = Number(/used_memory:(\d+)/.exec(await admin.info('memory'))![1]);
    await fill.close();
    void before;
    for (const [k, v] of Object.entries(redis)) out[`plane_redis_${k}`] = v;
    out.plane_mem_blocks = memBlocks;
    out.plane_redis_bytes_per_record = Math.round((full - empty) / memBlocks);
    const lmdbPlane = await LmdbMetadataPlane.open({ path: join(dir, 'lmdb-plane') });
    const lmdb = await measure(lmdbPlane, all, join(dir, 'lmdb'));
    await lmdbPlane.close();
    for (const [k, v] of Object.entries(lmdb)) out[`plane_lmdb_${k}`] = v;
  } finally {
    admin.disconnect();
    await server.stop();
    await rm(dir, { recursive: true, force: true });
  }
  return out;
}

if (import.meta.url === `file://${process.argv[1]}`) console.log(JSON.stringify(await run(), null, 2));
