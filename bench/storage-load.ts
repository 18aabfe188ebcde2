/**
 * The hit path against the storage it reads from, on the same bytes in the
 * same run: `KvTier.load` (read + decode + verify + hot-tier fill) of a
 * prompt's blocks vs plain `store.get` of the very same block files/objects
 * at the same number of requests in flight.
 *
 * Blocks carry a 1 MiB payload (16 layers × 4 KV heads × 64 dims, f16, 64
 * tokens: about one block of the demo model), in prompts of 16 blocks. The
 * hot RAM tier is on but holds a quarter of all the prompts, so a load never
 * finds a block in RAM (the other prompts evicted it) and every load pays
 * the fill. The two sides take turns prompt by prompt, who goes first
 * alternating; the ratio is the median of the per-round ratios (each pair
 * saw the same background load). Each load is released once counted, as the
 * engine does after importBlocks, so its read buffers are recycled
 * (KVTIER_BENCH_LOAD_RELEASE=0: never released, a fresh buffer per read);
 * the get side keeps a plain `store.get` (fresh buffers), as before.
 *
 * Used by bench/storage-kvtier.ts (fs) and bench/storage.ts (s3).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import type { BlobStore } from '../storage-adapters/index.ts';
import { KvTier, payloadBytesFor, type KvLayout, type LookupResult } from '../src/kvtier/index.ts';
import { median } from './sample-stats.ts';

export const LOAD_LAYOUT: KvLayout = { layers: 16, kvHeads: 4, headDim: 64, dtype: 'f16', tokensPerBlock: 64 };
const PROMPT_BLOCKS = 16;
/** KVTIER_BENCH_LOAD_RELEASE=0: never call LoadedBlocks.release (every read into a fresh buffer, as before pooling). */
const RELEASE = process.env.KVTIER_BENCH_LOAD_RELEASE !== '0';

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
    const payload = new Uint8Array(payloadBytes);
    for (let i = 0; i < payload.length; i++) payload[i] = (i * 2654435761) >>> 24;
    // Prompts of PROMPT_BLOCKS blocks each; within a round the two sides take turns prompt by
    // prompt (tens of ms each), so a burst of load from elsewhere lands on both alike.
    const promptCount = Math.max(1, Math.floor(blocks / PROMPT_BLOCKS));
    log(`${store.kind} load pair: storing ${promptCount} prompts × ${PROMPT_BLOCKS} blocks of ${payloadBytes} payload bytes`);
    const hits: LookupResult[] = [];
    let state = 12345;
    for (let p = 0; p < promptCount; p++) {
      const tokens = new Uint32Array(PROMPT_BLOCKS * 64);
      for (let i = 0; i < tokens.length; i++) tokens[i] = (state = (Math.imul(state, 1664525) + 1013904223) >>> 0) % 151_936;
      tier.store({ namespace, tokens, layout: LOAD_LAYOUT, ...scope, payloads: () => payload, toBlock: PROMPT_BLOCKS });
      await tier.flush();
      const hit = await tier.lookup(namespace, tokens, scope);
      if (hit.hitBlocks !== PROMPT_BLOCKS) throw new Error(`lookup found ${hit.hitBlocks} of ${PROMPT_BLOCKS} blocks`);
      hits.push(hit);
    }
    const keys = hits.map((hit) => hit.keys);

    // The get side keeps what it read until the prompt is done, as `load`'s result holds every
    // block: a reader that drops each buffer at once lets malloc hand the same warm pages back to
    // the next read, which no caller that uses the bytes gets.
    const getPrompt = async (p: number): Promise<number> => {
      const held = new Array<Uint8Array>(keys[p].length);
      let next = 0;
      await Promise.all(
        Array.from({ length: inFlight }, async () => {
          while (next < keys[p].length) {
            const i = next++;
            held[i] = (await store.get(keys[p][i]))!;
          }
        }),
      );
      return held.reduce((sum, bytes) => sum + bytes.byteLength, 0);
    };
    const loadPrompt = async (p: number): Promise<number> => {
      const loaded = await tier.load(hits[p]);
      if (loaded.blocks.length !== PROMPT_BLOCKS) throw new Error(`load returned ${loaded.blocks.length} of ${PROMPT_BLOCKS} blocks (${loaded.stoppedAt?.code})`);
      const bytes = loaded.blocks.reduce((sum, block) => sum + block.payload.byteLength, 0);
      // What the engine does once importBlocks has copied the payloads into its pages.
      if (RELEASE) loaded.release();
      return bytes;
    };
    for (let p = 0; p < promptCount; p++) {
      await getPrompt(p); // warm-up: sockets / page cache, JIT
      await loadPrompt(p);
    }
    const hotHitsBefore = tier.stats().hotCacheHits;
    const getMs: number[] = [];
    const loadMs: number[] = [];
    let storedBytes = 0;
    let loadedBytes = 0;
    const cpuUs = { get: 0, load: 0 };
    for (let round = 0; round < rounds; round++) {
      const time = { get: 0, load: 0 };
      storedBytes = 0;
      loadedBytes = 0;
      for (let p = 0; p < promptCount; p++) {
        const sides: Array<'get' | 'load'> = (round + p) % 2 ? ['load', 'get'] : ['get', 'load'];
        for (const side of sides) {
          const cpu0 = process.cpuUsage();
          const t0 = performance.now();
          if (side === 'get') storedBytes += await getPrompt(p);
          else loadedBytes += await loadPrompt(p);
          time[side] += performance.now() - t0;
          const cpu = process.cpuUsage(cpu0);
          cpuUs[side] += cpu.user + cpu.system;
        }
      }
      getMs.push(time.get);
      loadMs.push(time.load);
      log(
        `${store.kind} load pair round ${round + 1}: get ${gbps(storedBytes, time.get).toFixed(3)} GB/s, ` +
          `load ${gbps(loadedBytes, time.load).toFixed(3)} GB/s (payload)`,
      );
    }
    if (tier.stats().hotCacheHits !== hotHitsBefore) throw new Error('the hot tier served blocks: the pair would not measure storage');
    await store.delete(keys.flat());
    return {
      loadPayloadGbps: round3(gbps(loadedBytes, median(loadMs))),
      getGbps: round3(gbps(storedBytes, median(getMs))),
      loadOverGet: round3(median(loadMs.map((ms, r) => gbps(loadedBytes, ms) / gbps(storedBytes, getMs[r])))),
      // Process CPU (all threads) per block: what the hit path adds when cores, not the disk, are scarce.
      loadCpuUsPerBlock: Math.round(cpuUs.load / (rounds * promptCount * PROMPT_BLOCKS)),
      getCpuUsPerBlock: Math.round(cpuUs.get / (rounds * promptCount * PROMPT_BLOCKS)),
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

function round3(value: number): number {
  return Math.round(value * 1000) / 1000;
}
