// matmul: fast kernels vs their reference twin (bit-exact: same fma order by
// design), vs a float64 TypeScript computation (tolerances below), across
// ISAs, awkward shapes, row grouping and thread counts.
import { describe, expect, it } from 'vitest';

import { GGML_TYPE, type WeightDType } from '../../native/index.ts';
import { addon, bitsEqual, DTYPES, ggufWeight, ISAS, randomF32, withIsa, withThreads } from './native-fixtures.ts';

// [m, n, k]: M=1 (decode), M=2..4 (gemv path), M not a multiple of the
// 8/6/4-row tiles, N odd / below one 16-row panel / not a multiple of 32, K multiple of 32.
const SHAPES: [number, number, number][] = [
  [1, 1, 32], [1, 17, 64], [2, 33, 96], [3, 50, 128], [4, 16, 32], [5, 7, 64], [9, 31, 160], [13, 65, 96], [20, 129, 256],
];

function run(dtype: WeightDType, m: number, n: number, k: number, seed: number) {
  const w = ggufWeight(dtype, n, k, seed);
  const x = randomF32(m * k, seed + 1);
  const t = GGML_TYPE[dtype];
  const packed = addon.packWeight(t, n, k, w.bytes);
  const fast = new Float32Array(m * n);
  addon.matmul(fast, x, packed, t, n, k, m);
  const ref = new Float32Array(m * n);
  addon.matmulRef(ref, x, w.bytes, t, n, k, m);
  return { w, x, packed, fast, ref };
}

describe('matmul fast vs reference twin', () => {
  for (const isa of ISAS) {
    for (const dtype of DTYPES) {
      it(`${isa} ${dtype}: bit-identical to matmul_ref on every shape`, () => {
        withIsa(isa, () => {
          SHAPES.forEach(([m, n, k], i) => {
            const { fast, ref } = run(dtype, m, n, k, 100 + i);
            expect(bitsEqual(fast, ref), `${isa} ${dtype} m=${m} n=${n} k=${k}`).toBe(true);
          });
        });
      });
    }
  }
});

describe('matmul vs float64 TypeScript', () => {
  // Tolerance per output, relative to Σ|x_k·w_k|:
  //   f32/f16/bf16: 1e-5 (f32 accumulation of K ≤ 256 exact-weight products)
  //   q8_0: 1.5e-2 (activations are quantized to int8 per 32-block: error ≤ amax/254 per value)
  const TOL: Partial<Record<WeightDType, number>> = { f32: 1e-5, f16: 1e-5, bf16: 1e-5, q8_0: 1.5e-2 };
  for (const dtype of DTYPES) {
    it(`${dtype} within ${TOL[dtype]} of Σ|x·w|`, () => {
      for (const [m, n, k] of [[1, 17, 64], [13, 65, 96]] as const) {
        const { w, x, fast } = run(dtype, m, n, k, 7);
        for (let r = 0; r < m; r++)
          for (let j = 0; j < n; j++) {
            let s = 0;
            let mag = 0;
            for (let i = 0; i < k; i++) {
              s += x[r * k + i] * w.values[j * k + i];
              mag += Math.abs(x[r * k + i] * w.values[j * k + i]);
            }
            expect(Math.abs(fast[r * n + j] - s)).toBeLessThanOrEqual(TOL[dtype]! * mag + 1e-7);
          }
      }
    });
  }

  it('a hand-computed 2×3 · (2×3)ᵀ product', () => {
    const w = new Float32Array([1, 2, 3, -1, 0.5, 4]);
    const x = new Float32Array([1, 1, 1, 2, 0, -1]);
    const out = new Float32Array(4);
    addon.matmul(out, x, addon.packWeight(0, 2, 3, w), 0, 2, 3, 2);
    expect(Array.from(out)).toEqual([6, 3.5, -1, -6]);
  });
});

describe('matmul determinism', () => {
  for (const dtype of DTYPES) {
    it(`${dtype}: a row's result does not depend on M or on the other rows`, () => {
      const [n, k] = [70, 128];
      const m = 19;
      const { x, packed, fast } = run(dtype, m, n, k, 55);
      const t = GGML_TYPE[dtype];
      // same rows in calls of 1, 3 and 7 rows (gemv and gemm paths)
      for (const chunk of [1, 3, 7]) {
        for (let r0 = 0; r0 < m; r0 += chunk) {
          const rows = Math.min(chunk, m - r0);
          const part = new Float32Array(rows * n);
          addon.matmul(part, x.subarray(r0 * k, (r0 + rows) * k), packed, t, n, k, rows);
          expect(bitsEqual(part, fast.subarray(r0 * n, (r0 + rows) * n)), `chunk ${chunk} row ${r0}`).toBe(true);
        }
      }
    });

    it(`${dtype}: 1 thread and 2 threads give bit-identical results`, () => {
      const [m, n, k] = [11, 97, 192];
      const one = withThreads(1, () => run(dtype, m, n, k, 9).fast);
      const two = withThreads(2, () => run(dtype, m, n, k, 9).fast);
      expect(bitsEqual(one, two)).toBe(true);
    });
  }

  it('scalar, avx2 and avx512 agree bit for bit', () => {
    const results = ISAS.map((isa) => withIsa(isa, () => run('q8_0', 6, 40, 64, 3).fast));
    const f16 = ISAS.map((isa) => withIsa(isa, () => run('f16', 6, 40, 64, 3).fast));
    for (let i = 1; i < ISAS.length; i++) {
      expect(bitsEqual(results[i], results[0])).toBe(true);
      expect(bitsEqual(f16[i], f16[0])).toBe(true);
    }
  });
});

describe('matmul argument checks', () => {
  it('rejects a too-small output with KVT_ERR_NATIVE_SHAPE', () => {
    const w = ggufWeight('f16', 8, 32, 1);
    const p = addon.packWeight(1, 8, 32, w.bytes);
    expect(() => addon.matmul(new Float32Array(7), new Float32Array(32), p, 1, 8, 32, 1)).toThrow(
      expect.objectContaining({ code: 'KVT_ERR_NATIVE_SHAPE' }),
    );
  });
  it('rejects Q8_0 with cols not a multiple of 32', () => {
    expect(() => addon.packWeight(8, 2, 40, new Uint8Array(200))).toThrow(expect.objectContaining({ code: 'KVT_ERR_NATIVE_SHAPE' }));
  });
});
