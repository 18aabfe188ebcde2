// RoPE scalings (frequency factors, linear, YaRN): the fast kernel against its
// reference twin (bit-identical: same operations, the twin recomputes every
// angle) and against a float64 TypeScript transcription of ggml's rope_ext
// formulas (tolerance 1e-5·max(1, |x|): the kernel rounds cos/sin and the
// products to f32, a few ulps of the value).
import { describe, expect, it } from 'vitest';

import type { RopeScaling } from '../../native/backend.ts';
import { addon, bitsEqual, randomF32, withThreads } from './native-fixtures.ts';

const f = Math.fround;

// ggml_rope_yarn_corr_dims, float by float as ggml computes them.
function corrDims(rot: number, s: RopeScaling, base: number): [number, number] {
  const dim = (beta: number) => f(f(rot * f(Math.log(f(s.nCtxOrig / f(f(beta * 2) * f(Math.PI)))))) / f(2 * f(Math.log(base))));
  return [Math.max(0, Math.floor(dim(s.betaFast))), Math.min(rot - 1, Math.ceil(dim(s.betaSlow)))];
}

function ropeF64(
  x: Float32Array, pos: Int32Array, rows: number, heads: number, hd: number, rot: number, neox: boolean, base: number,
  s: RopeScaling | null, ff: Float32Array | null,
): Float64Array {
  const out = Float64Array.from(x);
  const half = rot / 2;
  const [lo, hi] = s ? corrDims(rot, s, base) : [0, 0];
  let mscale = s ? s.attnFactor : 1;
  if (s && s.extFactor !== 0) mscale *= 1 + 0.1 * Math.log(1 / f(s.freqScale));
  for (let r = 0; r < rows; r++)
    for (let h = 0; h < heads; h++) {
      const o = (r * heads + h) * hd;
      for (let p = 0; p < half; p++) {
        const extrap = (pos[r] * base ** ((-2 * p) / rot)) / (ff ? ff[p] : 1);
        let th = (s ? s.freqScale : 1) * extrap;
        if (s && s.extFactor !== 0) {
          // the mix weight is a float (as ggml's): at theta ~1e4 rad its rounding moves the angle by 1e-4
          const y = f(f(p - lo) / f(Math.max(0.001, hi - lo)));
          const mix = f(f(1 - Math.min(1, Math.max(0, y))) * s.extFactor);
          th = th * (1 - mix) + extrap * mix;
        }
        const i0 = neox ? p : 2 * p;
        const i1 = neox ? p + half : 2 * p + 1;
        const a = x[o + i0];
        const b = x[o + i1];
        out[o + i0] = (a * Math.cos(th) - b * Math.sin(th)) * mscale;
        out[o + i1] = (a * Math.sin(th) + b * Math.cos(th)) * mscale;
      }
    }
  return out;
}

const yarn = (factor: number, nCtxOrig: number, attnFactor = 1): RopeScaling => ({
  freqScale: 1 / factor, extFactor: 1, attnFactor, betaFast: 32, betaSlow: 1, nCtxOrig,
});
const CASES: Array<{ name: string; s: RopeScaling | null; ff: boolean }> = [
  { name: 'frequency factors (Llama 3.1 rope_freqs)', s: null, ff: true },
  { name: 'linear factor 4', s: { freqScale: 0.25, extFactor: 0, attnFactor: 1, betaFast: 32, betaSlow: 1, nCtxOrig: 0 }, ff: false },
  { name: 'YaRN factor 4 over 4096', s: yarn(4, 4096), ff: false },
  { name: 'YaRN factor 8 over 2048, attn factor 0.9', s: yarn(8, 2048, 0.9), ff: false },
  { name: 'YaRN with frequency factors', s: yarn(4, 4096), ff: true },
];

describe('rope scalings', () => {
  const [rows, heads, hd] = [6, 3, 64];
  const pos = new Int32Array([0, 1, 63, 4095, 20000, 131071]);
  for (const c of CASES)
    for (const [mode, neox] of [[0, false], [2, true]] as const)
      it(`${c.name}, ${neox ? 'neox' : 'normal'}: fast == reference, within 1e-5 of float64`, () => {
        for (const rot of [64, 32]) {
          const ff = c.ff ? Float32Array.from({ length: rot / 2 }, (_, i) => 1 + (7 * i) / (rot / 2 - 1)) : null;
          const sc = c.s ? Float32Array.of(c.s.freqScale, c.s.extFactor, c.s.attnFactor, c.s.betaFast, c.s.betaSlow, c.s.nCtxOrig) : null;
          const x = randomF32(rows * heads * hd, rot + mode + 7);
          const a = x.slice();
          const b = x.slice();
          withThreads(2, () => addon.rope(a, pos, rows, heads, hd, rot, mode, 10000, sc, ff));
          addon.ropeRef(b, pos, rows, heads, hd, rot, mode, 10000, sc, ff);
          expect(bitsEqual(a, b), `rot ${rot}`).toBe(true);
          const want = ropeF64(x, pos, rows, heads, hd, rot, neox, 10000, c.s, ff);
          let worst = 0;
          want.forEach((v, i) => (worst = Math.max(worst, Math.abs(a[i] - v) / Math.max(1, Math.abs(v)))));
          expect(worst, `rot ${rot}`).toBeLessThanOrEqual(1e-5);
          if (rot < hd) expect(a[hd - 1]).toBe(x[hd - 1]);
          // the scaling changed something (else this case tests plain RoPE)
          const plain = x.slice();
          addon.ropeRef(plain, pos, rows, heads, hd, rot, mode, 10000);
          expect(bitsEqual(plain, a)).toBe(false);
        }
      });

  it('an identity scaling (factor 1, no YaRN, attn 1, factors all 1) gives plain RoPE bit for bit', () => {
    const x = randomF32(rows * heads * hd, 99);
    const a = x.slice();
    const b = x.slice();
    addon.rope(a, pos, rows, heads, hd, hd, 0, 500000, Float32Array.of(1, 0, 1, 32, 1, 0), new Float32Array(hd / 2).fill(1));
    addon.rope(b, pos, rows, heads, hd, hd, 0, 500000);
    expect(bitsEqual(a, b)).toBe(true);
  });

  it('refuses malformed scalings with KVT_ERR_NATIVE_SHAPE', () => {
    const x = randomF32(rows * heads * hd, 5);
    const bad: Array<[Float32Array | null, Float32Array | null]> = [
      [Float32Array.of(0, 0, 1, 32, 1, 0), null], // factor ∞
      [Float32Array.of(0.25, 1, 1, 32, 1, 0), null], // YaRN without an original context
      [Float32Array.of(0.25, 1, 1, 32), null], // short
      [null, new Float32Array(hd / 2 - 1).fill(1)], // too few factors
      [null, new Float32Array(hd / 2).fill(0)], // zero factor
    ];
    for (const [sc, ff] of bad) {
      let code = '';
      try {
        addon.rope(x, pos, rows, heads, hd, hd, 0, 10000, sc, ff);
      } catch (e) {
        code = (e as { code?: string }).code ?? String(e);
      }
      expect(code).toBe('KVT_ERR_NATIVE_SHAPE');
    }
  });
});
