// Paged attention: vs a dense float64 attention over the same K/V, fast vs
// reference twin, prefill vs split calls vs decode (query independence),
// GQA, scattered block tables, f16 and f32 pages, thread counts, ISAs.
import { describe, expect, it } from 'vitest';

import { CpuBackend, PAGE_TOKENS, type AttentionSegment, type KvPoolHandle } from '../../native/index.ts';
import { CpuKvPool, CpuTensor, packSegments } from '../../native/cpu-handles.ts';
import { addon, bitsEqual, gridValues, ISAS, maxAbsDiff, withIsa, withThreads } from './native-fixtures.ts';

const backend = new CpuBackend();

interface Setup {
  pool: KvPoolHandle;
  table: Int32Array;
  k: Float32Array; // [T][kvHeads][D]
  v: Float32Array;
  q: Float32Array; // [T][heads][D]
}

function setup(opts: { T: number; heads: number; kvHeads: number; D: number; layers: number; layer: number; dtype: 'f16' | 'f32'; seed: number }): Setup {
  const blocks = Math.ceil(opts.T / PAGE_TOKENS);
  const pages = blocks * 2 + 1;
  const pool = backend.createKvPool({ layers: opts.layers, kvHeads: opts.kvHeads, headDim: opts.D, pages, dtype: opts.dtype });
  // scattered, non-monotonic page order
  const table = new Int32Array(blocks);
  for (let b = 0; b < blocks; b++) table[b] = (pages - 1 - 2 * b + pages) % pages;
  const k = gridValues(opts.T * opts.kvHeads * opts.D, opts.seed);
  const v = gridValues(opts.T * opts.kvHeads * opts.D, opts.seed + 1);
  const q = gridValues(opts.T * opts.heads * opts.D, opts.seed + 2);
  // other layers get different data so a wrong layer offset shows
  for (let l = 0; l < opts.layers; l++) {
    const kk = l === opts.layer ? k : gridValues(k.length, 99 + l);
    backend.kvWrite(pool, l, table, 0, opts.T, new CpuTensor(kk), new CpuTensor(l === opts.layer ? v : kk));
  }
  return { pool, table, k, v, q };
}

function denseAttention(s: Setup, T: number, heads: number, kvHeads: number, D: number, scale: number): Float64Array {
  const out = new Float64Array(T * heads * D);
  const group = heads / kvHeads;
  for (let t = 0; t < T; t++)
    for (let h = 0; h < heads; h++) {
      const g = Math.floor(h / group);
      const sc: number[] = [];
      for (let j = 0; j <= t; j++) {
        let d = 0;
        for (let i = 0; i < D; i++) d += s.q[(t * heads + h) * D + i] * s.k[(j * kvHeads + g) * D + i];
        sc.push(d * scale);
      }
      const m = Math.max(...sc);
      const e = sc.map((x) => Math.exp(x - m));
      const z = e.reduce((a, b) => a + b, 0);
      for (let i = 0; i < D; i++) {
        let o = 0;
        for (let j = 0; j <= t; j++) o += e[j] * s.v[(j * kvHeads + g) * D + i];
        out[(t * heads + h) * D + i] = o / z;
      }
    }
  return out;
}

function attend(s: Setup, heads: number, layer: number, scale: number, segments: AttentionSegment[], rows: number, D: number, ref = false): Float32Array {
  const out = new Float32Array(rows * heads * D);
  const qRows = new Float32Array(rows * heads * D);
  let r = 0;
  for (const seg of segments) {
    qRows.set(s.q.subarray(seg.pos0 * heads * D, (seg.pos0 + seg.queries) * heads * D), r * heads * D);
    r += seg.queries;
  }
  if (ref) {
    const p = s.pool as CpuKvPool;
    const { tables, segs } = packSegments(segments);
    addon.attentionRef(out, qRows, p.bytes, p.layers, p.kvHeads, p.headDim, p.kvType, layer, heads, scale, tables, segs);
  } else {
    backend.attention(new CpuTensor(out), new CpuTensor(qRows), s.pool, layer, heads, scale, segments);
  }
  return out;
}

