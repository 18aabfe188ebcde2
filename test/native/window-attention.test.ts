// Sliding-window attention, geglu and scale (native/src/ops/window-attention.*):
// against a dense float64 windowed attention, fast vs reference twin bit for
// bit, window 0 == the plain attention op bit for bit, one prefill call ==
// split calls == decode rows (query independence), thread counts; geglu
// against ggml's f16-table GELU formula, scale exact.
import { describe, expect, it } from 'vitest';

import { CpuBackend, PAGE_TOKENS, type AttentionSegment } from '../../native/index.ts';
import { CpuKvPool, CpuTensor, packSegments } from '../../native/cpu-handles.ts';
import { addon, bitsEqual, gridValues, maxAbsDiff, withThreads } from './native-fixtures.ts';

const backend = new CpuBackend();

function setup(T: number, heads: number, kvHeads: number, D: number, dtype: 'f16' | 'f32', seed: number) {
  const blocks = Math.ceil(T / PAGE_TOKENS);
  const pages = blocks * 2 + 1;
  const pool = backend.createKvPool({ layers: 2, kvHeads, headDim: D, pages, dtype });
  const table = new Int32Array(blocks);
  for (let b = 0; b < blocks; b++) table[b] = (pages - 1 - 2 * b + pages) % pages;
  const k = gridValues(T * kvHeads * D, seed);
  const v = gridValues(T * kvHeads * D, seed + 1);
  const q = gridValues(T * heads * D, seed + 2);
  backend.kvWrite(pool, 0, table, 0, T, new CpuTensor(gridValues(k.length, 77)), new CpuTensor(gridValues(k.length, 78)));
  backend.kvWrite(pool, 1, table, 0, T, new CpuTensor(k), new CpuTensor(v));
  // what the pool holds (f16 rounds)
  const read = (x: Float32Array) => (dtype === 'f16' ? Float32Array.from(x, (y) => Math.fround(f16(y))) : x);
  return { pool, table, k: read(k), v: read(v), q };
}

function f16(x: number): number {
  const a = new Float32Array([x]);
  const h = new Uint16Array(1);
  const out = new Float32Array(1);
  // round through the native converter: quantize F16 then dequantize
  addon.quantize(new Uint8Array(h.buffer), a, 1, 1);
  addon.dequantize(out, new Uint8Array(h.buffer), 1, 1);
  return out[0];
}

function dense(s: ReturnType<typeof setup>, T: number, heads: number, kvHeads: number, D: number, scale: number, window: number, sinks?: Float32Array): Float64Array {
  const out = new Float64Array(T * heads * D);
  const group = heads / kvHeads;
  for (let t = 0; t < T; t++)
    for (let h = 0; h < heads; h++) {
      const g = Math.floor(h / group);
      const lo = window > 0 ? Math.max(0, t - window + 1) : 0;
      const sc: number[] = [];
      for (let j = lo; j <= t; j++) {
        let d = 0;
        for (let i = 0; i < D; i++) d += s.q[(t * heads + h) * D + i] * s.k[(j * kvHeads + g) * D + i];
        sc.push(d * scale);
      }
      const m = Math.max(...sc, sinks ? sinks[h] : -Infinity);
      const e = sc.map((x) => Math.exp(x - m));
      // a sink joins the denominator with no value row (gpt-oss)
      const z = e.reduce((a, b) => a + b, 0) + (sinks ? Math.exp(sinks[h] - m) : 0);
      for (let i = 0; i < D; i++) {
        let o = 0;
        for (let j = lo; j <= t; j++) o += e[j - lo] * s.v[(j * kvHeads + g) * D + i];
        out[(t * heads + h) * D + i] = o / z;
      }
    }
  return out;
}

function run(ref: boolean, s: ReturnType<typeof setup>, heads: number, scale: number, window: number, segments: AttentionSegment[], rows: number, D: number, sinks?: Float32Array): Float32Array {
  const p = s.pool as CpuKvPool;
  const out = new Float32Array(rows * heads * D);
  const { tables, segs } = packSegments(segments);
  const fn = ref ? addon.windowAttentionRef : addon.windowAttention;
  fn(out, segments.length === 1 && segments[0].pos0 === 0 ? s.q : sliceQ(s.q, segments, heads, D), p.bytes, p.layers, p.kvHeads, p.headDim, p.kvType, 1, heads, scale, window, tables, segs, sinks);
  return out;
}

