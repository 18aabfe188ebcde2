/**
 * The native draw (src/ops/sample-masked.h) against its plain twin, and the
 * twin's law against the sampler's law written out in float64 here.
 *  - fast == twin, token for token, on every ISA: random logits (spread,
 *    narrow, tied, with -inf), masks (dense, sparse, empty words, all, none),
 *    odd lengths, top-k / top-p / temperature combinations, random u.
 *  - the law: over 4,096 evenly spaced u the share of each token equals
 *    softmax(x/T) over the kept set K (K: x descending, lower id first on
 *    ties; top-k, then the fewest reaching top-p), within 1/4096 + 1e-6.
 */
import { describe, expect, it } from 'vitest';

import { addon, ISAS, rng, withIsa } from './native-fixtures.ts';

interface Case {
  x: Float32Array;
  mask: Uint32Array | null;
  invT: number;
  topK: number;
  topP: number;
}

function logitsOf(n: number, kind: number, r: () => number): Float32Array {
  const x = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    if (kind === 0) x[i] = (r() * 2 - 1) * 8;
    else if (kind === 1) x[i] = r() * 0.01;
    else if (kind === 2) x[i] = Math.floor(r() * 4); // ties
    else x[i] = r() < 0.2 ? -Infinity : (r() * 2 - 1) * 30;
  }
  return x;
}

function maskOf(n: number, kind: number, r: () => number): Uint32Array | null {
  if (kind === 0) return null;
  const m = new Uint32Array((n + 31) >>> 5);
  for (let w = 0; w < m.length; w++) {
    if (kind === 1) m[w] = (r() * 4294967296) >>> 0;
    else if (kind === 2) m[w] = r() < 0.7 ? 0 : 1 << Math.floor(r() * 32);
    else m[w] = 0xffffffff;
  }
  // Bits past n must be ignored.
  m[m.length - 1] |= 0x80000000;
  return m;
}

function cases(count: number, seed: number): Case[] {
  const r = rng(seed);
  const sizes = [1, 15, 16, 17, 33, 100, 1000, 5003];
  const out: Case[] = [];
  for (let c = 0; c < count; c++) {
    const n = sizes[c % sizes.length];
    out.push({
      x: logitsOf(n, Math.floor(r() * 4), r),
      mask: maskOf(n, Math.floor(r() * 4), r),
      invT: [1, 0.5, 3, 1 / 0.7][Math.floor(r() * 4)],
      topK: [0, 1, 3, 40, n + 5][Math.floor(r() * 5)],
      topP: [1, 0.9, 0.5, 0.01][Math.floor(r() * 4)],
    });
  }
  return out;
}

const u32 = (r: () => number) => (r() * 4294967296) >>> 0;

describe('sampleMasked (native draw)', () => {
  for (const isa of ISAS) {
    it(`${isa}: the same token as the twin on 400 random cases × 8 draws`, () => {
      const r = rng(17);
      const mismatches: string[] = [];
      let drawn = 0;
      withIsa(isa, () => {
        cases(400, 5).forEach((c, ci) => {
          for (let d = 0; d < 8; d++) {
            const hi = u32(r), lo = u32(r);
            const fast = addon.sampleMasked(c.x, c.mask, c.invT, c.topK, c.topP, hi, lo);
            const ref = addon.sampleMaskedRef(c.x, c.mask, c.invT, c.topK, c.topP, hi, lo);
            if (fast !== ref) mismatches.push(`case ${ci} draw ${d}: ${fast} vs ${ref}`);
            if (ref >= 0) drawn++;
          }
        });
      });
      expect(mismatches.slice(0, 5)).toEqual([]);
      expect(drawn).toBeGreaterThan(2500); // most cases allow some id
    });
  }

  it('a 128k vocabulary: fast == twin with and without a mask, top-k 40 and top-p 0.9', () => {
    const r = rng(3);
    const n = 128256;
    const x = logitsOf(n, 0, r);
    const mask = maskOf(n, 1, r);
    for (const [k, p] of [[0, 1], [40, 1], [0, 0.9], [50, 0.95]]) {
      for (const m of [null, mask]) {
        const hi = u32(r), lo = u32(r);
        expect(addon.sampleMasked(x, m, 1, k, p, hi, lo)).toBe(addon.sampleMaskedRef(x, m, 1, k, p, hi, lo));
      }
    }
  });

  it('no allowed id → -1; every allowed logit -inf → the lowest allowed id', () => {
    const x = new Float32Array(40).fill(1);
    expect(addon.sampleMasked(x, new Uint32Array(2), 1, 0, 1, 5, 5)).toBe(-1);
    expect(addon.sampleMaskedRef(x, new Uint32Array(2), 1, 0, 1, 5, 5)).toBe(-1);
    const inf = new Float32Array(40).fill(-Infinity);
    expect(addon.sampleMasked(inf, Uint32Array.of(0, 0b1010), 1, 0, 1, 5, 5)).toBe(33);
    expect(addon.sampleMaskedRef(inf, Uint32Array.of(0, 0b1010), 1, 0, 1, 5, 5)).toBe(33);
  });

  it('bad arguments are typed errors', () => {
    const x = new Float32Array(8);
    for (const bad of [() => addon.sampleMasked(x, new Uint32Array(0), 1, 0, 1, 0, 0), () => addon.sampleMasked(x, null, 0, 0, 1, 0, 0), () => addon.sampleMasked(x, null, 1, 0, 1.5, 0, 0), () => addon.sampleMasked(x, null, 1, -1, 1, 0, 0)]) {
      expect(bad).toThrow(expect.objectContaining({ code: 'KVT_ERR_NATIVE_ARG' }));
    }
  });
});

