/**
 * The scalar ops of the deepseek4 forward, each as ggml's CPU op computes it
 * (f32 storage, sums in f64): RMS norm, mat-vec on [n_in, n_out] weights,
 * NORMAL-mode rope with YaRN on a slice of a head (ggml_rope_ext +
 * ggml_rope_set_offset; inverse = ggml_rope_ext_back), sqrt(softplus), the
 * clamped SwiGLU (ggml_swiglu_clamp), softmax with an attention sink
 * (ggml_soft_max_add_sinks) and the Sinkhorn normalisation of
 * ggml_dsv4_hc_comb.
 */
import type { Deepseek4Rope } from './deepseek4-config.ts';

/** y = rmsnorm(x) · w (w optional), over `n` values at x[off..]. */
export function rmsNorm(x: Float32Array, eps: number, w?: Float32Array, out: Float32Array = new Float32Array(x.length), off = 0, n = x.length): Float32Array {
  let ss = 0;
  for (let i = 0; i < n; i++) ss += x[off + i]! * x[off + i]!;
  const scale = Math.fround(1 / Math.sqrt(Math.fround(ss / n) + eps));
  for (let i = 0; i < n; i++) out[off + i] = w ? x[off + i]! * scale * w[i]! : x[off + i]! * scale;
  return out;
}

/** y[r] = Σ_i W[r·nIn + i] x[xOff + i] for rows r of a [nIn, nOut] weight (row offset rowOff). */
export function matVec(w: Float32Array, nIn: number, nOut: number, x: Float32Array, xOff = 0, out: Float32Array = new Float32Array(nOut), rowOff = 0): Float32Array {
  for (let r = 0; r < nOut; r++) {
    const base = (rowOff + r) * nIn;
    let s = 0;
    for (let i = 0; i < nIn; i++) s += w[base + i]! * x[xOff + i]!;
    out[r] = s;
  }
  return out;
}

function yarnCorrDim(nDims: number, nCtxOrig: number, nRot: number, base: number): number {
  return (nDims * Math.log(nCtxOrig / (nRot * 2 * Math.PI))) / (2 * Math.log(base));
}

/** cos/sin per pair of an n_dims rope at position p (ggml_rope_cache_init with rope_yarn). */
export function ropeCache(p: number, nDims: number, r: Deepseek4Rope, inverse = false): Float32Array {
  const cache = new Float32Array(nDims);
  const thetaScale = Math.fround(Math.pow(r.freqBase, -2 / nDims));
  let lo = 0;
  let hi = 0;
  if (r.extFactor !== 0) {
    lo = Math.max(0, Math.floor(yarnCorrDim(nDims, r.nCtxOrig, r.betaFast, r.freqBase)));
    hi = Math.min(nDims - 1, Math.ceil(yarnCorrDim(nDims, r.nCtxOrig, r.betaSlow, r.freqBase)));
  }
  let theta = p;
  for (let i0 = 0; i0 < nDims; i0 += 2) {
    const extrap = theta;
    const interp = r.freqScale * extrap;
    let t = interp;
    let mscale = r.attnFactor;
    if (r.extFactor !== 0) {
      const y = (Math.floor(i0 / 2) - lo) / Math.max(0.001, hi - lo);
      const ramp = (1 - Math.min(1, Math.max(0, y))) * r.extFactor;
      t = interp * (1 - ramp) + extrap * ramp;
      mscale *= 1 + 0.1 * Math.log(1 / r.freqScale);
    }
    cache[i0] = Math.cos(t) * mscale;
    cache[i0 + 1] = Math.sin(t) * mscale * (inverse ? -1 : 1);
    theta = Math.fround(theta * thetaScale);
  }
  return cache;
}

interface RopeRows {
  p0: number;
  T: number;
  nDims: number;
  rows: Float32Array[];
}
const ropeMemo = new WeakMap<Deepseek4Rope, [RopeRows | null, RopeRows | null]>();

/**
 * ropeCache of positions p0..p0+T−1 (row t for p0 + t), the same values; the
 * last (p0, T) per rope and direction is kept, so the layers of one call share
 * one table (read only: ropeApply never writes its cache).
 */
export function ropeRows(p0: number, T: number, nDims: number, r: Deepseek4Rope, inverse = false): Float32Array[] {
  let m = ropeMemo.get(r);
  if (!m) ropeMemo.set(r, (m = [null, null]));
  const hit = m[inverse ? 1 : 0];
  if (hit && hit.p0 === p0 && hit.T === T && hit.nDims === nDims) return hit.rows;
  const rows = Array.from({ length: T }, (_, t) => ropeCache(p0 + t, nDims, r, inverse));
  m[inverse ? 1 : 0] = { p0, T, nDims, rows };
  return rows;
}