function sliceQ(q: Float32Array, segments: AttentionSegment[], heads: number, D: number): Float32Array {
  const parts: Float32Array[] = segments.map((sg) => q.subarray(sg.pos0 * heads * D, (sg.pos0 + sg.queries) * heads * D));
  const out = new Float32Array(parts.reduce((a, p) => a + p.length, 0));
  let off = 0;
  for (const p of parts) {
    out.set(p, off);
    off += p.length;
  }
  return out;
}

describe('windowAttention', () => {
  const T = 150;
  const shapes = [
    { heads: 4, kvHeads: 2, D: 16, dtype: 'f16' as const },
    { heads: 4, kvHeads: 1, D: 32, dtype: 'f32' as const },
    { heads: 2, kvHeads: 2, D: 20, dtype: 'f16' as const },
  ];
  it.each(shapes.flatMap((sh) => [1, 16, 64, 100, 0].map((window) => ({ ...sh, window }))))(
    'heads $heads/$kvHeads D $D $dtype window $window: matches dense float64, ref == fast bit for bit',
    ({ heads, kvHeads, D, dtype, window }) => {
      const s = setup(T, heads, kvHeads, D, dtype, 11 + D + window);
      const scale = 1 / Math.sqrt(D);
      const seg = [{ blockTable: s.table, pos0: 0, queries: T }];
      const fast = run(false, s, heads, scale, window, seg, T, D);
      const ref = run(true, s, heads, scale, window, seg, T, D);
      expect(bitsEqual(fast, ref)).toBe(true);
      expect(maxAbsDiff(fast, Float32Array.from(dense(s, T, heads, kvHeads, D, scale, window)))).toBeLessThan(2e-5);
      for (const threads of [1, 3]) withThreads(threads, () => expect(bitsEqual(run(false, s, heads, scale, window, seg, T, D), fast)).toBe(true));
    },
  );

  it('window 0 equals the plain attention op bit for bit; a window ≥ the context too', () => {
    const heads = 4, kvHeads = 2, D = 16;
    const s = setup(T, heads, kvHeads, D, 'f16', 5);
    const p = s.pool as CpuKvPool;
    const seg = [{ blockTable: s.table, pos0: 0, queries: T }];
    const { tables, segs } = packSegments(seg);
    const plain = new Float32Array(T * heads * D);
    addon.attention(plain, s.q, p.bytes, p.layers, p.kvHeads, p.headDim, p.kvType, 1, heads, 0.25, tables, segs);
    expect(bitsEqual(run(false, s, heads, 0.25, 0, seg, T, D), plain)).toBe(true);
    expect(bitsEqual(run(false, s, heads, 0.25, T, seg, T, D), plain)).toBe(true);
    // and the window changes the answer when it is shorter than the context
    expect(bitsEqual(run(false, s, heads, 0.25, 16, seg, T, D), plain)).toBe(false);
  });

  it('split prefill calls and single decode rows give the same bits as one call', () => {
    const heads = 4, kvHeads = 2, D = 16, window = 40;
    const s = setup(T, heads, kvHeads, D, 'f16', 9);
    const whole = run(false, s, heads, 0.25, window, [{ blockTable: s.table, pos0: 0, queries: T }], T, D);
    const split = [
      { blockTable: s.table, pos0: 0, queries: 37 },
      { blockTable: s.table, pos0: 37, queries: 90 },
      { blockTable: s.table, pos0: 127, queries: 1 },
      { blockTable: s.table, pos0: 128, queries: 22 },
    ];
    expect(bitsEqual(run(false, s, heads, 0.25, window, split, T, D), whole)).toBe(true);
    expect(bitsEqual(run(true, s, heads, 0.25, window, split, T, D), whole)).toBe(true);
  });

  it.each([0, 40])('attention sinks (gpt-oss), window %i: match dense float64 with the sink in the softmax, ref == fast, split calls == one call', (window) => {
    const heads = 4, kvHeads = 2, D = 16;
    const s = setup(T, heads, kvHeads, D, 'f16', 21 + window);
    const sinks = Float32Array.from([0.5, -1, 2, 3]);
    const seg = [{ blockTable: s.table, pos0: 0, queries: T }];
    const fast = run(false, s, heads, 0.25, window, seg, T, D, sinks);
    expect(bitsEqual(run(true, s, heads, 0.25, window, seg, T, D, sinks), fast)).toBe(true);
    expect(maxAbsDiff(fast, Float32Array.from(dense(s, T, heads, kvHeads, D, 0.25, window, sinks)))).toBeLessThan(2e-5);
    expect(maxAbsDiff(fast, run(false, s, heads, 0.25, window, seg, T, D))).toBeGreaterThan(1e-3);
    const split = [
      { blockTable: s.table, pos0: 0, queries: 41 },
      { blockTable: s.table, pos0: 41, queries: 1 },
      { blockTable: s.table, pos0: 42, queries: 108 },
    ];
    expect(bitsEqual(run(false, s, heads, 0.25, window, split, T, D, sinks), fast)).toBe(true);
    expect(() => run(false, s, heads, 0.25, window, seg, T, D, new Float32Array(3))).toThrow(/one float per head/);
  });

  it('a bad shape is a typed error, nothing written', () => {
    const s = setup(10, 4, 2, 16, 'f16', 1);
    const p = s.pool as CpuKvPool;
    const { tables, segs } = packSegments([{ blockTable: s.table, pos0: 0, queries: 10 }]);
    const out = new Float32Array(5);
    expect(() => addon.windowAttention(out, s.q, p.bytes, p.layers, p.kvHeads, p.headDim, p.kvType, 1, 4, 1, 4, tables, segs)).toThrow(/Σqueries/);
    expect(() => addon.windowAttention(new Float32Array(640), s.q, p.bytes, p.layers, p.kvHeads, p.headDim, p.kvType, 1, 3, 1, 4, tables, segs)).toThrow(/multiple of kvHeads/);
    expect(Array.from(out)).toEqual([0, 0, 0, 0, 0]);
  });
});

