// K-quant matmul (Q2_K .. Q6_K): fast kernels vs their reference twin (bit
// for bit: same integer sums, same f32 order by design) on every ISA, thread
// count and row grouping; the twin vs float64 products of ggml's own
// dequantized weights. Test weights are quantized by ggml itself
// (quantize_row_<t>_ref in node-llama-cpp's libggml-base.so, via ctypes).
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { describe, expect, it } from 'vitest';

import { addon, bitsEqual, ISAS, rng, withIsa, withThreads } from './native-fixtures.ts';

const LIB = path.resolve('node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/libggml-base.so');
const SCRIPT = path.resolve('test/helpers/ggml-kquant.py');

const TYPES = [
  { name: 'q4_K', id: 12, blockBytes: 144 },
  { name: 'q5_K', id: 13, blockBytes: 176 },
  { name: 'q6_K', id: 14, blockBytes: 210 },
  { name: 'q2_K', id: 10, blockBytes: 84 },
  { name: 'q3_K', id: 11, blockBytes: 110 },
] as const;
type KType = (typeof TYPES)[number];

// [m, n, k]: M = 1..4 (decode path), 5, 13, 64 (prefill path, tails of the
// 4-row tile); N below, above and not a multiple of a 16-row panel (and of
// the 2-panel group); K = 256·n.
const SHAPES: [number, number, number][] = [
  [1, 37, 256], [2, 16, 512], [3, 33, 256], [4, 50, 768], [5, 17, 256], [13, 37, 512], [64, 21, 256],
];

/** Weights whose sub-blocks differ in scale and offset, so scales and mins matter. */
function weightValues(rows: number, cols: number, seed: number): Float32Array {
  const r = rng(seed);
  const v = new Float32Array(rows * cols);
  for (let i = 0; i < rows * cols; i += 16) {
    const scale = 0.02 + 2 * r() * r();
    const bias = (r() - 0.5) * scale;
    for (let j = 0; j < 16; j++) v[i + j] = (r() * 2 - 1) * scale + bias;
  }
  return v;
}

function activations(n: number, seed: number): Float32Array {
  const r = rng(seed);
  const x = new Float32Array(n);
  for (let i = 0; i < n; i++) x[i] = (r() * 2 - 1) * (i % 97 === 0 ? 8 : 1); // a few outliers per block
  return x;
}

