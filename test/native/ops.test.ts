// Element-wise / row ops: fast vs reference twin (bit-exact by design, on
// every ISA) and vs a float64 TypeScript computation (tolerance stated per op).
import { describe, expect, it } from 'vitest';

import { GGML_TYPE } from '../../native/index.ts';
import { addon, bitsEqual, DTYPES, ggufWeight, ISAS, maxAbsDiff, randomF32, withIsa, withThreads } from './native-fixtures.ts';

const DIMS = [1, 15, 16, 17, 100, 768];

describe('rmsNorm', () => {
  it('fast == reference on every ISA; within 2e-6 relative of float64', () => {
    for (const isa of ISAS)
      withIsa(isa, () => {
        for (const dim of DIMS) {
          const rows = 5;
          const x = randomF32(rows * dim, dim, 3);
          const g = randomF32(dim, dim + 1);
          const a = new Float32Array(rows * dim);
          const b = new Float32Array(rows * dim);
          addon.rmsNorm(a, x, g, rows, dim, 1e-5);
          addon.rmsNormRef(b, x, g, rows, dim, 1e-5);
          expect(bitsEqual(a, b), `${isa} dim ${dim}`).toBe(true);
          for (let r = 0; r < rows; r++) {
            let ss = 0;
            for (let i = 0; i < dim; i++) ss += x[r * dim + i] ** 2;
            const s = 1 / Math.sqrt(ss / dim + 1e-5);
            for (let i = 0; i < dim; i++) {
              const want = x[r * dim + i] * s * g[i];
              expect(Math.abs(a[r * dim + i] - want)).toBeLessThanOrEqual(2e-6 * Math.abs(want) + 1e-7);
            }
          }
        }
      });
  });
});

describe('softmax', () => {
  it('fast == reference on every ISA; rows sum to 1; within 1e-6 of float64', () => {
    for (const isa of ISAS)
      withIsa(isa, () => {
        for (const cols of DIMS) {
          const x = randomF32(3 * cols, cols, 20);
          const a = x.slice();
          const b = x.slice();
          addon.softmax(a, 3, cols);
          addon.softmaxRef(b, 3, cols);
          expect(bitsEqual(a, b), `${isa} cols ${cols}`).toBe(true);
          for (let r = 0; r < 3; r++) {
            const row = Array.from(x.subarray(r * cols, (r + 1) * cols));
            const m = Math.max(...row);
            const e = row.map((v) => Math.exp(v - m));
            const s = e.reduce((p, q) => p + q, 0);
            e.forEach((v, i) => expect(Math.abs(a[r * cols + i] - v / s)).toBeLessThanOrEqual(1e-6));
          }
        }
      });
  });
});

describe('swiglu and add', () => {
  it('fast == reference on every ISA; swiglu within 1e-6 relative of float64', () => {
    for (const isa of ISAS)
      withIsa(isa, () => {
        for (const n of [1, 17, 4099]) {
          const g = randomF32(n, n, 12);
          const u = randomF32(n, n + 1, 3);
          const a = new Float32Array(n);
          const b = new Float32Array(n);
          addon.swiglu(a, g, u, n);
          addon.swigluRef(b, g, u, n);
          expect(bitsEqual(a, b)).toBe(true);
          for (let i = 0; i < n; i++) {
            const want = (g[i] / (1 + Math.exp(-g[i]))) * u[i];
            expect(Math.abs(a[i] - want)).toBeLessThanOrEqual(1e-6 * Math.abs(want) + 1e-7);
          }
          addon.add(a, g, u, n);
          addon.addRef(b, g, u, n);
          expect(bitsEqual(a, b)).toBe(true);
          expect(a[n - 1]).toBe(Math.fround(g[n - 1] + u[n - 1]));
        }
      });
  });
});

