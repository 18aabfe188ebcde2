// Micro-benchmark of the CPU kernels at the shapes of a ~90M llama
// (d=768, ffn 2048, 4 kv heads × 64, vocab 8192): GFLOP/s of GEMM (prefill,
// M=256) and GEMV (decode, M=1, also GB/s of weight streaming) per weight
// dtype, attention over paged KV, and the thread-pool hand-off latency.
// Progress goes to stderr; run() returns one flat record.
import { createRequire } from 'node:module';
import { mkdirSync } from 'node:fs';
import path from 'node:path';

import { CpuBackend, GGML_TYPE, nativeAddon, PAGE_TOKENS, type NativeAddon, type WeightDType } from '../native/index.ts';
import { CpuTensor } from '../native/cpu-handles.ts';
import { loadEngine } from '../inference-core/index.ts';
import { randomTokens } from '../test/inference-core/engine-fixtures.ts';
import { legacyQuantMatmul } from './native-legacy-quant.ts';
import { rand } from './random-inputs.ts';
import { cpuTime, time } from './call-timing.ts';

const addon = nativeAddon();

function rowBytes(dtype: WeightDType, cols: number): number {
  return dtype === 'f32' ? cols * 4 : dtype === 'q8_0' ? (cols / 32) * 34 : cols * 2;
}

