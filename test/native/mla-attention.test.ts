// MLA latent pages and absorbed attention (ops/mla-attention.*): vs a dense
// float64 MQA over the same latent rows (V = the first vDim values of each
// row), fast vs reference twin bit for bit (1 and 3 threads, decode-sized and
// prefill-sized calls), query independence (one call == split calls), f16
// and f32 pages, scattered block tables, the other layers untouched, and the
// typed refusals (a K|V pool given to an MLA op and the reverse).
import { describe, expect, it } from 'vitest';

import { CpuBackend, NativeError, PAGE_TOKENS, type AttentionSegment, type KvPoolHandle } from '../../native/index.ts';
import { CpuKvPool, CpuTensor, packSegments } from '../../native/cpu-handles.ts';
import { ISAS, addon, bitsEqual, gridValues, maxAbsDiff, withIsa, withThreads } from './native-fixtures.ts';

const backend = new CpuBackend();

interface Setup {
  pool: KvPoolHandle;
  table: Int32Array;
  lat: Float32Array; // [T][W]
  q: Float32Array; // [T][heads][W]
}

function setup(o: { T: number; heads: number; W: number; layers: number; layer: number; dtype: 'f16' | 'f32'; seed: number }): Setup {
  const blocks = Math.ceil(o.T / PAGE_TOKENS);
  const pages = blocks * 2 + 1;
  const pool = backend.createMlaKvPool({ layers: o.layers, width: o.W, pages, dtype: o.dtype });
  const table = new Int32Array(blocks);
  for (let b = 0; b < blocks; b++) table[b] = (pages - 1 - 2 * b + pages) % pages;
  const lat = gridValues(o.T * o.W, o.seed);
  for (let l = 0; l < o.layers; l++) backend.mlaKvWrite(pool, l, table, 0, o.T, new CpuTensor(l === o.layer ? lat : gridValues(lat.length, 77 + l)));
  return { pool, table, lat, q: gridValues(o.T * o.heads * o.W, o.seed + 1) };
}

function dense(s: Setup, T: number, heads: number, W: number, V: number, scale: number): Float64Array {
  const out = new Float64Array(T * heads * V);
  for (let t = 0; t < T; t++)
    for (let h = 0; h < heads; h++) {
      const sc: number[] = [];
      for (let j = 0; j <= t; j++) {
        let d = 0;
        for (let i = 0; i < W; i++) d += s.q[(t * heads + h) * W + i] * s.lat[j * W + i];
        sc.push(d * scale);
      }
      const m = Math.max(...sc);
      const e = sc.map((x) => Math.exp(x - m));
      const z = e.reduce((a, b) => a + b, 0);
      for (let i = 0; i < V; i++) {
        let acc = 0;
        for (let j = 0; j <= t; j++) acc += e[j] * s.lat[j * W + i];
        out[(t * heads + h) * V + i] = acc / z;
      }
    }
  return out;
}

function run(ref: boolean, s: Setup, segs: AttentionSegment[], rows: number, heads: number, W: number, V: number, layer: number, scale: number): Float32Array {
  const p = s.pool as CpuKvPool;
  const out = new Float32Array(rows * heads * V);
  const { tables, segs: packed } = packSegments(segs);
  const fn = ref ? addon.mlaAttentionRef : addon.mlaAttention;
  fn(out, s.q.subarray(0, rows * heads * W), p.bytes, p.layers, p.headDim, p.kvType, layer, heads, V, scale, tables, packed);
  return out;
}

