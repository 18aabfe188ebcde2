/**
 * Block codecs (src/kvtier/codecs): how small, how fast to decode, what they
 * cost a load, and how far they move the logits — per codec, in one run.
 *
 *   npx tsx bench/storage-codecs.ts
 *   npm run bench -- storage          (merged with the other storage fields)
 *
 * codec_<name>_ratio: stored / raw payload bytes of a 64-token block of the
 * demo model synthetic:small (12 layers × 4 kv heads × 64 dims, f16), on KV
 * the engine itself exported (targets: int8, fp8 ≤ 0.52; int4 ≤ 0.3).
 * codec_<name>_decode_gbps: raw bytes produced per CPU-second by the native
 * decoder (one thread, so one core; CPU time, not wall time, because the
 * bench machine is shared), target ≥ 2, median of rounds; `_block_decode_gbps`:
 * the whole BlockCodec.decode (both checksums, allocation, decompression; the
 * process's CPU time, GC threads included).
 * codec_<name>_encode_gbps: the write-behind side, for scale.
 * codec_<name>_max_logit_dev / _mean_logit_dev / _rel_max_logit_dev /
 * _greedy_agree: codec-quality.ts on synthetic:small; `_mla` the same on
 * deepseek-tiny's latent pages.
 * codec_<name>_load_payload_gbps and codec_<name>_load_vs_none: KvTier.load of
 * a 64-block prompt from fs (page cache warm, hot cache off) stored under the
 * codec vs stored raw, pair by pair (target ≥ 0.9); codec_none_load_payload_gbps
 * is the raw side. GB/s = 1e9 B/s.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { loadEngine } from '../inference-core/engine/index.ts';
import { ensureDeepseekModel } from '../inference-core/synthetic/deepseek-synthetic.ts';
import { FsBlobStore } from '../storage-adapters/index.ts';
import { BlockCodec, KvTier, payloadBytesFor, type KvLayout, type KvTierLogger } from '../src/kvtier/index.ts';
import { measureCodecQuality } from '../src/kvtier/codecs/codec-quality.ts';
import { compressPayload, decompressPayloadInto, type BlockCodecName } from '../src/kvtier/codecs/kv-codecs.ts';
import { f32ToF16 } from '../test/native/kv-codec-fixtures.ts';
import { middleSample } from './sample-stats.ts';

const CODECS: BlockCodecName[] = ['int8', 'fp8', 'int4'];
const DEMO_LAYOUT: KvLayout = { layers: 12, kvHeads: 4, headDim: 64, dtype: 'f16', tokensPerBlock: 64 };
const ROUNDS = Number(process.env.KVTIER_BENCH_CODEC_ROUNDS ?? 9);
const DECODE_BYTES_PER_ROUND = 96 * 1024 * 1024;
const LOAD_BLOCKS = Number(process.env.KVTIER_BENCH_CODEC_LOAD_BLOCKS ?? 64);
const LOAD_PAIRS = Number(process.env.KVTIER_BENCH_CODEC_LOAD_PAIRS ?? 7);
const DATA_DIR = join(tmpdir(), 'kvtier-engine-tests');

const progress = (line: string) => process.stderr.write(`[bench storage-codecs] ${line}\n`);

export async function run(): Promise<Record<string, number | string>> {
  const out: Record<string, number | string> = {};
  const small = await loadEngine('synthetic:small', { dataDir: DATA_DIR, threads: 2, poolBytes: 64 * 2 ** 20 });
  let exported: Uint8Array;
  try {
    const seq = small.createSequence();
    seq.prefill(Array.from({ length: 64 }, (_, i) => (i * 2654435761) % small.vocabSize));
    [exported] = seq.exportBlocks(0, 1);
    seq.free();
    for (const q of measureCodecQuality(small, ['none', ...CODECS])) record(out, q.codec, '', q);
  } finally {
    small.destroy();
  }
  const ds = await loadEngine(ensureDeepseekModel('deepseek-tiny', { dataDir: DATA_DIR, shape: 'v3', weightType: 'f16' }), { dataDir: DATA_DIR, threads: 2, poolBytes: 16 * 2 ** 20 });
  try {
    for (const q of measureCodecQuality(ds, CODECS)) record(out, q.codec, '_mla', q);
  } finally {
    ds.destroy();
  }
  const codec = await BlockCodec.create();
  for (const name of CODECS) {
    const rates = codecRates(codec, name, exported);
    out[`codec_${name}_ratio`] = round(rates.ratio, 4);
    out[`codec_${name}_decode_gbps`] = round(rates.decode, 3);
    out[`codec_${name}_block_decode_gbps`] = round(rates.blockDecode, 3);
    out[`codec_${name}_encode_gbps`] = round(rates.encode, 3);
    progress(`${name}: ratio ${rates.ratio.toFixed(4)}, decode ${rates.decode.toFixed(2)} GB/s (block ${rates.blockDecode.toFixed(2)}), encode ${rates.encode.toFixed(2)} GB/s`);
  }
  const load = await loadRates();
  out.codec_none_load_payload_gbps = round(load.none, 3);
  for (const name of CODECS) {
    out[`codec_${name}_load_payload_gbps`] = round(load.codecs[name].rate, 3);
    out[`codec_${name}_load_vs_none`] = round(load.codecs[name].ratio, 3);
  }
  out.codec_statistic = `median of ${ROUNDS} rounds (decode/encode, one core), of ${LOAD_PAIRS} codec/none pairs (load, ${LOAD_BLOCKS} blocks)`;
  return out;
}

function record(out: Record<string, number | string>, name: string, suffix: string, q: ReturnType<typeof measureCodecQuality>[number]): void {
  out[`codec_${name}_max_logit_dev${suffix}`] = Number(q.maxLogitDev.toPrecision(3));
  out[`codec_${name}_mean_logit_dev${suffix}`] = Number(q.meanLogitDev.toPrecision(3));
  out[`codec_${name}_rel_max_logit_dev${suffix}`] = Number(q.relMaxLogitDev.toPrecision(3));
  out[`codec_${name}_greedy_agree${suffix}`] = `${q.greedyAgree}/${q.greedySteps}${q.greedyNearTie ? ' near-tie' : ''}`;
  progress(`${name}${suffix}: max |Δlogit| ${q.maxLogitDev.toExponential(2)}, mean ${q.meanLogitDev.toExponential(2)}, greedy ${q.greedyAgree}/${q.greedySteps}`);
}

/** Decode (kernel and whole block file) and encode rates on the engine's own block, one core. */
function codecRates(codec: BlockCodec, name: BlockCodecName, payload: Uint8Array): { ratio: number; decode: number; blockDecode: number; encode: number } {
  const stored = compressPayload(name, DEMO_LAYOUT, 64, payload);
  if (stored === null) throw new Error(`${name} refused the exported block`);
  const file = codec.encode({ key: new Uint8Array(16).fill(1), parentKey: new Uint8Array(16), modelFingerprint: 'bench-codecs', tokens: new Uint32Array(64), layout: DEMO_LAYOUT, payload }, name);
  const reps = Math.max(8, Math.round(DECODE_BYTES_PER_ROUND / payload.byteLength));
  const out = new Uint8Array(payload.byteLength);
  const decode: number[] = [];
  const blockDecode: number[] = [];
  const encode: number[] = [];
  const cpuMs = (fn: () => void): number => {
    const c0 = process.cpuUsage();
    fn();
    const c = process.cpuUsage(c0);
    return (c.user + c.system) / 1000;
  };
  for (let r = 0; r < ROUNDS + 1; r++) {
    const decodeMs = cpuMs(() => {
      for (let i = 0; i < reps; i++) decompressPayloadInto(out, name, DEMO_LAYOUT, 64, stored);
    });
    const blockMs = cpuMs(() => {
      for (let i = 0; i < reps; i++) if (codec.decode(file).payload.byteLength !== payload.byteLength) throw new Error('decode returned another length');
    });
    const encodeReps = Math.max(2, reps >> 3);
    const encodeMs = cpuMs(() => {
      for (let i = 0; i < encodeReps; i++) compressPayload(name, DEMO_LAYOUT, 64, payload);
    });
    if (r === 0) continue;
    decode.push((reps * payload.byteLength) / (decodeMs / 1000) / 1e9);
    blockDecode.push((reps * payload.byteLength) / (blockMs / 1000) / 1e9);
    encode.push((encodeReps * payload.byteLength) / (encodeMs / 1000) / 1e9);
  }
  return { ratio: stored.byteLength / payload.byteLength, decode: middleSample(decode), blockDecode: middleSample(blockDecode), encode: middleSample(encode) };
}

