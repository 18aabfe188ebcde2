/**
 * matmul by Q4_0 / Q4_1 / Q5_0 / Q5_1 / IQ4_NL / IQ4_XS weights
 * (native/src/ops/matmul-legacy*.cc). Weights are quantized by ggml itself
 * (quantize_row_<t>_ref of libggml-base.so through ctypes,
 * test/helpers/ggml-legacy-quant.py), which also gives their exact values
 * (dequantize_row_<t>). Per type:
 *   fast == matmulRef bit for bit on every ISA, M ∈ {1,2,3,4,5,13,64}, N off the 16-row panel, several K;
 *   scalar == avx2 == avx512, 1 == 2 == 5 threads, a row's result independent of M;
 *   matmulRef vs a float64 product of the ggml-dequantized weights:
 *     - activations exactly representable in int8 per scale group (power-of-2 scales, exact in f16): within f32
 *       rounding (1e-5 of Σ|x|·(|w|+2·max|w| of the block); Q4_1/Q5_1 also the f16 rounding of s = dx·Σq);
 *     - random activations: within the int8 activation error Σ_i amax_g(i)/254 · |w_i| (g: the 32 or, for
 *       IQ4_XS, 256 values sharing x's scale) plus the f16 rounding of the activation scales (2^-11
 *       relative, as ggml's block_q8_0/_q8_1 carry them);
 *   packed bytes within 15% of the GGUF bytes.
 */
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';

import { CpuBackend, GGML_TYPE, WEIGHT_BLOCK, type WeightDType } from '../../native/index.ts';
import { addon, bitsEqual, ISAS, randomF32, rng, withIsa, withThreads } from './native-fixtures.ts';

const LIB = path.resolve('node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/libggml-base.so');
const SCRIPT = path.resolve('test/helpers/ggml-legacy-quant.py');

const TYPES = ['q4_0', 'q4_1', 'q5_0', 'q5_1', 'iq4_nl', 'iq4_xs'] as const satisfies readonly WeightDType[];
type LegacyType = (typeof TYPES)[number];

const MS = [1, 2, 3, 4, 5, 13, 64];
// [N, K]: N below / across / not a multiple of the 16-row panel; several K (whole blocks).
const SHAPES32: [number, number][] = [[37, 32], [16, 96], [70, 256], [5, 512]];
const SHAPES256: [number, number][] = [[37, 256], [16, 512], [70, 768]];
const shapesOf = (t: LegacyType) => (t === 'iq4_xs' ? SHAPES256 : SHAPES32);

interface Weight {
  n: number;
  k: number;
  bytes: Uint8Array;
  values: Float32Array; // ggml's dequantization of bytes
}

/** Weight values: per-row magnitudes 0.05..1.6, some rows shifted positive (non-trivial Q4_1/Q5_1 mins), one zero block. */
function weightValues(n: number, k: number, seed: number): Float32Array {
  const v = randomF32(n * k, seed);
  for (let r = 0; r < n; r++) {
    const scale = 0.05 * 2 ** (r % 6);
    const shift = r % 3 === 1 ? 0.7 : 0;
    for (let i = 0; i < k; i++) v[r * k + i] = (v[r * k + i] + shift) * scale;
  }
  if (n > 2) v.fill(0, 2 * k, 2 * k + 32);
  return v;
}