describe.each(['f16', 'f32'] as const)('MLA attention over %s latent pages', (dtype) => {
  const T = 150;
  const heads = 4;
  const W = 80; // kvLora 64 + rope 16
  const V = 64;
  const scale = 1 / Math.sqrt(48);
  const s = setup({ T, heads, W, layers: 3, layer: 1, dtype, seed: 11 });
  const segs = [{ blockTable: s.table, pos0: 0, queries: T }];

  it('matches a dense float64 MQA with V = the first vDim values of each row', () => {
    const fast = run(false, s, segs, T, heads, W, V, 1, scale);
    const want = dense(s, T, heads, W, V, scale);
    let err = 0;
    for (let i = 0; i < want.length; i++) err = Math.max(err, Math.abs(fast[i] - want[i]));
    expect(err).toBeLessThan(1e-5);
  });

  it(`fast == reference twin bit for bit on every ISA (${ISAS.join(', ')}), 1 and 3 threads; split calls == one call`, () => {
    const ref = run(true, s, segs, T, heads, W, V, 1, scale);
    for (const isa of ISAS)
      for (const threads of [1, 3]) expect(bitsEqual(withIsa(isa, () => withThreads(threads, () => run(false, s, segs, T, heads, W, V, 1, scale))), ref), `${isa} ${threads}`).toBe(true);
    // a width that is not a multiple of 16 (the kernels' masked tail) and a vDim that is not either
    const odd = setup({ T: 70, heads: 3, W: 45, layers: 1, layer: 0, dtype, seed: 5 });
    const oddSegs = [{ blockTable: odd.table, pos0: 0, queries: 70 }];
    const oddRef = run(true, odd, oddSegs, 70, 3, 45, 37, 0, scale);
    for (const isa of ISAS) expect(bitsEqual(withIsa(isa, () => run(false, odd, oddSegs, 70, 3, 45, 37, 0, scale)), oddRef), isa).toBe(true);
    // a decode-sized call (one row, heads split over items) and a prefill in two parts
    const split = [
      { blockTable: s.table, pos0: 0, queries: 100 },
      { blockTable: s.table, pos0: 100, queries: 50 },
    ];
    expect(bitsEqual(withThreads(3, () => run(false, s, split, T, heads, W, V, 1, scale)), ref)).toBe(true);
    const last = new Float32Array(heads * V);
    const p = s.pool as CpuKvPool;
    const { tables, segs: packed } = packSegments([{ blockTable: s.table, pos0: T - 1, queries: 1 }]);
    withThreads(3, () => addon.mlaAttention(last, s.q.subarray((T - 1) * heads * W, T * heads * W), p.bytes, p.layers, p.headDim, p.kvType, 1, heads, V, scale, tables, packed));
    expect(bitsEqual(last, ref.subarray((T - 1) * heads * V))).toBe(true);
  });

  it('mlaKvWrite fast == reference, page bytes identical; other layers untouched', () => {
    const p = s.pool as CpuKvPool;
    const copy = new Uint8Array(p.bytes);
    const rows = gridValues(70 * W, 5);
    addon.mlaKvWrite(p.bytes, p.layers, W, p.kvType, 2, s.table, 10, 70, rows);
    const fastBytes = new Uint8Array(p.bytes);
    p.bytes.set(copy);
    addon.mlaKvWriteRef(p.bytes, p.layers, W, p.kvType, 2, s.table, 10, 70, rows);
    expect(Buffer.from(p.bytes).equals(Buffer.from(fastBytes))).toBe(true);
    const after = run(true, s, segs, T, heads, W, V, 1, scale);
    p.bytes.set(copy);
    expect(maxAbsDiff(after, run(true, s, segs, T, heads, W, V, 1, scale))).toBe(0);
  });
});

describe('MLA pool refusals', () => {
  it('page bytes are layers · 64 · width · bytes(dtype)', () => {
    const p = backend.createMlaKvPool({ layers: 3, width: 80, pages: 2, dtype: 'f16' });
    expect(p.pageBytes).toBe(3 * 64 * 80 * 2);
  });
  it('a K|V pool is refused by the MLA ops and a latent pool by kvWrite/attention', () => {
    const kv = backend.createKvPool({ layers: 1, kvHeads: 1, headDim: 16, pages: 1 });
    const mla = backend.createMlaKvPool({ layers: 1, width: 16, pages: 1 });
    const t = new CpuTensor(new Float32Array(16));
    expect(() => backend.mlaKvWrite(kv, 0, Int32Array.of(0), 0, 1, t)).toThrow(NativeError);
    expect(() => backend.kvWrite(mla, 0, Int32Array.of(0), 0, 1, t, t)).toThrow(NativeError);
    expect(() => backend.mlaAttention(t, t, mla, 0, 1, 32, 1, [{ blockTable: Int32Array.of(0), pos0: 0, queries: 1 }])).toThrow(/vDim/);
  });
});
