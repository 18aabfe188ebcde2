/**
 * The hit path against the storage it reads from, on the same bytes in the
 * same run: `KvTier.load` (read + decode + verify + hot-tier fill) of a
 * prompt's blocks vs plain `store.get` of the very same block files/objects
 * at the same number of requests in flight.
 *
 * Blocks carry a 1 MiB payload (16 layers × 4 KV heads × 64 dims, f16, 64
 * tokens: about one block of the demo model). The hot RAM tier is on but
 * holds a quarter of the prompt, so an in-order load never finds a block in
 * RAM (each load evicts what the next one needs first) and every round pays
 * the fill. The two sides take turns, who goes first alternating by round;
 * the ratio is the median of the per-round ratios (each pair saw the same
 * background load).
 *
 * Used by bench/storage-kvtier.ts (fs) and bench/storage.ts (s3).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import type { BlobStore } from '../storage-adapters/index.ts';
import { KvTier, payloadBytesFor, type KvLayout } from '../src/kvtier/index.ts';

export const LOAD_LAYOUT: KvLayout = { layers: 16, kvHeads: 4, headDim: 64, dtype: 'f16', tokensPerBlock: 64 };

export interface LoadPairOptions {
  blocks: number;
  rounds: number;
  /** Requests in flight for both sides (the tier's readConcurrency). */
  inFlight: number;
  log: (line: string) => void;
}

export interface LoadPair {
  /** Payload bytes delivered by `load` per second (1e9). */
  loadPayloadGbps: number;
  /** Stored bytes read by `store.get` of the same keys per second. */
  getGbps: number;
  /** Median over rounds of (get time ÷ load time) scaled by bytes: load GB/s ÷ get GB/s. */
  loadOverGet: number;
  loadCpuUsPerBlock: number;
  getCpuUsPerBlock: number;
  loadMs: number[];
  getMs: number[];
}

export async function benchLoadPair(store: BlobStore, options: LoadPairOptions): Promise<LoadPair> {
  const { blocks, rounds, inFlight, log } = options;
  const dataDir = await mkdtemp(join(tmpdir(), 'kvtier-bench-load-'));
  const payloadBytes = payloadBytesFor(LOAD_LAYOUT, 64);
  const tier = await KvTier.open({
    dataDir,
    store,
    hotCacheBytes: Math.floor((blocks * payloadBytes) / 4),
    readConcurrency: inFlight,
    writeBehindMaxBytes: 1 << 30,
    logger: { warn: (fields, message) => log(`warn ${message} ${JSON.stringify(fields)}`), info: () => {} },
  });
  try {
    const namespace = tier.namespace({ modelFingerprint: 'bench-load-model', tenantSalt: `bench-${store.kind}-${Date.now()}` });
    const scope = { tenant: 'bench', trafficClass: 'chat' };
    const tokens = new Uint32Array(blocks * 64);
    let state = 12345;
    for (let i = 0; i < tokens.length; i++) tokens[i] = (state = (Math.imul(state, 1664525) + 1013904223) >>> 0) % 151_936;
    const payload = new Uint8Array(payloadBytes);
    for (let i = 0; i < payload.length; i++) payload[i] = (i * 2654435761) >>> 24;
    log(`${store.kind} load pair: storing ${blocks} blocks of ${payloadBytes} payload bytes`);
    tier.store({ namespace, tokens, layout: LOAD_LAYOUT, ...scope, payloads: () => payload, toBlock: blocks });
    await tier.flush();
    if (tier.stats().blocksWritten !== blocks) throw new Error(`bench setup stored ${tier.stats().blocksWritten} of ${blocks} blocks`);
    const hit = await tier.lookup(namespace, tokens, scope);
    if (hit.hitBlocks !== blocks) throw new Error(`lookup found ${hit.hitBlocks} of ${blocks} blocks`);
    const keys = hit.keys;

    let storedBytes = 0;
    // The get side keeps what it read until the round ends, as `load` does (its result holds every
    // block): a reader that drops each buffer at once lets malloc hand the same warm pages back to
    // the next read, which no caller that uses the bytes gets.
    const getAll = async () => {
      const held = new Array<Uint8Array>(keys.length);
      let next = 0;
      await Promise.all(
        Array.from({ length: inFlight }, async () => {
          while (next < keys.length) {
            const i = next++;
            held[i] = (await store.get(keys[i]))!;
          }
        }),
      );
      storedBytes = held.reduce((sum, bytes) => sum + bytes.byteLength, 0);
    };
    let loadedBytes = 0;
    const loadAll = async () => {
      const loaded = await tier.load(hit);
      if (loaded.blocks.length !== blocks) throw new Error(`load returned ${loaded.blocks.length} of ${blocks} blocks (${loaded.stoppedAt?.code})`);
      loadedBytes = loaded.blocks.reduce((sum, block) => sum + block.payload.byteLength, 0);
    };
    await getAll(); // warm-up: sockets / page cache, JIT
    await loadAll();
    const hotHitsBefore = tier.stats().hotCacheHits;
    const getMs: number[] = [];
    const loadMs: number[] = [];
    const cpuUs = new Map<number[], number>([
      [getMs, 0],
      [loadMs, 0],
    ]);
    for (let round = 0; round < rounds; round++) {
      const steps: Array<[number[], () => Promise<void>]> = [
        [getMs, getAll],
        [loadMs, loadAll],
      ];
      if (round % 2 === 1) steps.reverse();
      for (const [samples, step] of steps) {
        const cpu0 = process.cpuUsage();
        const t0 = performance.now();
        await step();
        samples.push(performance.now() - t0);
        const cpu = process.cpuUsage(cpu0);
        cpuUs.set(samples, cpuUs.get(samples)! + cpu.user + cpu.system);
      }
      log(
        `${store.kind} load pair round ${round + 1}: get ${gbps(storedBytes, getMs.at(-1)!).toFixed(3)} GB/s, ` +
          `load ${gbps(loadedBytes, loadMs.at(-1)!).toFixed(3)} GB/s (payload)`,
      );
    }
    if (tier.stats().hotCacheHits !== hotHitsBefore) throw new Error('the hot tier served blocks: the pair would not measure storage');
    await store.delete(keys);
    return {
      loadPayloadGbps: round3(gbps(loadedBytes, median(loadMs))),
      getGbps: round3(gbps(storedBytes, median(getMs))),
      loadOverGet: round3(median(loadMs.map((ms, r) => gbps(loadedBytes, ms) / gbps(storedBytes, getMs[r])))),
      // Process CPU (all threads) per block: what the hit path adds when cores, not the disk, are scarce.
      loadCpuUsPerBlock: Math.round(cpuUs.get(loadMs)! / (rounds * blocks)),
      getCpuUsPerBlock: Math.round(cpuUs.get(getMs)! / (rounds * blocks)),
      loadMs,
      getMs,
    };
  } finally {
    await tier.close();
    await rm(dataDir, { recursive: true, force: true });
  }
}

function gbps(bytes: number, ms: number): number {
  return bytes / (ms / 1000) / 1e9;
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

function round3(value: number): number {
  return Math.round(value * 1000) / 1000;
}