/** Smooth f16 values with per-channel magnitudes (a random-byte payload would be NaN-riddled and stored raw). */
function floatPayloads(count: number): Uint8Array[] {
  const n = payloadBytesFor(DEMO_LAYOUT, 64) / 2;
  let s = 7;
  return Array.from({ length: count }, () => {
    const h = new Uint16Array(n);
    for (let i = 0; i < n; i++) {
      s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
      h[i] = f32ToF16((s / 2 ** 32 - 0.5) * (0.2 + (i % 64) * 0.05));
    }
    return new Uint8Array(h.buffer);
  });
}

async function loadRates(): Promise<{ none: number; codecs: Record<string, { rate: number; ratio: number }> }> {
  const root = await mkdtemp(join(process.env.KVTIER_BENCH_DIR ?? tmpdir(), 'kvtier-bench-codecs-'));
  const logger: KvTierLogger = { warn: (fields, message) => progress(`warn ${message} ${JSON.stringify(fields)}`), info: () => {} };
  const tokens = new Uint32Array(LOAD_BLOCKS * 64).map((_, i) => (i * 2654435761) % 151_936);
  const payloadBytes = payloadBytesFor(DEMO_LAYOUT, 64);
  const payloads = floatPayloads(LOAD_BLOCKS);
  const scope = { tenant: 'bench', trafficClass: 'chat' };
  const sides = new Map<BlockCodecName, { tier: KvTier; store: FsBlobStore }>();
  try {
    for (const name of ['none', ...CODECS] as BlockCodecName[]) {
      const store = await FsBlobStore.open({ dir: join(root, name, 'blocks') });
      const tier = await KvTier.open({ dataDir: join(root, name, 'node'), store, hotCacheBytes: 0, writeBehindMaxBytes: 1 << 30, logger });
      sides.set(name, { tier, store });
      await tier.policy.update((doc) => ({ ...doc, codec: name }));
      tier.store({ namespace: tier.namespace({ modelFingerprint: 'bench-codecs', tenantSalt: 'bench' }), tokens, layout: DEMO_LAYOUT, ...scope, payloads });
      await tier.flush();
      if (tier.stats().blocksWritten !== LOAD_BLOCKS) throw new Error(`${name}: stored ${tier.stats().blocksWritten} of ${LOAD_BLOCKS} blocks`);
    }
    progress(`load: ${LOAD_BLOCKS} blocks × ${(payloadBytes / 1024).toFixed(0)} KiB per codec, ${LOAD_PAIRS} pairs + 1 warm-up, under ${root}`);
    const loadRate = async (name: BlockCodecName): Promise<number> => {
      const { tier } = sides.get(name)!;
      const hit = await tier.lookup(tier.namespace({ modelFingerprint: 'bench-codecs', tenantSalt: 'bench' }), tokens, scope);
      const t0 = performance.now();
      const loaded = await tier.load(hit);
      const ms = performance.now() - t0;
      if (loaded.blocks.length !== LOAD_BLOCKS) throw new Error(`${name}: load returned ${loaded.blocks.length} of ${LOAD_BLOCKS} blocks (${loaded.stoppedAt?.code})`);
      // As the engine does after importBlocks: the buffers are recycled for the next load.
      if (process.env.KVTIER_BENCH_LOAD_RELEASE !== '0') loaded.release();
      return (LOAD_BLOCKS * payloadBytes) / (ms / 1000) / 1e9;
    };
    const none: number[] = [];
    const per: Record<string, { rates: number[]; ratios: number[] }> = Object.fromEntries(CODECS.map((c) => [c, { rates: [], ratios: [] }]));
    for (let pair = 0; pair < LOAD_PAIRS + 1; pair++) {
      for (const name of CODECS) {
        // Who goes first alternates, so a burst of background load lands on both alike.
        const first = pair % 2 === 0;
        const a = first ? await loadRate('none') : await loadRate(name);
        const b = first ? await loadRate(name) : await loadRate('none');
        const [raw, coded] = first ? [a, b] : [b, a];
        if (pair === 0) continue;
        none.push(raw);
        per[name].rates.push(coded);
        per[name].ratios.push(coded / raw);
      }
    }
    return { none: middleSample(none), codecs: Object.fromEntries(CODECS.map((c) => [c, { rate: middleSample(per[c].rates), ratio: middleSample(per[c].ratios) }])) };
  } finally {
    for (const { tier, store } of sides.values()) {
      await tier.close();
      await store.close();
    }
    await rm(root, { recursive: true, force: true });
  }
}

function round(value: number, digits: number): number {
  return Number(value.toFixed(digits));
}

if (import.meta.url === `file://${process.argv[1]}`) {
  console.log(JSON.stringify(await run(), null, 2));
}
