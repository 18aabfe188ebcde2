/**
 * kvtier block store: chained-key hashing throughput and the cost of
 * hashing a 128k-token prompt plus finding its longest cached prefix when
 * all 2048 blocks are cached (embedded LMDB index, fs store); then the hit
 * path against the fs store on the same bytes (bench/storage-load.ts).
 *
 *   npm run bench -- storage
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { FsBlobStore } from '../storage-adapters/index.ts';
import { KvTier, PrefixHasher, payloadBytesFor, type KvLayout } from '../src/kvtier/index.ts';
import { benchLoadPair } from './storage-load.ts';
import { middleSample } from './sample-stats.ts';

const PROMPT_TOKENS = 131072;
const WARMUP = 20;
const RUNS = 41;
const LOAD_BLOCKS = Number(process.env.KVTIER_BENCH_LOAD_BLOCKS ?? 128);
const LOAD_ROUNDS = Number(process.env.KVTIER_BENCH_LOAD_ROUNDS ?? 9);
/** As many as bench/storage.ts's fs_get_gbps keeps in flight (libuv's 4 threads). */
const LOAD_IN_FLIGHT = 4;

function promptTokens(count: number, seed: number): Uint32Array {
  const tokens = new Uint32Array(count);
  let state = seed >>> 0;
  for (let i = 0; i < count; i++) {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    tokens[i] = state % 151_936;
  }
  return tokens;
}