/** The sampler's law in float64: softmax(x·invT) over K (top-k, then top-p on the sorted order), by id. */
function lawOf(c: Case): Map<number, number> {
  const ids: number[] = [];
  for (let i = 0; i < c.x.length; i++) if (!c.mask || (c.mask[i >>> 5] >>> (i & 31)) & 1) ids.push(i);
  const order = [...ids].sort((a, b) => c.x[b] - c.x[a] || a - b);
  if (order.length === 0) return new Map();
  const max = c.x[order[0]];
  const w = order.map((i) => Math.exp((c.x[i] - max) * c.invT));
  let k = c.topK > 0 && c.topK < order.length ? c.topK : order.length;
  const sumK = w.slice(0, k).reduce((a, b) => a + b, 0);
  if (c.topP < 1) {
    let cum = 0;
    for (let j = 0; j < k; j++) {
      cum += w[j] / sumK;
      if (cum >= c.topP) {
        k = j + 1;
        break;
      }
    }
  }
  const kept = w.slice(0, k).reduce((a, b) => a + b, 0);
  return new Map(order.slice(0, k).map((id, j) => [id, w[j] / kept]));
}

describe('the law of the draw', () => {
  it('token shares over evenly spaced u equal softmax over the kept set (24 cases)', () => {
    const r = rng(99);
    const steps = 4096;
    let checked = 0;
    for (let ci = 0; ci < 24; ci++) {
      const n = 50 + ci * 7;
      const c: Case = { x: logitsOf(n, ci % 2 === 0 ? 0 : 2, r), mask: maskOf(n, 1 + (ci % 3), r), invT: [1, 0.5, 1 / 0.7][ci % 3], topK: [0, 5, 12][ci % 3], topP: [1, 0.8, 0.95, 1][ci % 4] };
      const law = lawOf(c);
      if (law.size === 0) {
        expect(addon.sampleMaskedRef(c.x, c.mask, c.invT, c.topK, c.topP, 1, 1)).toBe(-1);
        continue;
      }
      const counts = new Map<number, number>();
      for (let s = 0; s < steps; s++) {
        // u = (s + 0.5)/steps · 2^64 as (hi, lo)
        const u = (s + 0.5) / steps;
        const hi = Math.floor(u * 4294967296);
        const t = addon.sampleMaskedRef(c.x, c.mask, c.invT, c.topK, c.topP, hi, 0);
        counts.set(t, (counts.get(t) ?? 0) + 1);
      }
      for (const t of counts.keys()) expect(law.has(t), `case ${ci}: token ${t} outside K`).toBe(true);
      for (const [t, p] of law) expect(Math.abs((counts.get(t) ?? 0) / steps - p), `case ${ci} token ${t}`).toBeLessThanOrEqual(1 / steps + 1e-6);
      checked++;
    }
    expect(checked).toBeGreaterThan(16);
  });
});