describe('paged attention', () => {
  const cases = [
    { T: 1, heads: 4, kvHeads: 4, D: 16, dtype: 'f16' as const },
    { T: 70, heads: 6, kvHeads: 2, D: 64, dtype: 'f16' as const },
    { T: 130, heads: 3, kvHeads: 1, D: 40, dtype: 'f32' as const },
  ];
  for (const c of cases) {
    it(`T=${c.T} heads=${c.heads}/${c.kvHeads} D=${c.D} ${c.dtype}: matches dense float64 attention within 2e-5`, () => {
      const s = setup({ ...c, layers: 3, layer: 1, seed: c.T });
      const scale = 1 / Math.sqrt(c.D);
      const got = attend(s, c.heads, 1, scale, [{ blockTable: s.table, pos0: 0, queries: c.T }], c.T, c.D);
      const want = denseAttention(s, c.T, c.heads, c.kvHeads, c.D, scale);
      let md = 0;
      for (let i = 0; i < got.length; i++) md = Math.max(md, Math.abs(got[i] - want[i]));
      expect(md).toBeLessThan(2e-5);
    });
  }

  it('fast == reference twin on every ISA, and ISAs agree bit for bit', () => {
    const c = { T: 90, heads: 4, kvHeads: 2, D: 64, layers: 2, layer: 0, dtype: 'f16' as const, seed: 5 };
    const s = setup(c);
    const seg = [{ blockTable: s.table, pos0: 0, queries: c.T }];
    const ref = attend(s, c.heads, 0, 0.125, seg, c.T, c.D, true);
    for (const isa of ISAS) {
      const fast = withIsa(isa, () => attend(s, c.heads, 0, 0.125, seg, c.T, c.D));
      expect(bitsEqual(fast, ref), isa).toBe(true);
    }
  });

  it('a query gives the same bits whether prefilled all at once, in chunks, or decoded one by one', () => {
    const c = { T: 150, heads: 4, kvHeads: 2, D: 64, layers: 1, layer: 0, dtype: 'f16' as const, seed: 8 };
    const s = setup(c);
    const rowLen = c.heads * c.D;
    const all = attend(s, c.heads, 0, 0.125, [{ blockTable: s.table, pos0: 0, queries: c.T }], c.T, c.D);
    // "import 2 blocks + prefill the rest": queries 128.. in one call
    const rest = attend(s, c.heads, 0, 0.125, [{ blockTable: s.table, pos0: 128, queries: c.T - 128 }], c.T - 128, c.D);
    expect(bitsEqual(rest, all.subarray(128 * rowLen))).toBe(true);
    // decode-style: a batch of single-query segments at different positions
    const positions = [0, 63, 64, 149];
    const dec = attend(s, c.heads, 0, 0.125, positions.map((p) => ({ blockTable: s.table, pos0: p, queries: 1 })), positions.length, c.D);
    positions.forEach((p, i) => expect(bitsEqual(dec.subarray(i * rowLen, (i + 1) * rowLen), all.subarray(p * rowLen, (p + 1) * rowLen))).toBe(true));
  });

  it('1 and 2 threads give the same bits', () => {
    const c = { T: 100, heads: 6, kvHeads: 3, D: 32, layers: 1, layer: 0, dtype: 'f16' as const, seed: 3 };
    const s = setup(c);
    const seg = [{ blockTable: s.table, pos0: 0, queries: c.T }];
    const one = withThreads(1, () => attend(s, c.heads, 0, 0.2, seg, c.T, c.D));
    const two = withThreads(2, () => attend(s, c.heads, 0, 0.2, seg, c.T, c.D));
    expect(maxAbsDiff(one, two)).toBe(0);
  });

  // A cached chat turn: prefill rows deep in the context plus decode rows in
  // the same call. Row counts that are not multiples of the kernel's row
  // blocks, head groups of 2 and 3 and head dims of 1, 2, 4 and 8 chunks
  // reach every pair-blocked path and its per-pair remainders.
  const turnCases = [
    { heads: 12, kvHeads: 4, D: 64, dtype: 'f16' as const, pos0: 610, queries: 37, decode: [0, 17, 300, 646] },
    { heads: 6, kvHeads: 3, D: 128, dtype: 'f16' as const, pos0: 200, queries: 19, decode: [63, 64, 218] },
    { heads: 9, kvHeads: 3, D: 32, dtype: 'f32' as const, pos0: 129, queries: 23, decode: [1, 151] },
    { heads: 6, kvHeads: 2, D: 16, dtype: 'f16' as const, pos0: 77, queries: 13, decode: [89] },
  ];
  for (const c of turnCases) {
    it(`prefill rows at ${c.pos0}.. + decode rows, heads=${c.heads}/${c.kvHeads} D=${c.D} ${c.dtype}: fast == reference on every ISA and thread count, same bits as a whole prefill`, () => {
      const T = c.pos0 + c.queries;
      const s = setup({ T, heads: c.heads, kvHeads: c.kvHeads, D: c.D, layers: 2, layer: 1, dtype: c.dtype, seed: c.D + c.pos0 });
      const rowLen = c.heads * c.D;
      const segs = [
        ...c.decode.slice(0, 2).map((p) => ({ blockTable: s.table, pos0: p, queries: 1 })),
        { blockTable: s.table, pos0: c.pos0, queries: c.queries },
        ...c.decode.slice(2).map((p) => ({ blockTable: s.table, pos0: p, queries: 1 })),
      ];
      const rows = c.queries + c.decode.length;
      const ref = attend(s, c.heads, 1, 0.125, segs, rows, c.D, true);
      for (const isa of ISAS) {
        for (const threads of [1, 2]) {
          const fast = withIsa(isa, () => withThreads(threads, () => attend(s, c.heads, 1, 0.125, segs, rows, c.D)));
          expect(bitsEqual(fast, ref), `${isa} ${threads} threads`).toBe(true);
        }
      }
      const whole = attend(s, c.heads, 1, 0.125, [{ blockTable: s.table, pos0: 0, queries: T }], T, c.D);
      let r = 0;
      for (const seg of segs) {
        const got = ref.subarray(r * rowLen, (r + seg.queries) * rowLen);
        expect(bitsEqual(got, whole.subarray(seg.pos0 * rowLen, (seg.pos0 + seg.queries) * rowLen)), `rows at ${seg.pos0}`).toBe(true);
        r += seg.queries;
      }
    });
  }

  it('rejects a block table that does not cover the positions', () => {
    const s = setup({ T: 64, heads: 2, kvHeads: 2, D: 16, layers: 1, layer: 0, dtype: 'f16', seed: 1 });
    expect(() => attend(s, 2, 0, 0.25, [{ blockTable: s.table, pos0: 60, queries: 5 }], 5, 16)).toThrow(
      expect.objectContaining({ code: 'KVT_ERR_NATIVE_SHAPE' }),
    );
  });
});