export async function run(): Promise<Record<string, number | string>> {
  const tokens = promptTokens(PROMPT_TOKENS, 42);
  const hasher = await PrefixHasher.create();
  const ns = hasher.namespaceKeyBytes({ modelFingerprint: 'bench-model', tenantSalt: 'bench' });

  console.error(`[storage-kvtier] hashing ${PROMPT_TOKENS} tokens (${PROMPT_TOKENS / 64} blocks), ${WARMUP} warm-up + ${RUNS} runs`);
  for (let i = 0; i < WARMUP; i++) hasher.chain(ns, tokens);
  const hashMs: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const t0 = performance.now();
    hasher.chain(ns, tokens);
    hashMs.push(performance.now() - t0);
  }
  const hashMedianMs = middleSample(hashMs);
  const hash_gbps = (PROMPT_TOKENS * 4) / (hashMedianMs / 1000) / 1e9;

  const dir = await mkdtemp(join(tmpdir(), 'kvtier-bench-'));
  const store = await FsBlobStore.open({ dir: join(dir, 'blocks') });
  // Small KV rows keep the 2048-block setup quick; lookup cost does not depend on payload size.
  const layout: KvLayout = { layers: 1, kvHeads: 1, headDim: 32, dtype: 'f16', tokensPerBlock: 64 };
  const tier = await KvTier.open({ dataDir: join(dir, 'node'), store, hotCacheBytes: 0, writeBehindMaxBytes: 1 << 30, logger: silentLogger() });
  try {
    const namespace = tier.namespace({ modelFingerprint: 'bench-model', tenantSalt: 'bench' });
    const scope = { tenant: 'bench', trafficClass: 'chat' };
    const blocks = PROMPT_TOKENS / 64;
    const payload = new Uint8Array(payloadBytesFor(layout, 64)).fill(7);
    console.error(`[storage-kvtier] storing ${blocks} blocks`);
    const receipt = tier.store({ namespace, tokens, layout, ...scope, payloads: new Array(blocks).fill(payload) });
    await tier.flush();
    if (receipt.queued !== blocks || tier.stats().blocksWritten !== blocks) throw new Error(`bench setup stored ${tier.stats().blocksWritten} of ${blocks} blocks`);

    console.error(`[storage-kvtier] lookup of the fully cached prompt, ${WARMUP} warm-up + ${RUNS} runs`);
    for (let i = 0; i < WARMUP; i++) await tier.lookup(namespace, tokens, scope);
    const lookupMs: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      const t0 = performance.now();
      const result = await tier.lookup(namespace, tokens, scope);
      lookupMs.push(performance.now() - t0);
      if (result.hitBlocks !== blocks) throw new Error(`lookup found ${result.hitBlocks} of ${blocks} cached blocks`);
    }
    const lookup_128k_ms = middleSample(lookupMs);

    // Load of 2048 small blocks: per-block cost (read + decode + verify), OS page cache warm, hot cache off.
    const hit = await tier.lookup(namespace, tokens, scope);
    const loadMs: number[] = [];
    console.error(`[storage-kvtier] load of all ${blocks} blocks, 2 warm-up + 5 runs`);
    for (let i = 0; i < 7; i++) {
      const t0 = performance.now();
      const loaded = await tier.load(hit);
      if (i >= 2) loadMs.push(performance.now() - t0);
      if (loaded.blocks.length !== blocks) throw new Error(`load returned ${loaded.blocks.length} of ${blocks} blocks`);
    }
    const load_128k_ms = middleSample(loadMs);
    await tier.close();

    // Baseline in the same run: every probe goes to LMDB (live-entry memo off).
    const lmdbOnly = await KvTier.open({ dataDir: join(dir, 'node'), store, hotCacheBytes: 0, liveCacheEntries: 0, logger: silentLogger() });
    console.error(`[storage-kvtier] same lookup with the live-entry memo off (LMDB get per block)`);
    for (let i = 0; i < WARMUP; i++) await lmdbOnly.lookup(namespace, tokens, scope);
    const lmdbMs: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      const t0 = performance.now();
      const result = await lmdbOnly.lookup(namespace, tokens, scope);
      lmdbMs.push(performance.now() - t0);
      if (result.hitBlocks !== blocks) throw new Error(`lookup found ${result.hitBlocks} of ${blocks} cached blocks`);
    }
    await lmdbOnly.close();
    const lookup_128k_lmdb_only_ms = middleSample(lmdbMs);
    const pair = await benchLoadPair(store, {
      blocks: LOAD_BLOCKS,
      rounds: LOAD_ROUNDS,
      inFlight: LOAD_IN_FLIGHT,
      log: (line) => console.error(`[storage-kvtier] ${line}`),
    });
    console.error(
      `[storage-kvtier] hash ${hashMedianMs.toFixed(3)} ms (${hash_gbps.toFixed(2)} GB/s), lookup ${lookup_128k_ms.toFixed(3)} ms, LMDB-only ${lookup_128k_lmdb_only_ms.toFixed(3)} ms`,
    );
    return {
      hash_gbps: round(hash_gbps, 3),
      hash_128k_ms: round(hashMedianMs, 3),
      lookup_128k_ms: round(lookup_128k_ms, 3),
      lookup_128k_p90_ms: round([...lookupMs].sort((a, b) => a - b)[Math.floor(RUNS * 0.9)], 3),
      lookup_128k_lmdb_only_ms: round(lookup_128k_lmdb_only_ms, 3),
      load_128k_ms: round(load_128k_ms, 2),
      load_payload_gbps: pair.loadPayloadGbps,
      load_fs_get_gbps: pair.getGbps,
      load_over_fs_get: pair.loadOverGet,
      load_cpu_us_per_block: pair.loadCpuUsPerBlock,
      load_fs_get_cpu_us_per_block: pair.getCpuUsPerBlock,
      load_pair_blocks: LOAD_BLOCKS,
      load_pair_rounds: LOAD_ROUNDS,
      load_pair_in_flight: LOAD_IN_FLIGHT,
      lookup_memo_speedup: round(lookup_128k_lmdb_only_ms / lookup_128k_ms, 2),
    };
  } finally {
    await tier.close();
    await store.close();
    await rm(dir, { recursive: true, force: true });
  }
}

function round(value: number, digits: number): number {
  return Number(value.toFixed(digits));
}

function silentLogger() {
  return { warn: (fields: Record<string, unknown>, message: string) => console.error('[storage-kvtier] warn', message, fields), info: () => {} };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  console.log(JSON.stringify(await run()));
}
