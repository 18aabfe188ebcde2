/**
 * The deepseek4 forward's row ops on the CPU kernels, batched over a chunk's T
 * rows (src/dsv4-rows-napi.cc; shapes and order in each op's header under
 * src/ops/). Each answers false when the addon predates it, and the caller's
 * TypeScript twin (inference-core/engine/deepseek4-math.ts, deepseek4-ffn.ts)
 * computes the row instead; `ref` runs the plain one-thread C++ twin.
 */
import type { NativeAddon } from './addon-types.ts';
import { loadAddon, wrapNativeError } from './load-addon.ts';

const NO_WEIGHT = new Float32Array(0);

function call(name: keyof NativeAddon, run: (a: NativeAddon) => void): boolean {
  const a = loadAddon();
  if (typeof a[name] !== 'function') return false;
  try {
    run(a);
  } catch (e) {
    wrapNativeError(e);
  }
  return true;
}

/** rmsnorm(x)·w of T rows of n (src/ops/dsv4-rmsnorm.h); w null: no weight; out may be x. */
export function dsv4RmsNormRows(out: Float32Array, x: Float32Array, w: Float32Array | null, T: number, n: number, eps: number, ref = false): boolean {
  return call('dsv4RmsNormRows', (a) => (ref ? a.dsv4RmsNormRowsRef : a.dsv4RmsNormRows)(out, x, w ?? NO_WEIGHT, T, n, eps));
}

/** Hyper-connection pre / post / comb of T rows from their mixes (src/ops/dsv4-hc-weights.h). */
export function dsv4HcWeights(
  pre: Float32Array, post: Float32Array, comb: Float32Array, mixes: Float32Array, scale: Float32Array, base: Float32Array,
  T: number, hc: number, eps: number, iters: number, withComb: boolean, ref = false,
): boolean {
  return call('dsv4HcWeights', (a) => (ref ? a.dsv4HcWeightsRef : a.dsv4HcWeights)(pre, post, comb, mixes, scale, base, T, hc, eps, iters, withComb));
}

/** out[i] = clamped SwiGLU of g[i], u[i] for i < n (src/ops/dsv4-swiglu.h). */
export function dsv4SwigluClamp(out: Float32Array, g: Float32Array, u: Float32Array, n: number, limit: number, ref = false): boolean {
  return call('dsv4SwigluClamp', (a) => (ref ? a.dsv4SwigluClampRef : a.dsv4SwigluClamp)(out, g, u, n, limit));
}

/** out[t] = Σ_k y[t·K + k]·w[t][k] + sy[t], in that order (src/ops/dsv4-moe-combine.h). */
export function dsv4MoeCombine(out: Float32Array, y: Float32Array, w: Float32Array, sy: Float32Array, T: number, K: number, d: number, ref = false): boolean {
  return call('dsv4MoeCombine', (a) => (ref ? a.dsv4MoeCombineRef : a.dsv4MoeCombine)(out, y, w, sy, T, K, d));
}
