/**
 * The deepseek4 row ops (src/ops/dsv4-rmsnorm.h, dsv4-hc-weights.h,
 * dsv4-swiglu.h, dsv4-moe-combine.h): the fast kernel (rows over the pool's
 * threads) against its _ref twin, bit for bit, and both against the
 * TypeScript twin the forward uses without the native engine
 * (deepseek4-math.ts, deepseek4-ffn.ts). Tolerances: rmsnorm and the MoE
 * combine bit for bit (same f64 arithmetic, same order); hc weights and
 * SwiGLU within 1 f32 ulp (C's exp against V8's: they may differ in the last
 * f64 bit, which after the f32 rounding moves at most one ulp), with values
 * over many magnitudes.
 */
import { describe, expect, it } from 'vitest';

import { hcWeights, rmsNorm, swigluClamp } from '../../inference-core/engine/deepseek4-math.ts';
import { dsv4HcWeights, dsv4MoeCombine, dsv4RmsNormRows, dsv4SwigluClamp } from '../../native/index.ts';
import { seededRandom } from '../fuzz/fuzz-runner.ts';

function values(n: number, rand: () => number, spread = 8): Float32Array {
  return Float32Array.from({ length: n }, () => (rand() * 2 - 1) * 10 ** Math.floor(rand() * spread - spread / 2));
}

const bits = (x: Float32Array) => Array.from(new Uint32Array(x.buffer, x.byteOffset, x.length));

/** Largest distance in f32 ulps (ordered bit patterns) between a and b. */
function maxUlps(a: Float32Array, b: Float32Array): number {
  const ord = (u: number) => (u & 0x80000000 ? 0x80000000 - (u & 0x7fffffff) : 0x80000000 + u);
  const ua = new Uint32Array(a.buffer, a.byteOffset, a.length);
  const ub = new Uint32Array(b.buffer, b.byteOffset, b.length);
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(ord(ua[i]!) - ord(ub[i]!)));
  return m;
}