/** ggml's quantization of several [n][k] matrices of one type in one python call. */
function ggmlWeights(dtype: LegacyType, shapes: [number, number][], seed: number): Weight[] {
  const parts = shapes.map(([n, k], i) => weightValues(n, k, seed + i));
  const total = parts.reduce((s, p) => s + p.length, 0);
  const all = new Float32Array(total);
  let off = 0;
  for (const p of parts) {
    all.set(p, off);
    off += p.length;
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kvtier-legacy-'));
  try {
    const inFile = path.join(dir, 'in.f32');
    fs.writeFileSync(inFile, new Uint8Array(all.buffer));
    const r = spawnSync('python3', [SCRIPT, LIB, dtype, inFile], { maxBuffer: 256 << 20 });
    if (r.error || r.status !== 0) throw new Error(`ggml-legacy-quant.py ${dtype}: ${r.error ?? r.stderr?.toString()}`);
    const out = r.stdout as Buffer;
    const blk = WEIGHT_BLOCK[dtype];
    const qBytes = (total / blk.elems) * blk.bytes;
    expect(out.length).toBe(qBytes + total * 4);
    const deq = new Float32Array(out.buffer.slice(out.byteOffset + qBytes, out.byteOffset + out.length));
    let qOff = 0;
    let vOff = 0;
    return shapes.map(([n, k]) => {
      const nb = ((n * k) / blk.elems) * blk.bytes;
      const w = { n, k, bytes: new Uint8Array(out.subarray(qOff, qOff + nb)), values: deq.slice(vOff, vOff + n * k) };
      qOff += nb;
      vOff += n * k;
      return w;
    });
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

function fast(dtype: LegacyType, w: Weight, x: Float32Array, m: number, packed = addon.packWeight(GGML_TYPE[dtype], w.n, w.k, w.bytes)): Float32Array {
  const out = new Float32Array(m * w.n);
  addon.matmul(out, x, packed, GGML_TYPE[dtype], w.n, w.k, m);
  return out;
}

function ref(dtype: LegacyType, w: Weight, x: Float32Array, m: number): Float32Array {
  const out = new Float32Array(m * w.n);
  addon.matmulRef(out, x, w.bytes, GGML_TYPE[dtype], w.n, w.k, m);
  return out;
}

/** Values per activation scale: 32 (block_q8_0/_q8_1 as llama.cpp pairs them), IQ4_XS 256 (block_q8_K). */
const actGroup = (t: LegacyType) => (t === 'iq4_xs' ? 256 : 32);

/** Activations whose int8 quantization is exact: integers · 2^e with a ±127 in every group of `group` values. */
function exactInt8Activations(m: number, k: number, seed: number, group: number): Float32Array {
  const r = rng(seed);
  const x = new Float32Array(m * k);
  for (let b = 0; b < (m * k) / group; b++) {
    const s = 2 ** (Math.floor(r() * 11) - 8);
    for (let i = 0; i < group; i++) x[b * group + i] = (Math.floor(r() * 255) - 127) * s;
    x[b * group + Math.floor(r() * group)] = (r() < 0.5 ? -127 : 127) * s;
  }
  return x;
}

interface Bound {
  /** weight of the int8 rounding term Σ_i amax_g(i)/254 · |w_i| (0: x is exact in int8) */
  act: number;
  /** values per activation scale (amax_g over each group) */
  group: number;
  /** relative error of the f16 activation scales (dx, and s = f16(dx·Σq) of Q4_1/Q5_1) on Σ|x|·(|w| + 2·wmax_b) */
  scale: number;
  /** the min term's f16 s only: 2^-12 · wmax_b · |Σ_{i∈b} x_i| (Q4_1/Q5_1 with exact x, where dx is a power of 2) */
  minS: boolean;
}

/**
 * max over outputs of |got − Σ x·w (float64)| / bound, where bound =
 *   the terms of Bound  +  1e-5 · Σ_i |x_i|·(|w_i| + 2·max_{j∈b}|w_j|)  + 1e-30.
 * The 1e-5 term covers the f32 products and fma chain (a Q4_1/Q5_1 block
 * term d·q·x and min term m·x each stay below (|w| + |max w|)·|x|).
 */
function worstRatio(got: Float32Array, w: Weight, x: Float32Array, m: number, b: Bound): number {
  let worst = 0;
  for (let r = 0; r < m; r++) {
    for (let j = 0; j < w.n; j++) {
      let exact = 0;
      let bound = 1e-30;
      for (let blk = 0; blk < w.k / 32; blk++) {
        let wmax = 0;
        let xsum = 0;
        for (let i = blk * 32; i < blk * 32 + 32; i++) {
          wmax = Math.max(wmax, Math.abs(w.values[j * w.k + i]));
          xsum += x[r * w.k + i];
        }
        const g0 = Math.floor((blk * 32) / b.group) * b.group;
        let amax = 0;
        for (let i = g0; i < g0 + b.group; i++) amax = Math.max(amax, Math.abs(x[r * w.k + i]));
        if (b.minS) bound += 2 ** -12 * wmax * Math.abs(xsum);
        for (let i = blk * 32; i < blk * 32 + 32; i++) {
          const xi = x[r * w.k + i];
          const wi = w.values[j * w.k + i];
          exact += xi * wi;
          bound += b.act * (amax / 254) * Math.abs(wi) + (1e-5 + b.scale) * Math.abs(xi) * (Math.abs(wi) + 2 * wmax);
        }
      }
      worst = Math.max(worst, Math.abs(got[r * w.n + j] - exact) / bound);
    }
  }
  return worst;
}

const weights = new Map<LegacyType, Weight[]>();
beforeAll(() => {
  expect(fs.existsSync(LIB), `ggml shipped with node-llama-cpp at ${LIB}`).toBe(true);
  TYPES.forEach((t, i) => weights.set(t, ggmlWeights(t, shapesOf(t), 1000 + 37 * i)));
});

describe.each(TYPES)('%s matmul', (dtype) => {
  for (const isa of ISAS) {
    it(`${isa}: fast == matmulRef bit for bit, M ∈ {${MS}}, shapes ${JSON.stringify(shapesOf(dtype))}`, () => {
      withIsa(isa, () => {
        for (const w of weights.get(dtype)!) {
          const packed = addon.packWeight(GGML_TYPE[dtype], w.n, w.k, w.bytes);
          for (const m of MS) {
            const x = randomF32(m * w.k, m * 31 + w.k);
            expect(bitsEqual(fast(dtype, w, x, m, packed), ref(dtype, w, x, m)), `${isa} m=${m} n=${w.n} k=${w.k}`).toBe(true);
          }
        }
      });
    });
  }

  it('scalar == avx2 == avx512 and 1, 2, 5 threads, bit for bit', () => {
    const w = weights.get(dtype)![2];
    for (const m of [1, 3, 13]) {
      const x = randomF32(m * w.k, 7 + m);
      const runs = ISAS.map((isa) => withIsa(isa, () => fast(dtype, w, x, m)));
      for (const threads of [1, 2, 5]) runs.push(withThreads(threads, () => fast(dtype, w, x, m)));
      for (let i = 1; i < runs.length; i++) expect(bitsEqual(runs[i], runs[0]), `m=${m} run ${i}`).toBe(true);
    }
  });

  it("a row's result does not depend on M or on the other rows (gemv and gemm paths)", () => {
    const w = weights.get(dtype)![2];
    const m = 19;
    const x = randomF32(m * w.k, 55);
    const packed = addon.packWeight(GGML_TYPE[dtype], w.n, w.k, w.bytes);
    const all = fast(dtype, w, x, m, packed);
    for (const chunk of [1, 3, 7]) {
      for (let r0 = 0; r0 < m; r0 += chunk) {
        const rows = Math.min(chunk, m - r0);
        const part = fast(dtype, w, x.subarray(r0 * w.k, (r0 + rows) * w.k), rows, packed);
        expect(bitsEqual(part, all.subarray(r0 * w.n, (r0 + rows) * w.n)), `chunk ${chunk} row ${r0}`).toBe(true);
      }
    }
  });

  it('matmulRef == float64 x·W (ggml-dequantized W) within f32 rounding when x is exact in int8', () => {
    for (const w of weights.get(dtype)!) {
      for (const m of [1, 5]) {
        const x = exactInt8Activations(m, w.k, w.k + m, actGroup(dtype));
        const bound = { act: 0, group: actGroup(dtype), scale: 0, minS: dtype === 'q4_1' || dtype === 'q5_1' };
        expect(worstRatio(ref(dtype, w, x, m), w, x, m, bound), `n=${w.n} k=${w.k} m=${m}`).toBeLessThanOrEqual(1);
      }
    }
  });

  it('matmulRef == float64 x·W within the int8 activation error Σ_i amax_g(i)/254 · |w_i| and f16 scales (random x)', () => {
    for (const w of weights.get(dtype)!) {
      const m = 4;
      const x = randomF32(m * w.k, 3 * w.k);
      // int8 rounding (+0.1 % for 1/d's own rounding); dx and s rounded to f16 as ggml's q8_0/q8_1 blocks: ≤ 2^-11 relative (+1 %)
      const bound = { act: 1.001, group: actGroup(dtype), scale: 1.01 * 2 ** -11, minS: false };
      expect(worstRatio(ref(dtype, w, x, m), w, x, m, bound), `n=${w.n} k=${w.k}`).toBeLessThanOrEqual(1);
    }
  });

  it('packs within 15% of the GGUF bytes', () => {
    const t = GGML_TYPE[dtype];
    const [n, k] = [4096, 4096];
    const gguf = (n * k / WEIGHT_BLOCK[dtype].elems) * WEIGHT_BLOCK[dtype].bytes;
    const packed = addon.packedWeightBytes(t, n, k);
    // Q4_0 / Q4_1 / Q5_0 / Q5_1 / IQ4_NL: exactly the GGUF bytes; IQ4_XS: 138 / 136 (byte-sized sub-block scales)
    expect(packed / gguf).toBeGreaterThanOrEqual(1);
    expect(packed / gguf).toBeLessThanOrEqual(dtype === 'iq4_xs' ? 138 / 136 : 1);
  });

  it('runs through the CPU backend (uploadWeight + matmul) with the same bits as matmulRef', () => {
    const be = new CpuBackend(addon);
    const w = weights.get(dtype)![0];
    const m = 3;
    const x = randomF32(m * w.k, 99);
    const h = be.uploadWeight(dtype, w.n, w.k, w.bytes);
    const xt = be.alloc(m * w.k);
    const out = be.alloc(m * w.n);
    be.write(xt, x);
    be.matmul(out, xt, h, m);
    expect(bitsEqual(be.read(out), ref(dtype, w, x, m))).toBe(true);
  });
});

describe('legacy quant weight shape checks', () => {
  it.each([
    ['q4_0', 40, '% 32'],
    ['q5_1', 48, '% 32'],
    ['iq4_xs', 32 * 5, '% 256'],
  ] as const)('%s with cols = %i is refused with KVT_ERR_NATIVE_SHAPE naming the block', (dtype, cols, msg) => {
    expect(() => addon.packWeight(GGML_TYPE[dtype], 2, cols, new Uint8Array(1024))).toThrow(
      expect.objectContaining({ code: 'KVT_ERR_NATIVE_SHAPE', message: expect.stringContaining(msg) }),
    );
  });
});