describe('geglu and scale', () => {
  it('geglu == ggml formula through f16 (table) bit for bit, fast == ref, tails at ±10', () => {
    const n = 20000;
    const gate = Float32Array.from({ length: n }, (_, i) => (i / n - 0.5) * 30);
    const up = gridValues(n, 3);
    const fast = new Float32Array(n);
    const ref = new Float32Array(n);
    addon.geglu(fast, gate, up, n);
    addon.gegluRef(ref, gate, up, n);
    expect(bitsEqual(fast, ref)).toBe(true);
    for (let i = 0; i < n; i += 97) {
      const g = gate[i];
      let want: number;
      if (g <= -10) want = 0;
      else if (g >= 10) want = Math.fround(g * up[i]);
      else {
        const x = f16(g);
        const gelu = f16(0.5 * x * (1 + Math.tanh(0.7978845608028654 * x * (1 + 0.044715 * x * x))));
        want = Math.fround(gelu * up[i]);
      }
      // f32 tanhf vs float64 Math.tanh: the same f16 value except at a rounding tie, and in the far
      // negative tail where 1 + tanh cancels (GELU < 1e-6 there)
      expect(Math.abs(fast[i] - want)).toBeLessThanOrEqual(Math.abs(want) * 1e-3 + 1e-6 * Math.abs(up[i]));
    }
    withThreads(3, () => {
      const again = new Float32Array(n);
      backend.geglu(new CpuTensor(again), new CpuTensor(gate), new CpuTensor(up), n);
      expect(bitsEqual(again, fast)).toBe(true);
    });
  });

  it('scale multiplies in f32, in place allowed', () => {
    const x = gridValues(1000, 4);
    const out = new Float32Array(1000);
    addon.scale(out, x, 8, 1000);
    expect(Array.from(out)).toEqual(Array.from(x, (v) => Math.fround(v * 8)));
    const t = new CpuTensor(x.slice());
    backend.scale(t, t, 0.5, 1000);
    expect(Array.from(backend.read(t))).toEqual(Array.from(x, (v) => Math.fround(v * 0.5)));
  });
});