describe('rope', () => {
  function ropeF64(x: Float32Array, pos: Int32Array, rows: number, heads: number, hd: number, rot: number, neox: boolean, base: number) {
    const out = Array.from(x);
    for (let r = 0; r < rows; r++)
      for (let h = 0; h < heads; h++) {
        const o = (r * heads + h) * hd;
        for (let p = 0; p < rot / 2; p++) {
          const th = pos[r] * Math.pow(base, (-2 * p) / rot);
          const i0 = neox ? p : 2 * p;
          const i1 = neox ? p + rot / 2 : 2 * p + 1;
          const a = x[o + i0];
          const b = x[o + i1];
          out[o + i0] = a * Math.cos(th) - b * Math.sin(th);
          out[o + i1] = a * Math.sin(th) + b * Math.cos(th);
        }
      }
    return out;
  }
  for (const [mode, neox] of [[0, false], [2, true]] as const) {
    it(`${neox ? 'neox' : 'normal'}: fast == reference, within 1e-5 of float64, partial rotary leaves the tail`, () => {
      const [rows, heads, hd] = [7, 3, 64];
      const pos = new Int32Array([0, 1, 2, 63, 64, 1000, 4097]);
      for (const rot of [64, 32]) {
        const x = randomF32(rows * heads * hd, rot + mode);
        const a = x.slice();
        const b = x.slice();
        addon.rope(a, pos, rows, heads, hd, rot, mode, 10000);
        addon.ropeRef(b, pos, rows, heads, hd, rot, mode, 10000);
        expect(bitsEqual(a, b)).toBe(true);
        const want = ropeF64(x, pos, rows, heads, hd, rot, neox, 10000);
        want.forEach((v, i) => expect(Math.abs(a[i] - v)).toBeLessThanOrEqual(1e-5));
        if (rot < hd) expect(a[hd - 1]).toBe(x[hd - 1]);
        // position 0 is the identity
        expect(bitsEqual(a.subarray(0, heads * hd), x.subarray(0, heads * hd))).toBe(true);
      }
    });
  }
});

describe('embed', () => {
  for (const dtype of DTYPES) {
    it(`${dtype}: gathers the exact dequantized rows`, () => {
      const [rows, cols] = [50, 96];
      const w = ggufWeight(dtype, rows, cols, 4);
      const tokens = new Int32Array([0, 49, 7, 7, 3]);
      const a = new Float32Array(tokens.length * cols);
      const b = new Float32Array(tokens.length * cols);
      addon.embed(a, w.bytes, GGML_TYPE[dtype], rows, cols, tokens);
      addon.embedRef(b, w.bytes, GGML_TYPE[dtype], rows, cols, tokens);
      expect(bitsEqual(a, b)).toBe(true);
      tokens.forEach((t, i) => expect(bitsEqual(a.subarray(i * cols, (i + 1) * cols), w.values.subarray(t * cols, (t + 1) * cols))).toBe(true));
    });
  }
  it('rejects an out-of-range token with KVT_ERR_NATIVE_TOKEN', () => {
    const w = ggufWeight('f32', 4, 8, 1);
    expect(() => addon.embed(new Float32Array(8), w.bytes, 0, 4, 8, new Int32Array([4]))).toThrow(
      expect.objectContaining({ code: 'KVT_ERR_NATIVE_TOKEN' }),
    );
  });
});

describe('f16 conversion', () => {
  it('round-to-nearest-even, subnormals, overflow to inf', () => {
    const src = new Float32Array([1, 65504, 65520, 1e-7, 5.960464477539063e-8, -2.9802322387695312e-8, 1.00048828125, 1.00146484375, -0]);
    const bytes = new Uint8Array(src.length * 2);
    addon.quantize(bytes, src, 1, src.length);
    const back = new Float32Array(src.length);
    addon.dequantize(back, bytes, 1, src.length);
    expect(Array.from(back)).toEqual([1, 65504, Infinity, 1.1920928955078125e-7, 5.960464477539063e-8, -0, 1, 1.001953125, -0]);
  });
});

describe('thread-count independence of row ops', () => {
  it('rmsNorm, softmax and swiglu give the same bits on 1 and 2 threads', () => {
    const x = randomF32(64 * 768, 1);
    const g = randomF32(768, 2);
    const runAll = () => {
      const a = new Float32Array(x.length);
      addon.rmsNorm(a, x, g, 64, 768, 1e-6);
      const s = x.slice();
      addon.softmax(s, 64, 768);
      const w = new Float32Array(x.length);
      addon.swiglu(w, x, s, x.length);
      return [a, s, w];
    };
    const one = withThreads(1, runAll);
    const two = withThreads(2, runAll);
    one.forEach((v, i) => expect(maxAbsDiff(v, two[i])).toBe(0));
  });
});