describe('kvWrite', () => {
  it('fast == reference twin; lands at page[layer][K|V][head][slot][:]', () => {
    const [layers, kvHeads, D, n, pos0] = [2, 3, 8, 70, 5];
    const p1 = backend.createKvPool({ layers, kvHeads, headDim: D, pages: 3 }) as CpuKvPool;
    const p2 = backend.createKvPool({ layers, kvHeads, headDim: D, pages: 3 }) as CpuKvPool;
    const table = new Int32Array([2, 0]);
    const k = gridValues(n * kvHeads * D, 1);
    const v = gridValues(n * kvHeads * D, 2);
    backend.kvWrite(p1, 1, table, pos0, n, new CpuTensor(k), new CpuTensor(v));
    addon.kvWriteRef(p2.bytes, layers, kvHeads, D, 1, 1, table, pos0, n, k, v);
    expect(Buffer.from(p1.bytes).equals(Buffer.from(p2.bytes))).toBe(true);
    // token t=0 → position 5 → page 2 slot 5; V of head 2
    const page = new Float32Array(p1.pageBytes / 2);
    addon.dequantize(page, backend.copyFromPage(p1, 2), 1, page.length);
    const off = (((1 * 2 + 1) * kvHeads + 2) * 64 + 5) * D;
    expect(Array.from(page.subarray(off, off + D))).toEqual(Array.from(v.subarray(2 * D, 3 * D)));
  });
});
