/**
 * The deepseek4 lightning indexer (native/src/ops/dsv4-indexer.h): the threaded
 * kernel, its one-thread reference twin and the TypeScript reference
 * indexerTopK (the path when the native engine is off) pick the same keys in the
 * same order, on scores full of exact ties (small-integer queries and keys,
 * repeated keys, ReLU zeros) and on tokens with no more candidates than top-k.
 */
import { describe, expect, it } from 'vitest';

import type { Deepseek4Config } from '../../inference-core/engine/deepseek4-config.ts';
import { indexerTopK } from '../../inference-core/engine/deepseek4-compressor.ts';
import { Xoshiro128 } from '../../inference-core/synthetic/index.ts';
import { dsv4IndexerTopK } from '../../native/index.ts';

const rng = new Xoshiro128(4);
const u = () => rng.nextU32() / 2 ** 32;

interface Case {
  T: number;
  H: number;
  D: number;
  k: number;
  nKeys: number;
  /** values: 'int' draws from {−1, 0, 1} (exact ties everywhere), 'real' from [−1, 1) */
  values: 'int' | 'real';
}

function build(c: Case) {
  const draw = c.values === 'int' ? () => Math.floor(u() * 3) - 1 : () => u() * 2 - 1;
  const keys: Float32Array[] = [];
  for (let j = 0; j < c.nKeys; j++) {
    // every fifth key repeats an earlier one: equal scores on different indices
    keys.push(j % 5 === 4 ? keys[Math.floor(u() * j)]!.slice() : Float32Array.from({ length: c.D }, draw));
  }
  const q = Float32Array.from({ length: c.T * c.H * c.D }, draw);
  const w = Float32Array.from({ length: c.T * c.H }, () => (c.values === 'int' ? 1 + Math.floor(u() * 2) : u() * 2 - 0.5));
  // key counts: none, below, at and just above k, every key, then any
  const base = [0, 1, c.k - 1, c.k, c.k + 1, c.nKeys];
  const n = Int32Array.from({ length: c.T }, (_, t) => (t < base.length ? base[t]! : Math.floor(u() * (c.nKeys + 1))));
  return { keys, q, w, n };
}

function typescriptPicks(c: Case, keys: Float32Array[], q: Float32Array, w: Float32Array, n: Int32Array): number[][] {
  const cfg = { indexerTopK: c.k, indexerHeads: c.H, indexerDim: c.D } as Deepseek4Config;
  return Array.from(n, (m, t) => indexerTopK(cfg, () => q.subarray(t * c.H * c.D, (t + 1) * c.H * c.D), () => w.subarray(t * c.H, (t + 1) * c.H), keys.slice(0, m)));
}

function nativePicks(c: Case, keys: Float32Array[], q: Float32Array, w: Float32Array, n: Int32Array, ref: boolean): number[][] {
  const packed = new Float32Array(c.nKeys * c.D);
  keys.forEach((k, j) => packed.set(k, j * c.D));
  const sel = new Int32Array(c.T * c.k).fill(-1);
  dsv4IndexerTopK(sel, q, w, packed, n, c.T, c.H, c.D, c.k, 1 / Math.sqrt(c.D * c.H), ref);
  return Array.from(n, (m, t) => Array.from(sel.subarray(t * c.k, t * c.k + Math.min(m, c.k))));
}

describe('dsv4IndexerTopK', () => {
  const cases: Case[] = [
    { T: 40, H: 4, D: 64, k: 8, nKeys: 70, values: 'int' },
    { T: 30, H: 3, D: 5, k: 7, nKeys: 41, values: 'int' },
    { T: 25, H: 2, D: 16, k: 1, nKeys: 30, values: 'int' },
    { T: 25, H: 2, D: 16, k: 2, nKeys: 30, values: 'int' },
    { T: 33, H: 4, D: 64, k: 64, nKeys: 203, values: 'real' },
    { T: 12, H: 5, D: 24, k: 13, nKeys: 50, values: 'real' },
  ];
  for (const c of cases) {
    it(`native, native _ref and TypeScript pick alike (T ${c.T}, H ${c.H}, D ${c.D}, k ${c.k}, ${c.nKeys} keys, ${c.values})`, () => {
      const { keys, q, w, n } = build(c);
      const ts = typescriptPicks(c, keys, q, w, n);
      expect(nativePicks(c, keys, q, w, n, false)).toEqual(ts);
      expect(nativePicks(c, keys, q, w, n, true)).toEqual(ts);
      // the shapes do exercise both sides of k, and ties decide some picks
      expect(ts.some((p, t) => n[t]! < c.k && p.length === n[t])).toBe(true);
      expect(ts.some((p, t) => n[t]! > c.k && p.length === c.k)).toBe(true);
    });
  }

  it('the tie cases really tie at the k-th score', () => {
    const c = cases[0]!;
    const { keys, q, w, n } = build(c);
    const s = 1 / Math.sqrt(c.D * c.H);
    let tied = 0;
    typescriptPicks(c, keys, q, w, n).forEach((p, t) => {
      if (n[t]! <= c.k) return;
      const score = (j: number) => {
        let acc = 0;
        for (let h = 0; h < c.H; h++) {
          let dot = 0;
          for (let i = 0; i < c.D; i++) dot += q[(t * c.H + h) * c.D + i]! * keys[j]![i]!;
          if (dot > 0) acc += dot * w[t * c.H + h]! * s;
        }
        return Math.fround(acc);
      };
      const kth = Math.min(...p.map(score));
      const outside = Array.from({ length: n[t]! }, (_, j) => j).filter((j) => !p.includes(j));
      if (outside.some((j) => score(j) === kth)) tied++;
    });
    expect(tied).toBeGreaterThan(0);
  });

  it('refuses a key count beyond the pool', () => {
    const sel = new Int32Array(2 * 4);
    expect(() => dsv4IndexerTopK(sel, new Float32Array(2 * 8), new Float32Array(2), new Float32Array(5 * 8), Int32Array.of(3, 6), 2, 1, 8, 4, 0.1)).toThrow(/key count exceeds keys/);
  });
});
