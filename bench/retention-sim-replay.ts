/**
 * One replay of the retention simulator's trace (bench/retention-sim-trace.ts) against a metadata
 * plane on an injected clock, GC every 6 simulated hours: the throughputs and CPU the bench prints.
 */
import { join } from 'node:path';

import { FsBlobStore, type BlobStore } from '../storage-adapters/index.ts';
import { BlockIndex, DAY_MS, HOUR_MS, ManualClock, RetentionPolicy, defaultPolicyDoc, runGc, type BlockRecord, type MetadataPlane } from '../src/kvtier/index.ts';
import { CLASSES, GC_EVERY_MS, NEW_PER_TURN_OF, SIM_DAYS, T0, TENANTS, BLOCK_BYTES, keyOf, type Trace } from './retention-sim-trace.ts';

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

export interface ReplayOptions {
  /** Label of the progress lines. */
  label: string;
  dir: string;
  /** Plane bytes at the peak of live records (measured at each new peak). */
  measureBytes?: () => Promise<number>;
  /** CPU seconds the plane's servers have used so far (INFO cpu summed over them). */
  serverCpuSeconds?: () => Promise<number>;
  /**
   * What one GC tick collects, one after the other: default the whole plane; a sharded plane's
   * shards (plane.shard(s)), as runners collect them under per-shard leases (src/cluster/sharded-gc.ts).
   */
  gcPlanes?: MetadataPlane[];
}

export interface Replay {
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

export async function replay(trace: Trace, plane: MetadataPlane, options: ReplayOptions): Promise<Replay> {
  const { dir, measureBytes, serverCpuSeconds } = options;
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
  /** Runs one plane call, adding its wall time to `seconds` and the rows it read to gcRowsRead. */
  const timedCall = async <T>(seconds: 'gcScanSeconds' | 'gcRemoveSeconds', call: () => Promise<T>, rowsRead: (result: T) => number): Promise<T> => {
    const t = performance.now();
    const result = await call();
    out[seconds] += (performance.now() - t) / 1000;
    out.gcRowsRead += rowsRead(result);
    return result;
  };
  // GC sees each plane it collects through a timer of its scans and removals (where a run's time goes).
  const timedPlanes = (options.gcPlanes ?? [plane]).map((target) => {
    const timed = Object.create(target) as MetadataPlane;
    timed.scanByLastUse = (scan) => timedCall('gcScanSeconds', () => target.scanByLastUse(scan), (page) => page.records.length);
    timed.remove = (keys, remove) => timedCall('gcRemoveSeconds', () => target.remove(keys, remove), () => 0);
    timed.removeByLastUse = (take) => timedCall('gcRemoveSeconds', () => target.removeByLastUse(take), (taken) => taken.keys.length);
    return timed;
  });
  const gc = async () => {
    await writePending();
    const serverCpu = (await serverCpuSeconds?.()) ?? 0;
    const cpu = process.cpuUsage();
    const t = performance.now();
    for (const timed of timedPlanes) {
      const report = await runGc({ plane: timed, index, store, policy, clock }, { sweepOrphans: false, batchSize: 2048 });
      out.gcRemoved += report.removed.expired.blocks + report.removed.evicted.blocks;
    }
    out.gcSeconds += (performance.now() - t) / 1000;
    const used = process.cpuUsage(cpu);
    out.gcCpuSeconds += (used.user + used.system) / 1e6;
    if (serverCpuSeconds) out.gcRedisCpuSeconds += (await serverCpuSeconds()) - serverCpu;
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
        console.error(`[retention-sim] ${options.label}: day ${day}/${SIM_DAYS}, turn ${i}/${trace.turns.length}, ${out.blocks} blocks written, ${live} live, GC removed ${out.gcRemoved} (${Math.round(out.gcRemoved / Math.max(1e-9, out.gcSeconds))}/s), ${((performance.now() - started) / 1000).toFixed(0)} s`);
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