export async function run(): Promise<Record<string, number | string>> {
  const out: Record<string, number | string> = {};
  const info = addon.info();
  out.isa = info.isa;
  out.threads = info.threads;
  if (process.env.KVT_BENCH_ONLY === 'legacy-quant') {
    legacyQuantMatmul(out);
    return out;
  }
  await cachedTurnAttention(out);
  if (process.env.KVT_BENCH_ONLY === 'cached-turn') return out;
  const dtypes: WeightDType[] = process.env.KVT_BENCH_QUICK ? [] : ['f32', 'f16', 'bf16', 'q8_0'];
  const shapes: [string, number, number][] = [['ffn_up', 2048, 768], ['ffn_down', 768, 2048], ['output', 8192, 768]];
  for (const dtype of dtypes) {
    const t = GGML_TYPE[dtype];
    for (const [name, n, k] of shapes) {
      const src = rand(n * k, n + k);
      const bytes = new Uint8Array(rowBytes(dtype, k) * n);
      addon.quantize(bytes, src, t, n * k);
      const packed = addon.packWeight(t, n, k, bytes);
      for (const m of [1, 256]) {
        const x = rand(m * k, m);
        const o = new Float32Array(m * n);
        const sec = time(() => addon.matmul(o, x, packed, t, n, k, m));
        const gflops = (2 * m * n * k) / sec / 1e9;
        const key = `${m === 1 ? 'gemv' : 'gemm'}_${dtype}_${name}`;
        out[`${key}_gflops`] = Number(gflops.toFixed(2));
        if (m === 1) out[`${key}_gbps`] = Number((bytes.length / sec / 1e9).toFixed(2));
        process.stderr.write(`${key}: ${gflops.toFixed(2)} GFLOP/s\n`);
      }
    }
  }
  // Whole-model weight sweep: every matmul of a 12-layer d=768 llama with
  // distinct weights (~75M params + output), so decode streams from DRAM as it
  // does for real. ms per token (M=1) and per 64-token chunk (M=64).
  for (const dtype of ['f16', 'q8_0'] as WeightDType[]) {
    const t = GGML_TYPE[dtype];
    const layerShapes: [number, number][] = [[768, 768], [256, 768], [256, 768], [768, 768], [2048, 768], [2048, 768], [768, 2048]];
    const weights: { packed: ArrayBuffer; n: number; k: number }[] = [];
    let bytesTotal = 0;
    let flopsPerRow = 0;
    for (let l = 0; l < 12; l++) {
      for (const [n, k] of layerShapes) {
        const src = rand(n * k, l * 7 + n);
        const bytes = new Uint8Array(rowBytes(dtype, k) * n);
        addon.quantize(bytes, src, t, n * k);
        weights.push({ packed: addon.packWeight(t, n, k, bytes), n, k });
        bytesTotal += bytes.length;
        flopsPerRow += 2 * n * k;
      }
    }
    {
      const [n, k] = [8192, 768];
      const bytes = new Uint8Array(rowBytes(dtype, k) * n);
      addon.quantize(bytes, rand(n * k, 5), t, n * k);
      weights.push({ packed: addon.packWeight(t, n, k, bytes), n, k });
      bytesTotal += bytes.length;
      flopsPerRow += 2 * n * k;
    }
    for (const m of [1, 64]) {
      const x = rand(m * 2048, 9);
      const o = new Float32Array(m * 8192);
      const sec = time(() => {
        for (const w of weights) addon.matmul(o, x, w.packed, t, w.n, w.k, m);
      }, 1);
      const key = `model_sweep_${dtype}_m${m}`;
      out[`${key}_ms`] = Number((sec * 1000).toFixed(2));
      out[`${key}_gflops`] = Number(((flopsPerRow * m) / sec / 1e9).toFixed(2));
      if (m === 1) out[`${key}_gbps`] = Number((bytesTotal / sec / 1e9).toFixed(2));
      process.stderr.write(`${key}: ${(sec * 1000).toFixed(2)} ms (${((flopsPerRow * m) / sec / 1e9).toFixed(1)} GFLOP/s)\n`);
    }
  }

  // Per-core figures in CPU time (one thread), robust to a busy machine.
  const threadsBefore = info.threads;
  addon.setThreads(1);
  try {
    for (const dtype of ['f16', 'q8_0', 'f32', 'bf16'] as WeightDType[]) {
      const t = GGML_TYPE[dtype];
      const [n, k] = [2048, 768];
      const bytes = new Uint8Array(rowBytes(dtype, k) * n);
      addon.quantize(bytes, rand(n * k, 3), t, n * k);
      const packed = addon.packWeight(t, n, k, bytes);
      for (const m of [1, 256]) {
        const x = rand(m * k, m);
        const o = new Float32Array(m * n);
        const sec = cpuTime(() => addon.matmul(o, x, packed, t, n, k, m));
        const key = `percore_${m === 1 ? 'gemv' : 'gemm'}_${dtype}_ffn_up_gflops`;
        out[key] = Number(((2 * m * n * k) / sec / 1e9).toFixed(2));
        process.stderr.write(`${key}: ${out[key]}\n`);
      }
    }
    for (const dtype of ['f16', 'q8_0'] as WeightDType[]) {
      const t = GGML_TYPE[dtype];
      const weights: { packed: ArrayBuffer; n: number; k: number }[] = [];
      let bytesTotal = 0;
      for (let l = 0; l < 12; l++) {
        for (const [n, k] of [[768, 768], [256, 768], [256, 768], [768, 768], [2048, 768], [2048, 768], [768, 2048]]) {
          const bytes = new Uint8Array(rowBytes(dtype, k) * n);
          addon.quantize(bytes, rand(n * k, l + n), t, n * k);
          weights.push({ packed: addon.packWeight(t, n, k, bytes), n, k });
          bytesTotal += bytes.length;
        }
      }
      const x = rand(2048, 1);
      const o = new Float32Array(2048);
      const sec = cpuTime(() => {
        for (const w of weights) addon.matmul(o, x, w.packed, t, w.n, w.k, 1);
      }, 1);
      out[`percore_layers_sweep_${dtype}_m1_ms`] = Number((sec * 1000).toFixed(2));
      out[`percore_layers_sweep_${dtype}_m1_gbps`] = Number((bytesTotal / sec / 1e9).toFixed(2));
      process.stderr.write(`percore 12-layer sweep ${dtype}: ${(sec * 1000).toFixed(2)} ms, ${(bytesTotal / sec / 1e9).toFixed(2)} GB/s\n`);
    }
  } finally {
    addon.setThreads(threadsBefore);
  }

  legacyQuantMatmul(out); // Q4_0..IQ4_XS beside Q8_0, per core (native-legacy-quant.ts)

  // attention: 12 heads / 4 kv heads × 64, one layer
  const backend = new CpuBackend(addon);
  const [heads, kvHeads, D, T] = [12, 4, 64, 512];
  const pool = backend.createKvPool({ layers: 1, kvHeads, headDim: D, pages: T / PAGE_TOKENS });
  const table = Int32Array.from({ length: T / PAGE_TOKENS }, (_, i) => i);
  const kv = new CpuTensor(rand(T * kvHeads * D, 1));
  backend.kvWrite(pool, 0, table, 0, T, kv, kv);
  const q = new CpuTensor(rand(T * heads * D, 2));
  const o = new CpuTensor(new Float32Array(T * heads * D));
  const prefill = time(() => backend.attention(o, q, pool, 0, heads, 0.125, [{ blockTable: table, pos0: 0, queries: T }]));
  out.attention_prefill512_ms = Number((prefill * 1000).toFixed(3));
  addon.setThreads(1);
  out.percore_attention_prefill512_ms = Number(
    (cpuTime(() => backend.attention(o, q, pool, 0, heads, 0.125, [{ blockTable: table, pos0: 0, queries: T }])) * 1000).toFixed(3));
  addon.setThreads(threadsBefore);
  const q1 = new CpuTensor(rand(heads * D, 3));
  const o1 = new CpuTensor(new Float32Array(heads * D));
  const decode = time(() => backend.attention(o1, q1, pool, 0, heads, 0.125, [{ blockTable: table, pos0: T - 1, queries: 1 }]));
  out.attention_decode_ctx512_us = Number((decode * 1e6).toFixed(2));
  out.handoff_ns = Number(addon.handoffNs(20000).toFixed(0));
  process.stderr.write(`attention prefill 512: ${out.attention_prefill512_ms} ms, decode: ${out.attention_decode_ctx512_us} us, handoff ${out.handoff_ns} ns\n`);
  return out;
}

