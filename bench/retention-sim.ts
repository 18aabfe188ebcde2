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
 */
import { createHash } from 'node:crypto';
import { mkdtemp, readdir, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { Redis } from 'ioredis';

import { FsBlobStore, type BlobStore } from '../storage-adapters/index.ts';
import { BlockIndex, DAY_MS, HOUR_MS, LmdbMetadataPlane, ManualClock, RedisMetadataPlane, RetentionPolicy, defaultPolicyDoc, runGc, type BlockRecord, type MetadataPlane } from '../src/kvtier/index.ts';
import { startRedis } from '../test/helpers/redis-server.ts';

const T0 = Date.UTC(2026, 0, 1);
const MINUTE = 60_000;
const SIM_DAYS = 10;
const GC_EVERY_MS = 6 * HOUR_MS;
const TENANTS = 64;
const BLOCK_BYTES = 64 * 70_272; // a 64-token block of DeepSeek-V3's MLA latent (61 layers × 576 × f16 ≈ 70 KB/token)

/** A store with nothing in it whose deletes cost nothing (the simulated blocks have no bytes). */
const nullStore: BlobStore = {
  kind: 'null',
  location: 'nowhere',
  put: async () => undefined,
  get: async () => null,
  has: async (keys) => keys.map(() => false),
  delete: async () => undefined,
  list: async function* () {},
  close: async () => undefined,
};

/** Small deterministic PRNG (mulberry32). */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * The trace in typed arrays (10^7 blocks: ~1 M sessions, ~2.7 M turns): per session its class
 * (0 agent, 1 chat), tenant and client hint; per turn one float packing (time since T0, session,
 * turn) so a plain numeric sort gives the replay order (time, then session, then turn).
 */
interface Trace {
  sessionClass: Uint8Array;
  sessionTenant: Uint8Array;
  /** 1: the session carries the 1 h client hint. */
  sessionHinted: Uint8Array;
  sessions: number;
  turns: Float64Array;
  blocks: number;
}

const CLASSES = ['agent', 'chat'] as const;
const TURNS_OF = [3, 2];
const NEW_PER_TURN_OF = [4, 3];
/** Turn packing: time since T0 (< 2^30 ms over 10 days) × 2^23 + session × 4 + turn stays an exact double below 2^53. */
const SESSION_SLOTS = 2 ** 21;

function buildTrace(targetBlocks: number): Trace {
  const random = rng(15);
  let capacity = 1024;
  let sessionClass = new Uint8Array(capacity);
  let sessionTenant = new Uint8Array(capacity);
  let sessionHinted = new Uint8Array(capacity);
  let turns = new Float64Array(capacity * 3);
  let sessions = 0;
  let turnCount = 0;
  let blocks = TENANTS * 2 * 2; // shared system prompts
  const span = SIM_DAYS * 24 * HOUR_MS;
  while (blocks < targetBlocks) {
    if (sessions === capacity) {
      capacity *= 2;
      const grow = <A extends Uint8Array | Float64Array>(from: A, size: number): A => {
        const to = new (from.constructor as new (n: number) => A)(size);
        to.set(from);
        return to;
      };
      sessionClass = grow(sessionClass, capacity);
      sessionTenant = grow(sessionTenant, capacity);
      sessionHinted = grow(sessionHinted, capacity);
      turns = grow(turns, capacity * 3);
    }
    if (sessions === SESSION_SLOTS) throw new Error(`retention-sim packs at most ${SESSION_SLOTS} sessions (~2 × 10^7 blocks); lower KVTIER_BENCH_RETENTION_BLOCKS`);
    // The same draws in the same order as before the typed arrays: the trace is unchanged.
    const agent = random() < 0.6;
    const cls = agent ? 0 : 1;
    sessionClass[sessions] = cls;
    sessionTenant[sessions] = Math.floor(random() * TENANTS);
    sessionHinted[sessions] = !agent && random() < 0.05 ? 1 : 0;
    let t = Math.floor(random() * span * 0.8);
    for (let turn = 0; turn < TURNS_OF[cls]; turn++) {
      turns[turnCount++] = t * 2 ** 23 + sessions * 4 + turn;
      t += agent ? Math.floor((0.5 + random() * 4.5) * MINUTE) : Math.floor((1 + random() * 36) * HOUR_MS);
    }
    blocks += TURNS_OF[cls] * NEW_PER_TURN_OF[cls];
    sessions++;
  }
  const sorted = turns.slice(0, turnCount).sort();
  return { sessionClass, sessionTenant, sessionHinted, sessions, turns: sorted, blocks };
}

function keyOf(kind: string, a: number, b: number): string {
  return createHash('md5').update(`${kind}:${a}:${b}`).digest('hex');
}

interface Replay {
  blocks: number;
  hitBlocks: number;
  missBlocks: number;
  renewals: number;
  renewSeconds: number;
  upserts: number;
  upsertSeconds: number;
  gcRemoved: number;
  gcSeconds: number;
  /** Rows GC read (scanByLastUse pages, removeByLastUse batches), and the plane time of its scans and removals. */
  gcRowsRead: number;
  gcScanSeconds: number;
  gcRemoveSeconds: number;
  /** CPU seconds GC runs cost this process and (Redis replay) the redis-server: what the rate would be on an idle box, load aside. */
  gcCpuSeconds: number;
  gcRedisCpuSeconds: number;
  peakLive: number;
  /** Plane bytes per live record at the peak-live GC point (measureBytes), 0 without a measure. */
  peakBytesPerBlock: number;
}

async function replay(trace: Trace, plane: MetadataPlane, dir: string, measureBytes?: () => Promise<number>, redisCpuSeconds?: () => Promise<number>): Promise<Replay> {
  const clock = new ManualClock(T0);
  const policy = new RetentionPolicy(defaultPolicyDoc());
  // The trace has no blobs: by default GC's storage deletes cost nothing here (KVTIER_BENCH_RETENTION_STORE=fs: unlinks of absent files on an fs store),
  // so gc_blocks_per_s is the plane's side of GC; the storage side is a DeleteObjects per 1000 blocks (docs/cluster-metadata.md).
  const store: BlobStore = process.env.KVTIER_BENCH_RETENTION_STORE === 'fs' ? await FsBlobStore.open({ dir: join(dir, 'blocks') }) : nullStore;
  const index = BlockIndex.open({ path: join(dir, 'index') });
  await plane.markTrusted((await plane.state()).generation);
  const out: Replay = { blocks: 0, hitBlocks: 0, missBlocks: 0, renewals: 0, renewSeconds: 0, upserts: 0, upsertSeconds: 0, gcRemoved: 0, gcSeconds: 0, gcRowsRead: 0, gcScanSeconds: 0, gcRemoveSeconds: 0, gcCpuSeconds: 0, gcRedisCpuSeconds: 0, peakLive: 0, peakBytesPerBlock: 0 };
  /**
   * When blocks were last seen (an expired prefix is rewritten, as a miss). A session's own blocks
   * older than this turn were all in its previous turn's prefix, and a tenant's two system blocks
   * are always used together: one time per session and one per (class, tenant) say it all.
   */
  const sessionSeen = new Float64Array(trace.sessions).fill(-1);
  const systemSeen = new Float64Array(CLASSES.length * TENANTS).fill(-1);
  let pending: BlockRecord[] = [];
  let pendingRenewals = 0;
  let nextGc = T0 + GC_EVERY_MS;
  const writeRecords = async () => {
    if (pending.length === 0) return;
    const t = performance.now();
    for (let i = 0; i < pending.length; i += 512) await plane.upsert(pending.slice(i, i + 512));
    out.upsertSeconds += (performance.now() - t) / 1000;
    out.upserts += pending.length;
    pending = [];
  };
  const flushRenewals = async () => {
    if (pendingRenewals === 0) return;
    const t = performance.now();
    await plane.flush();
    out.renewSeconds += (performance.now() - t) / 1000;
    pendingRenewals = 0;
  };
  const writePending = async () => {
    await writeRecords();
    await flushRenewals();
  };
  // GC sees the plane through a timer of its scans and removals (where a run's time goes).
  const timed = Object.create(plane) as MetadataPlane;
  /** Runs one plane call, adding its wall time to `seconds` and the rows it read to gcRowsRead. */
  const timedCall = async <T>(seconds: 'gcScanSeconds' | 'gcRemoveSeconds', call: () => Promise<T>, rowsRead: (result: T) => number): Promise<T> => {
    const t = performance.now();
    const result = await call();
    out[seconds] += (performance.now() - t) / 1000;
    out.gcRowsRead += rowsRead(result);
    return result;
  };
  timed.scanByLastUse = (options) => timedCall('gcScanSeconds', () => plane.scanByLastUse(options), (page) => page.records.length);
  timed.remove = (keys, options) => timedCall('gcRemoveSeconds', () => plane.remove(keys, options), () => 0);
  timed.removeByLastUse = (options) => timedCall('gcRemoveSeconds', () => plane.removeByLastUse(options), (taken) => taken.keys.length);
  const gc = async () => {
    await writePending();
    const redisCpu = (await redisCpuSeconds?.()) ?? 0;
    const cpu = process.cpuUsage();
    const t = performance.now();
    const report = await runGc({ plane: timed, index, store, policy, clock }, { sweepOrphans: false, batchSize: 2048 });
    out.gcSeconds += (performance.now() - t) / 1000;
    const used = process.cpuUsage(cpu);
    out.gcCpuSeconds += (used.user + used.system) / 1e6;
    if (redisCpuSeconds) out.gcRedisCpuSeconds += (await redisCpuSeconds()) - redisCpu;
    out.gcRemoved += report.removed.expired.blocks + report.removed.evicted.blocks;
  };
  const started = performance.now();
  let day = 0;
  for (let i = 0; i < trace.turns.length; i++) {
    const packed = trace.turns[i];
    const since = Math.floor(packed / 2 ** 23);
    const low = packed - since * 2 ** 23;
    const session = low >>> 2;
    const turn = low & 3;
    const t = T0 + since;
    while (t >= nextGc) {
      clock.set(nextGc);
      await writePending();
      const live = (await plane.usage()).blocks.g ?? 0;
      if (live > out.peakLive) {
        out.peakLive = live;
        if (measureBytes) out.peakBytesPerBlock = Math.round((await measureBytes()) / live);
      }
      await gc();
      nextGc += GC_EVERY_MS;
      if (Math.floor((nextGc - T0) / DAY_MS) > day) {
        day = Math.floor((nextGc - T0) / DAY_MS);
        console.error(`[retention-sim] ${plane.kind}: day ${day}/${SIM_DAYS}, turn ${i}/${trace.turns.length}, ${out.blocks} blocks written, ${live} live, GC removed ${out.gcRemoved} (${Math.round(out.gcRemoved / Math.max(1e-9, out.gcSeconds))}/s), ${((performance.now() - started) / 1000).toFixed(0)} s`);
      }
    }
    clock.set(t);
    const cls = trace.sessionClass[session];
    const trafficClass = CLASSES[cls];
    const tenant = `tenant-${trace.sessionTenant[session]}`;
    const ttlMs = trace.sessionHinted[session] === 1 ? HOUR_MS : 0;
    const ttl = ttlMs > 0 ? ttlMs : policy.ttlMs(trafficClass, tenant);
    const hits: string[] = [];
    const depths: number[] = [];
    /** One block of the prefix, last seen at `seen` (-1: never). */
    const use = (key: string, depth: number, seen: number) => {
      if (seen >= 0 && t - seen < ttl) {
        hits.push(key);
        depths.push(depth);
      } else {
        if (seen < 0) out.blocks++;
        pending.push({ key, trafficClass, tenant, sizeBytes: BLOCK_BYTES, writer: `worker-${session % 16}`, createdAt: t, lastUseAt: t, ttlMs, depth });
      }
    };
    const system = cls * TENANTS + trace.sessionTenant[session];
    for (let j = 0; j < 2; j++) use(keyOf(`sys-${trafficClass}`, trace.sessionTenant[session], j), j, systemSeen[system]);
    systemSeen[system] = t;
    const own = (turn + 1) * NEW_PER_TURN_OF[cls];
    const seenBefore = turn * NEW_PER_TURN_OF[cls];
    for (let j = 0; j < own; j++) use(keyOf('s', session, j), 2 + j, j < seenBefore ? sessionSeen[session] : -1);
    sessionSeen[session] = t;
    out.hitBlocks += hits.length;
    out.missBlocks += 2 + own - hits.length;
    if (hits.length > 0) {
      const started = performance.now();
      plane.renew(hits, t, depths);
      out.renewSeconds += (performance.now() - started) / 1000;
      out.renewals += hits.length;
      pendingRenewals += hits.length;
    }
    // A node flushes its renewals every few seconds: here every 64k renewals or 512 new records.
    if (pending.length >= 512) await writeRecords();
    if (pendingRenewals >= 65_536) await flushRenewals();
  }
  await writePending();
  out.peakLive = Math.max(out.peakLive, (await plane.usage()).blocks.g ?? 0);
  await index.close();
  await store.close();
  return out;
}

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
  const trace = buildTrace(target);
  console.error(`[retention-sim] trace: ${trace.sessions} sessions, ${trace.turns.length} turns, ${trace.blocks} blocks over ${SIM_DAYS} days`);
  const server = await startRedis();
  const admin = new Redis(server.url);
  const dir = await mkdtemp(join(tmpdir(), 'kvtier-bench-retention-'));
  const out: Record<string, number> = { sim_days: SIM_DAYS };
  try {
    const usedMemory = async () => Number(/used_memory:(\d+)/.exec(await admin.info('memory'))![1]);
    const plane = await RedisMetadataPlane.open({ url: server.url, bucketBits: target > 3_000_000 ? 16 : 14 });
    const empty = await usedMemory();
    /** MEMORY USAGE summed over every key of the plane (record hashes, last-use index, usage, markers). */
    const planeKeyBytes = async () => {
      let total = 0;
      let cursor = '0';
      do {
        const [next, keys] = await admin.scan(cursor, 'MATCH', 'kvtier:plane:*', 'COUNT', 1000);
        cursor = next;
        // One pipeline per page: a round trip (and a socket write) per key made this the bench's largest cost.
        const pipeline = admin.pipeline();
        for (const key of keys) pipeline.call('MEMORY', 'USAGE', key, 'SAMPLES', '0');
        for (const [error, bytes] of (await pipeline.exec()) ?? []) {
          if (error !== null) throw error;
          total += Number(bytes);
        }
      } while (cursor !== '0');
      return total;
    };
    let infoAtPeak = 0;
    const redisCpuSeconds = async () => {
      const info = await admin.info('cpu');
      return Number(/used_cpu_user:([\d.]+)/.exec(info)![1]) + Number(/used_cpu_sys:([\d.]+)/.exec(info)![1]);
    };
    const redis = await replay(
      trace,
      plane,
      join(dir, 'redis'),
      async () => {
        infoAtPeak = (await usedMemory()) - empty;
        return planeKeyBytes();
      },
      redisCpuSeconds,
    );
    const live = (await plane.usage()).blocks.g ?? 0;
    const full = await usedMemory();
    // MEMORY USAGE of the record hashes (sampled), per record they hold: the same figure from Redis' own accounting.
    const buckets = await admin.keys('kvtier:plane:{0}:r:*');
    let sampledBytes = 0;
    let sampledRecords = 0;
    for (const key of buckets.slice(0, 256)) {
      sampledBytes += Number(await admin.call('MEMORY', 'USAGE', key, 'SAMPLES', '0'));
      sampledRecords += await admin.hlen(key);
    }
    await plane.close();
    Object.assign(out, {
      blocks: redis.blocks,
      trace_hit_ratio: Number((redis.hitBlocks / (redis.hitBlocks + redis.missBlocks)).toFixed(3)),
      peak_live_blocks: redis.peakLive,
      renewals: redis.renewals,
      renewals_per_s: Math.round(redis.renewals / redis.renewSeconds),
      upserts_per_s: Math.round(redis.upserts / redis.upsertSeconds),
      gc_removed_blocks: redis.gcRemoved,
      gc_blocks_per_s: Math.round(redis.gcRemoved / redis.gcSeconds),
      gc_rows_read_per_removed: Number((redis.gcRowsRead / Math.max(1, redis.gcRemoved)).toFixed(2)),
      // CPU per removed block (this process + redis-server) and the rate those would give one after the other on an idle box.
      gc_cpu_us_per_block: Number((((redis.gcCpuSeconds + redis.gcRedisCpuSeconds) * 1e6) / Math.max(1, redis.gcRemoved)).toFixed(1)),
      gc_redis_cpu_us_per_block: Number(((redis.gcRedisCpuSeconds * 1e6) / Math.max(1, redis.gcRemoved)).toFixed(1)),
      gc_blocks_per_cpu_s: Math.round(redis.gcRemoved / Math.max(1e-9, redis.gcCpuSeconds + redis.gcRedisCpuSeconds)),
      gc_scan_us_per_row: Number(((redis.gcScanSeconds * 1e6) / Math.max(1, redis.gcRowsRead)).toFixed(1)),
      gc_remove_us_per_block: Number(((redis.gcRemoveSeconds * 1e6) / Math.max(1, redis.gcRemoved)).toFixed(1)),
      live_blocks_end: live,
      meta_bytes_per_block: redis.peakBytesPerBlock,
      meta_info_bytes_per_block: Math.round(infoAtPeak / Math.max(1, redis.peakLive)),
      meta_info_bytes_per_block_end: Math.round((full - empty) / Math.max(1, live)),
      record_hash_bytes_per_record: sampledRecords > 0 ? Math.round(sampledBytes / sampledRecords) : 0,
    });
    // A long run may be cut short during the LMDB replay: the Redis figures are on stderr already.
    console.error(`[retention-sim] redis figures: ${JSON.stringify(out)}`);
    // KVTIER_BENCH_RETENTION_PLANES=redis: the Redis plane only (the 10^7 run, where LMDB's replay would double the time).
    if ((process.env.KVTIER_BENCH_RETENTION_PLANES ?? 'redis,lmdb').split(',').includes('lmdb')) Object.assign(out, await replayLmdb(trace, dir));
  } finally {
    admin.disconnect();
    await server.stop();
    await rm(dir, { recursive: true, force: true });
  }
  return out;
}

async function replayLmdb(trace: Trace, dir: string): Promise<Record<string, number>> {
  const lmdbPlane = await LmdbMetadataPlane.open({ path: join(dir, 'lmdb-plane') });
  const lmdb = await replay(trace, lmdbPlane, join(dir, 'lmdb'));
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