/** NORMAL-mode rotation of x[off + offs .. off + offs + nDims) in place (adjacent pairs). */
export function ropeApply(x: Float32Array, off: number, cache: Float32Array): void {
  for (let i0 = 0; i0 < cache.length; i0 += 2) {
    const c = cache[i0]!;
    const s = cache[i0 + 1]!;
    const x0 = x[off + i0]!;
    const x1 = x[off + i0 + 1]!;
    x[off + i0] = x0 * c - x1 * s;
    x[off + i0 + 1] = x0 * s + x1 * c;
  }
}

export function sigmoid(x: number): number {
  return 1 / (1 + Math.exp(-x));
}

/** ggml_softplus: log(1 + e^x), x itself past 20. */
export function softplus(x: number): number {
  return x > 20 ? x : Math.log1p(Math.exp(x));
}

/** ggml_swiglu_clamp: silu(min(g, L)) · clamp(u, -L, L); L ≤ 1e-6 means no clamp (plain SwiGLU). */
export function swigluClamp(g: number, u: number, limit: number): number {
  if (limit > 1e-6) {
    g = Math.min(g, limit);
    u = Math.min(Math.max(u, -limit), limit);
  }
  return (g / (1 + Math.exp(-g))) * u;
}

/**
 * Hyper-connection mix weights from `mixes` ((2+hc)·hc values): pre (hc), post (hc)
 * and comb (hc×hc at [dst + hc·src]) after Sinkhorn, as ggml_dsv4_hc_comb.
 */
export function hcWeights(mixes: Float32Array, scale: Float32Array, base: Float32Array, hc: number, eps: number, iters: number, withComb: boolean): { pre: Float32Array; post: Float32Array; comb: Float32Array } {
  const pre = new Float32Array(hc);
  const post = new Float32Array(hc);
  for (let h = 0; h < hc; h++) {
    pre[h] = sigmoid(mixes[h]! * scale[0]! + base[h]!) + eps;
    if (withComb) post[h] = 2 * sigmoid(mixes[hc + h]! * scale[1]! + base[hc + h]!);
  }
  const comb = new Float32Array(hc * hc);
  if (!withComb) return { pre, post, comb };
  for (let src = 0; src < hc; src++) {
    let max = -Infinity;
    for (let dst = 0; dst < hc; dst++) {
      const idx = dst + hc * src;
      const v = mixes[2 * hc + idx]! * scale[2]! + base[2 * hc + idx]!;
      comb[idx] = v;
      if (v > max) max = v;
    }
    let sum = 0;
    for (let dst = 0; dst < hc; dst++) {
      const idx = dst + hc * src;
      comb[idx] = Math.exp(comb[idx]! - max);
      sum += comb[idx]!;
    }
    for (let dst = 0; dst < hc; dst++) comb[dst + hc * src] = comb[dst + hc * src]! / sum + eps;
  }
  const normCols = () => {
    for (let dst = 0; dst < hc; dst++) {
      let s = eps;
      for (let src = 0; src < hc; src++) s += comb[dst + hc * src]!;
      for (let src = 0; src < hc; src++) comb[dst + hc * src] = comb[dst + hc * src]! / s;
    }
  };
  const normRows = () => {
    for (let src = 0; src < hc; src++) {
      let s = eps;
      for (let dst = 0; dst < hc; dst++) s += comb[dst + hc * src]!;
      for (let dst = 0; dst < hc; dst++) comb[dst + hc * src] = comb[dst + hc * src]! / s;
    }
  };
  normCols();
  for (let i = 1; i < iters; i++) {
    normRows();
    normCols();
  }
  return { pre, post, comb };
}

/**
 * Hyper-connections, row t (the reference twin of native/src/ops/dsv4-hc.h): the hc streams of
 * H ([T][hc][d]) collapsed by pre into X[xt] (each step rounded to f32), and the block output Y[t]
 * expanded by post and comb ([hc·hc], dst + hc·src) into out[t] (f64 sum, src in order, one rounding).
 */
export function hcCollapseRow(H: Float32Array, t: number, pre: Float32Array, X: Float32Array, xt: number, hc: number, d: number): void {
  const base = t * hc * d;
  for (let i = 0; i < d; i++) X[xt * d + i] = 0;
  for (let h = 0; h < hc; h++) for (let i = 0; i < d; i++) X[xt * d + i] = X[xt * d + i]! + H[base + h * d + i]! * pre[h]!;
}

export function hcExpandRow(out: Float32Array, Y: Float32Array, H: Float32Array, t: number, post: Float32Array, comb: Float32Array, hc: number, d: number): void {
  const base = t * hc * d;
  for (let dst = 0; dst < hc; dst++) {
    for (let i = 0; i < d; i++) {
      let v = Y[t * d + i]! * post[dst]!;
      for (let src = 0; src < hc; src++) v += H[base + src * d + i]! * comb[dst + hc * src]!;
      out[base + dst * d + i] = v;
    }
  }
}