const cache = new Map<string, { bytes: Uint8Array; values: Float32Array }>();
/** GGUF bytes of a [rows][cols] weight quantized by ggml, and ggml's dequantization of them. */
function ggmlWeight(t: KType, rows: number, cols: number, seed: number): { bytes: Uint8Array; values: Float32Array } {
  const key = `${t.name}/${rows}/${cols}/${seed}`;
  const hit = cache.get(key);
  if (hit) return hit;
  const src = weightValues(rows, cols, seed);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kvt-kq-'));
  try {
    const file = path.join(dir, 'in.f32');
    fs.writeFileSync(file, new Uint8Array(src.buffer));
    const res = spawnSync('python3', [SCRIPT, LIB, t.name, file], { maxBuffer: 1 << 28 });
    if (res.status !== 0) throw new Error(`ggml-kquant.py failed: ${res.stderr}`);
    const out = new Uint8Array(res.stdout);
    const nBytes = (rows * cols / 256) * t.blockBytes;
    expect(out.length).toBe(nBytes + rows * cols * 4);
    const w = { bytes: out.slice(0, nBytes), values: new Float32Array(out.slice(nBytes).buffer) };
    cache.set(key, w);
    return w;
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

function run(t: KType, m: number, n: number, k: number, seed: number) {
  const w = ggmlWeight(t, n, k, seed);
  const x = activations(m * k, seed + 1);
  const packed = addon.packWeight(t.id, n, k, w.bytes);
  const fast = new Float32Array(m * n);
  addon.matmul(fast, x, packed, t.id, n, k, m);
  const ref = new Float32Array(m * n);
  addon.matmulRef(ref, x, w.bytes, t.id, n, k, m);
  return { w, x, packed, fast, ref };
}

function firstDiff(a: Float32Array, b: Float32Array): string {
  for (let i = 0; i < a.length; i++) if (Object.is(a[i], b[i]) === false) return `at ${i}: ${a[i]} vs ${b[i]}`;
  return 'none';
}

describe('K-quant matmul: fast == reference twin', () => {
  for (const isa of ISAS) {
    for (const t of TYPES) {
      it(`${isa} ${t.name}: bit-identical to matmul_ref on every shape`, () => {
        withIsa(isa, () => {
          SHAPES.forEach(([m, n, k], i) => {
            const { fast, ref } = run(t, m, n, k, 100 + i);
            expect(bitsEqual(fast, ref), `${isa} ${t.name} m=${m} n=${n} k=${k} ${firstDiff(fast, ref)}`).toBe(true);
          });
        });
      });
    }
  }
});

describe('K-quant matmul: determinism', () => {
  for (const t of TYPES) {
    it(`${t.name}: scalar, avx2 and avx512 agree bit for bit (decode and prefill paths)`, () => {
      for (const m of [1, 3, 9]) {
        const res = ISAS.map((isa) => withIsa(isa, () => run(t, m, 40, 512, 3).fast));
        for (let i = 1; i < res.length; i++) expect(bitsEqual(res[i], res[0]), `${ISAS[i]} m=${m}`).toBe(true);
      }
    });

    it(`${t.name}: 1 and 2 threads give bit-identical results; a row does not depend on M`, () => {
      const [m, n, k] = [19, 70, 512];
      const one = withThreads(1, () => run(t, m, n, k, 9));
      const two = withThreads(2, () => run(t, m, n, k, 9).fast);
      expect(bitsEqual(one.fast, two)).toBe(true);
      for (const chunk of [1, 2, 4, 7]) {
        for (let r0 = 0; r0 < m; r0 += chunk) {
          const rows = Math.min(chunk, m - r0);
          const part = new Float32Array(rows * n);
          addon.matmul(part, one.x.subarray(r0 * k, (r0 + rows) * k), one.packed, t.id, n, k, rows);
          expect(bitsEqual(part, one.fast.subarray(r0 * n, (r0 + rows) * n)), `chunk ${chunk} row ${r0}`).toBe(true);
        }
      }
    });
  }
});

/** Q8_K-style activation quantization as the native code does it (f32 ops via Math.fround). */
function quantizeQ8K(x: Float32Array): { q: Int8Array; d: Float32Array } {
  const q = new Int8Array(x.length);
  const d = new Float32Array(x.length / 256);
  for (let b = 0; b < d.length; b++) {
    let amax = 0;
    for (let i = 0; i < 256; i++) amax = Math.max(amax, Math.abs(x[b * 256 + i]));
    const db = Math.fround(amax / 127);
    const id = db !== 0 ? Math.fround(1 / db) : 0;
    for (let i = 0; i < 256; i++) {
      const v = Math.fround(x[b * 256 + i] * id);
      let r = Math.round(v);
      if (r - v === 0.5 && r % 2 !== 0) r -= 1; // half to even
      q[b * 256 + i] = Math.max(-127, Math.min(127, r));
    }
    d[b] = db;
  }
  return { q, d };
}

describe('K-quant matmul vs float64 products of ggml-dequantized weights', () => {
  // (a) Against the very activations the kernel multiplies (x quantized as
  //     above): only f32 rounding remains (ggml's f32 dequantization d·s·q − m
  //     and our per-super-block fmas), so 1e-6 of Σ|x̂·w| (measured ≤ 3.1e-8)
  //     — one wrong code, scale or min is outside it.
  // (b) Against the f32 activations: each activation is off by at most d/2 =
  //     amax_256/254, so the error is bounded by Σ_blocks amax/254 · Σ|w|,
  //     plus (a)'s rounding term.
  for (const t of TYPES) {
    it(`${t.name}: (a) exact-activation error ≤ 1e-6 relative, (b) within the activation-quantization bound`, () => {
      for (const [m, n, k] of [[1, 37, 512], [5, 33, 768]] as const) {
        const { w, x, ref } = run(t, m, n, k, 77);
        const { q, d } = quantizeQ8K(x);
        let worstA = 0;
        let worstB = 0;
        for (let r = 0; r < m; r++)
          for (let j = 0; j < n; j++) {
            let exact = 0;
            let magA = 0;
            let full = 0;
            let boundB = 0;
            for (let b = 0; b < k / 256; b++) {
              const db = d[r * (k / 256) + b];
              let sw = 0;
              let amax = 0;
              for (let i = b * 256; i < b * 256 + 256; i++) {
                const wv = w.values[j * k + i];
                const xv = x[r * k + i];
                const xh = db * q[r * k + i];
                exact += xh * wv;
                magA += Math.abs(xh * wv);
                full += xv * wv;
                sw += Math.abs(wv);
                amax = Math.max(amax, Math.abs(xv));
              }
              boundB += (amax / 254) * sw;
            }
            const got = ref[r * n + j];
            const tolA = 1e-6 * magA;
            worstA = Math.max(worstA, Math.abs(got - exact) / tolA);
            worstB = Math.max(worstB, Math.abs(got - full) / (boundB + tolA));
          }
        expect(worstA, `${t.name} m=${m} exact-activation error / tolerance`).toBeLessThanOrEqual(1);
        expect(worstB, `${t.name} m=${m} f32-activation error / bound`).toBeLessThanOrEqual(1);
      }
    });
  }
});

describe('K-quant packing and argument checks', () => {
  it('packed bytes stay within 4% of the GGUF bytes (Q2_K and Q6_K: equal)', () => {
    const [rows, cols] = [4096, 4096];
    const ratios: Record<string, number> = {};
    for (const t of TYPES) {
      const gguf = (rows * cols / 256) * t.blockBytes;
      ratios[t.name] = addon.packedWeightBytes(t.id, rows, cols) / gguf;
      expect(ratios[t.name]).toBeGreaterThanOrEqual(1);
      expect(ratios[t.name]).toBeLessThanOrEqual(1.04);
    }
    expect(ratios.q2_K).toBe(1);
    expect(ratios.q6_K).toBe(1);
  });

  it('rejects K-quant weights whose cols are not a multiple of 256', () => {
    expect(() => addon.packWeight(12, 2, 384, new Uint8Array(2 * 144 * 2))).toThrow(
      expect.objectContaining({ code: 'KVT_ERR_NATIVE_SHAPE', message: expect.stringContaining('256') }),
    );
  });
});
