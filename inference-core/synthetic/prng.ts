/**
 * Seeded PRNG for synthetic weights: xoshiro128** for uniform u32, a quantile table
 * for normals, filled straight into Float32Arrays (no per-value objects), so
 * ~100 M weights generate in about a second.
 */
import { splitmix32Words, Xoshiro128Core } from '../xoshiro128.ts';

export class Xoshiro128 extends Xoshiro128Core {
  constructor(seed: number) {
    // splitmix32 words, the last made odd (never an all-zero state); the synthetic models' weights depend on it.
    const words = splitmix32Words(seed);
    words[3] = (words[3] | 1) >>> 0;
    super(words);
  }

  /** Uniform in (0, 1]. */
  nextUnit(): number {
    return (this.nextU32() + 1) / 4294967296;
  }

  /**
   * Fills `out` with N(mean, std²), by inverse-CDF lookup: the top 12 bits of
   * one u32 pick a cell of a 4096-entry quantile table, the low 20 bits
   * interpolate inside it. One PRNG step and no transcendental per value
   * (Box–Muller costs a log, a sqrt and a sin/cos); tails end near ±3.5σ,
   * which is all a synthetic init needs.
   */
  fillNormal(out: Float32Array, mean: number, std: number): Float32Array {
    const q = NORMAL_QUANTILES;
    const n = out.length;
    for (let i = 0; i < n; i++) {
      const u = this.nextU32();
      const cell = u >>> 20;
      const frac = (u & 0xfffff) * (1 / 1048576);
      const lo = q[cell];
      out[i] = mean + std * (lo + (q[cell + 1] - lo) * frac);
    }
    return out;
  }
}

/** Standard normal CDF (Abramowitz–Stegun 7.1.26 erf, |error| < 1.5e-7). */
function normalCdf(x: number): number {
  const z = Math.abs(x) / Math.SQRT2;
  const t = 1 / (1 + 0.3275911 * z);
  const erf = 1 - ((((1.061405429 * t - 1.453152027) * t + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t * Math.exp(-z * z);
  return x >= 0 ? 0.5 * (1 + erf) : 0.5 * (1 - erf);
}

/** 4097 quantiles of N(0,1) at p = (i + 0.5)/4097·…, symmetric, by bisection on the CDF. */
const NORMAL_QUANTILES: Float64Array = (() => {
  const cells = 4096;
  const out = new Float64Array(cells + 1);
  for (let i = 0; i <= cells; i++) {
    const p = (i + 0.5) / (cells + 1);
    let lo = -8;
    let hi = 8;
    for (let k = 0; k < 60; k++) {
      const mid = (lo + hi) / 2;
      if (normalCdf(mid) < p) lo = mid;
      else hi = mid;
    }
    out[i] = (lo + hi) / 2;
  }
  return out;
})();


/** FNV-1a of a string: a per-tensor seed that does not depend on generation order. */
export function seedFromString(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}