/**
 * The attention of a cached chat turn: 120 new query rows at positions
 * 2600..2719 over f16 KV, synthetic:small's dims (12 heads / 4 kv heads × 64),
 * one layer, 1 and 2 threads; and end to end, prefill(120) on synthetic:small
 * after importing 40 cached blocks and prefilling 40 more tokens (2600 cached).
 * Medians; with 1 thread in CPU time, with 2 in wall time.
 * KVT_BENCH_ONLY=cached-turn runs only this part of the benchmark.
 *
 * KVT_BENCH_BASELINE_ADDON=<path to another build of kvtier_native.node> adds
 * the same figures for that build in the same run (rounds alternate between
 * the two) and `*_speedup` = baseline median ÷ this build's median.
 */
async function cachedTurnAttention(out: Record<string, number | string>): Promise<void> {
  const baselinePath = process.env.KVT_BENCH_BASELINE_ADDON;
  const base = baselinePath ? (createRequire(import.meta.url)(path.resolve(baselinePath)) as NativeAddon) : null;
  const builds: [string, NativeAddon][] = base ? [['new', addon], ['baseline', base]] : [['new', addon]];
  const threadsBefore = addon.info().threads;
  const [heads, kvHeads, D, pos0, rows] = [12, 4, 64, 2600, 120];
  const T = pos0 + rows;
  const nPages = Math.ceil(T / PAGE_TOKENS);
  const pool = new CpuBackend(addon).createKvPool({ layers: 1, kvHeads, headDim: D, pages: nPages, dtype: 'f16' });
  const table = Int32Array.from({ length: nPages }, (_, i) => i);
  const kvData = new CpuTensor(rand(T * kvHeads * D, 21));
  new CpuBackend(addon).kvWrite(pool, 0, table, 0, T, kvData, new CpuTensor(rand(T * kvHeads * D, 22)));
  const q = new CpuTensor(rand(rows * heads * D, 23));
  const rounds = Number(process.env.KVT_BENCH_ROUNDS ?? 7);
  const median = (a: number[]) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];
  /**
   * Median ms per call of each build over `rounds` rounds of `calls` calls,
   * the builds alternating within a round (order flipped every round). With 1
   * thread a call is timed in CPU time (user+system: robust to waiting for a
   * core on the shared machine), with more in wall time.
   */
  const compare = (setup: (a: NativeAddon) => () => void, threads: number, calls: number): Map<string, number> => {
    const fns = builds.map(([name, a]) => [name, setup(a)] as const);
    const per = new Map<string, number[]>(builds.map(([n]) => [n, []]));
    for (let r = 0; r < rounds; r++) {
      for (const [name, fn] of r % 2 ? [...fns].reverse() : fns) {
        fn();
        for (let i = 0; i < calls; i++) {
          const c0 = process.cpuUsage();
          const t0 = performance.now();
          fn();
          const c = process.cpuUsage(c0);
          per.get(name)!.push(threads === 1 ? (c.user + c.system) / 1e3 : performance.now() - t0);
        }
      }
    }
    return new Map([...per].map(([n, s]) => [n, median(s)]));
  };
  for (const threads of [1, 2]) {
    for (const [, a] of builds) a.setThreads(threads);
    const res = compare((a) => {
      const be = new CpuBackend(a);
      const o = new CpuTensor(new Float32Array(rows * heads * D));
      return () => be.attention(o, q, pool, 0, heads, 0.125, [{ blockTable: table, pos0, queries: rows }]);
    }, threads, 8);
    for (const [name, ms] of res) {
      out[`attention_turn120_at2600_t${threads}${name === 'new' ? '' : '_baseline'}_ms`] = Number(ms.toFixed(3));
    }
    if (base) out[`attention_turn120_at2600_t${threads}_speedup`] = Number((res.get('baseline')! / res.get('new')!).toFixed(3));
    process.stderr.write(`attention 120 rows @2600, ${threads} thread(s): ${JSON.stringify(Object.fromEntries(res))}\n`);
  }
  // end to end on synthetic:small
  const dataDir = process.env.KVTIER_DATA_DIR ?? 'data';
  mkdirSync(dataDir, { recursive: true });
  const engines = new Map<string, Awaited<ReturnType<typeof loadEngine>>>();
  for (const [name, a] of builds) engines.set(name, await loadEngine('synthetic:small', { dataDir, kvDtype: 'f16', backend: new CpuBackend(a) }));
  const first = engines.get('new')!;
  const prompt = randomTokens(T, first.vocabSize, 5);
  const src = first.createSequence();
  src.prefill(prompt.slice(0, 40 * PAGE_TOKENS));
  const blocks = src.exportBlocks(0, 40);
  src.free();
  const reps = Number(process.env.KVT_BENCH_E2E_REPS ?? 3);
  for (const threads of [1, 2]) {
    for (const [, a] of builds) a.setThreads(threads);
    // only prefill(120) is timed (CPU time with 1 thread, as in compare)
    const samples = new Map<string, number[]>(builds.map(([n]) => [n, []]));
    for (let r = 0; r < rounds; r++) {
      for (const [name] of r % 2 ? [...builds].reverse() : builds) {
        const engine = engines.get(name)!;
        for (let i = 0; i < reps; i++) {
          const seq = engine.createSequence();
          seq.importBlocks(blocks);
          seq.prefill(prompt.slice(40 * PAGE_TOKENS, pos0));
          const c0 = process.cpuUsage();
          const t0 = performance.now();
          seq.prefill(prompt.slice(pos0, T));
          const c = process.cpuUsage(c0);
          samples.get(name)!.push(threads === 1 ? (c.user + c.system) / 1e3 : performance.now() - t0);
          seq.free();
        }
      }
    }
    for (const [name, s] of samples) {
      out[`e2e_small_prefill120_after2600_t${threads}${name === 'new' ? '' : '_baseline'}_ms`] = Number(median(s).toFixed(2));
    }
    if (base) {
      out[`e2e_small_prefill120_after2600_t${threads}_speedup`] = Number((median(samples.get('baseline')!) / median(samples.get('new')!)).toFixed(3));
    }
    process.stderr.write(`e2e prefill(120) after 2600 cached, ${threads} thread(s): ${JSON.stringify(Object.fromEntries([...samples].map(([n, s]) => [n, median(s)])))}\n`);
  }
  for (const [, e] of engines) e.destroy();
  for (const [, a] of builds) a.setThreads(threadsBefore);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  run().then((r) => console.log(JSON.stringify(r)));
}
