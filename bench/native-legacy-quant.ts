// Legacy-quant matmul (Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, IQ4_XS) beside
// Q8_0 in the same run: GEMV (M=1) GB/s of packed weight streamed and
// GEMM (M=256) GFLOP/s, one thread, in CPU time (user+system of this
// process, fewest of 9 samples: the kernel's own cost on a busy shared machine).
// Shapes: ffn_up of a ~90M llama (N=2048, K=768) and a 4096×4096 layer
// (9-18 MB of weights: past L2, inside this machine's L3).
// Part of `npm run bench -- native-kernels`; KVT_BENCH_ONLY=legacy-quant runs only this.
import { GGML_TYPE, nativeAddon, WEIGHT_BLOCK, type WeightDType } from '../native/index.ts';
import { rand } from './random-inputs.ts';

const addon = nativeAddon();

/**
 * Fewest CPU seconds per call over 9 samples of ≥ minSec/9 each: on a shared,
 * busy machine the fastest sample is the one least disturbed by other
 * processes (cache evictions, frequency), i.e. closest to the kernel's cost.
 */
function cpuTime(fn: () => void, minSec = 0.9): number {
  fn();
  let best = Infinity;
  for (let s = 0; s < 9; s++) {
    let calls = 0;
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    while (calls < 2 || (performance.now() - t0) / 1000 < minSec / 9) {
      fn();
      calls++;
    }
    const c = process.cpuUsage(c0);
    best = Math.min(best, (c.user + c.system) / 1e6 / calls);
  }
  return best;
}

export const LEGACY_BENCH_TYPES: WeightDType[] = ['q8_0', 'q4_0', 'q4_1', 'q5_0', 'q5_1', 'iq4_nl', 'iq4_xs'];

export function legacyQuantMatmul(out: Record<string, number | string>, types = LEGACY_BENCH_TYPES): void {
  const threadsBefore = addon.info().threads;
  addon.setThreads(1);
  try {
    for (const [name, n, k, ms] of [['ffn_up', 2048, 768, [1, 256]], ['l4096', 4096, 4096, [1]]] as const) {
      for (const dtype of types) {
        const t = GGML_TYPE[dtype];
        const b = WEIGHT_BLOCK[dtype];
        const bytes = new Uint8Array(((n * k) / b.elems) * b.bytes);
        addon.quantize(bytes, rand(n * k, n + k), t, n * k);
        const packed = addon.packWeight(t, n, k, bytes);
        for (const m of ms) {
          const x = rand(m * k, m);
          const o = new Float32Array(m * n);
          const sec = cpuTime(() => addon.matmul(o, x, packed, t, n, k, m));
          const key = `percore_${m === 1 ? 'gemv' : 'gemm'}_${dtype}_${name}`;
          out[`${key}_gflops`] = Number(((2 * m * n * k) / sec / 1e9).toFixed(2));
          if (m === 1) out[`${key}_gbps`] = Number((packed.byteLength / sec / 1e9).toFixed(2));
          process.stderr.write(`${key}: ${out[`${key}_gflops`]} GFLOP/s${m === 1 ? `, ${out[`${key}_gbps`]} GB/s` : ''}\n`);
        }
      }
    }
  } finally {
    addon.setThreads(threadsBefore);
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const out: Record<string, number | string> = { isa: addon.info().isa };
  const only = process.env.KVT_BENCH_TYPES?.split(',') as WeightDType[] | undefined;
  legacyQuantMatmul(out, only);
  console.log(JSON.stringify(out));
}