describe('deepseek4 row ops natively', () => {
  const rand = seededRandom(25);

  for (const [T, n] of [[7, 512], [133, 512], [67, 2048], [3, 128]] as const) {
    it(`rmsnorm of ${T}×${n} rows equals rmsNorm bit for bit (weight and none, in place)`, () => {
      const x = values(T * n, rand);
      const w = values(n, rand, 2);
      for (const weight of [w, null]) {
        const want = new Float32Array(T * n);
        for (let t = 0; t < T; t++) rmsNorm(x, 1e-6, weight ?? undefined, want, t * n, n);
        const got = new Float32Array(T * n).fill(Number.NaN);
        const ref = new Float32Array(T * n).fill(Number.NaN);
        expect(dsv4RmsNormRows(got, x, weight, T, n, 1e-6)).toBe(true);
        expect(dsv4RmsNormRows(ref, x, weight, T, n, 1e-6, true)).toBe(true);
        expect(bits(got)).toEqual(bits(want));
        expect(bits(ref)).toEqual(bits(want));
        const inPlace = x.slice();
        dsv4RmsNormRows(inPlace, inPlace, weight, T, n, 1e-6);
        expect(bits(inPlace)).toEqual(bits(want));
      }
    });
  }

  for (const withComb of [true, false]) {
    it(`hc weights ${withComb ? 'with' : 'without'} comb: fast = ref bit for bit, within 1 ulp of hcWeights`, () => {
      const T = 150;
      const hc = 4;
      const nMix = withComb ? (2 + hc) * hc : hc;
      const mixes = values(T * nMix, rand, 3);
      const scale = values(3, rand, 2);
      const base = values(nMix, rand, 2);
      const pre = new Float32Array(T * hc);
      const post = new Float32Array(withComb ? T * hc : 0);
      const comb = new Float32Array(withComb ? T * hc * hc : 0);
      const [rPre, rPost, rComb] = [pre.slice(), post.slice(), comb.slice()];
      expect(dsv4HcWeights(pre, post, comb, mixes, scale, base, T, hc, 1e-6, 20, withComb)).toBe(true);
      expect(dsv4HcWeights(rPre, rPost, rComb, mixes, scale, base, T, hc, 1e-6, 20, withComb, true)).toBe(true);
      expect(bits(pre)).toEqual(bits(rPre));
      expect(bits(post)).toEqual(bits(rPost));
      expect(bits(comb)).toEqual(bits(rComb));
      const [wPre, wPost, wComb] = [pre.slice().fill(0), post.slice().fill(0), comb.slice().fill(0)];
      for (let t = 0; t < T; t++) {
        const m = hcWeights(mixes.subarray(t * nMix, (t + 1) * nMix), scale, base, hc, 1e-6, 20, withComb);
        wPre.set(m.pre, t * hc);
        if (withComb) {
          wPost.set(m.post, t * hc);
          wComb.set(m.comb, t * hc * hc);
        }
      }
      expect(maxUlps(pre, wPre)).toBeLessThanOrEqual(1);
      expect(maxUlps(post, wPost)).toBeLessThanOrEqual(1);
      expect(maxUlps(comb, wComb)).toBeLessThanOrEqual(1);
    });
  }

  for (const limit of [1.5, 0]) {
    it(`SwiGLU (limit ${limit}): fast = ref bit for bit, within 1 ulp of swigluClamp`, () => {
      const n = 20_011;
      const g = values(n, rand, 4);
      const u = values(n, rand, 4);
      const got = new Float32Array(n);
      const ref = new Float32Array(n);
      expect(dsv4SwigluClamp(got, g, u, n, limit)).toBe(true);
      expect(dsv4SwigluClamp(ref, g, u, n, limit, true)).toBe(true);
      expect(bits(got)).toEqual(bits(ref));
      const want = Float32Array.from(g, (gv, i) => swigluClamp(gv, u[i]!, limit));
      expect(maxUlps(got, want)).toBeLessThanOrEqual(1);
    });
  }

  it('MoE combine equals the weighted sums in choice order, then the shared row, bit for bit', () => {
    const [T, K, d] = [97, 4, 512];
    const y = values(T * K * d, rand);
    const w = values(T * K, rand, 2);
    const sy = values(T * d, rand);
    const want = new Float32Array(T * d);
    for (let t = 0; t < T; t++) {
      for (let k = 0; k < K; k++) for (let i = 0; i < d; i++) want[t * d + i] = want[t * d + i]! + y[(t * K + k) * d + i]! * w[t * K + k]!;
      for (let i = 0; i < d; i++) want[t * d + i] = want[t * d + i]! + sy[t * d + i]!;
    }
    const got = new Float32Array(T * d).fill(Number.NaN);
    const ref = new Float32Array(T * d).fill(Number.NaN);
    expect(dsv4MoeCombine(got, y, w, sy, T, K, d)).toBe(true);
    expect(dsv4MoeCombine(ref, y, w, sy, T, K, d, true)).toBe(true);
    expect(bits(got)).toEqual(bits(want));
    expect(bits(ref)).toEqual(bits(want));
  });

  it('refuses arrays shorter than the shapes', () => {
    expect(() => dsv4RmsNormRows(new Float32Array(10), new Float32Array(512), null, 1, 512, 1e-6)).toThrow(/out and x need/);
    expect(() => dsv4MoeCombine(new Float32Array(512), new Float32Array(512), new Float32Array(4), new Float32Array(512), 1, 4, 512)).toThrow(/y T\*K\*d/);
    expect(() => dsv4HcWeights(new Float32Array(4), new Float32Array(4), new Float32Array(4), new Float32Array(24), new Float32Array(3), new Float32Array(24), 1, 4, 1e-6, 20, true)).toThrow(/comb/);
  });
});
