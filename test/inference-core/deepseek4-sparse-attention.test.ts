/**
 * The deepseek4 sparse-attention kernel (native/src/ops/dsv4-sparse-attention.h):
 * the threaded kernel (all heads of a token at once) equals its one-thread
 * reference twin (one (t, h) pair at a time) bit for bit, and a
 * key index outside the pool is refused before anything is read.
 */
import { describe, expect, it } from 'vitest';

import { Xoshiro128 } from '../../inference-core/synthetic/index.ts';
import { dsv4SparseAttention } from '../../native/index.ts';

describe('dsv4SparseAttention', () => {
  const rng = new Xoshiro128(25);
  const rand = (n: number) => Float32Array.from({ length: n }, () => (rng.nextU32() / 2 ** 32) * 2 - 1);
  const T = 37;
  const H = 4;
  const D = 32;
  const nKeys = 90;
  const keys = rand(nKeys * D);
  const q = rand(T * H * D);
  const sinks = rand(H);
  const off = [0];
  const idx: number[] = [];
  for (let t = 0; t < T; t++) {
    for (let j = 0; j < (t % 11) + 1; j++) idx.push(rng.nextU32() % nKeys);
    off.push(idx.length);
  }

  it('threaded kernel equals the reference twin bit for bit', () => {
    const a = new Float32Array(T * H * D);
    const b = new Float32Array(T * H * D);
    dsv4SparseAttention(a, q, keys, Int32Array.from(idx), Int32Array.from(off), sinks, T, H, D, 1 / Math.sqrt(D));
    dsv4SparseAttention(b, q, keys, Int32Array.from(idx), Int32Array.from(off), sinks, T, H, D, 1 / Math.sqrt(D), true);
    expect(Buffer.from(a.buffer).equals(Buffer.from(b.buffer))).toBe(true);
    expect(a.some((v) => v !== 0)).toBe(true);
  });

  it('equals the twin with heads not a multiple of four and many keys per token', () => {
    const [T2, H2, D2, nKeys2] = [9, 6, 40, 300];
    const keys2 = rand(nKeys2 * D2);
    const q2 = rand(T2 * H2 * D2);
    const sinks2 = rand(H2);
    const off2 = [0];
    const idx2: number[] = [];
    for (let t = 0; t < T2; t++) {
      for (let j = 0; j < 150 + t * 17; j++) idx2.push(rng.nextU32() % nKeys2);
      off2.push(idx2.length);
    }
    const a = new Float32Array(T2 * H2 * D2);
    const b = new Float32Array(T2 * H2 * D2);
    dsv4SparseAttention(a, q2, keys2, Int32Array.from(idx2), Int32Array.from(off2), sinks2, T2, H2, D2, 0.2);
    dsv4SparseAttention(b, q2, keys2, Int32Array.from(idx2), Int32Array.from(off2), sinks2, T2, H2, D2, 0.2, true);
    expect(Buffer.from(a.buffer).equals(Buffer.from(b.buffer))).toBe(true);
  });

  // eight-head lanes (H 8 as deepseek4-small, D 128) and 13 = 8 + 4 + 1 heads, key counts 1..70 so the eight-key
  // blocks, the four-key tail and its discarded re-reads all occur: tolerance 0 (same bits as the one-pair twin)
  for (const [T3, H3, D3] of [[23, 8, 128], [11, 13, 24]] as const) {
    it(`equals the twin bit for bit with ${H3} heads of ${D3}`, () => {
      const nKeys3 = 200;
      const keys3 = rand(nKeys3 * D3);
      const q3 = rand(T3 * H3 * D3);
      const sinks3 = rand(H3);
      const off3 = [0];
      const idx3: number[] = [];
      for (let t = 0; t < T3; t++) {
        for (let j = 0; j < 1 + ((t * 29) % 70); j++) idx3.push(rng.nextU32() % nKeys3);
        off3.push(idx3.length);
      }
      const a = new Float32Array(T3 * H3 * D3);
      const b = new Float32Array(T3 * H3 * D3);
      dsv4SparseAttention(a, q3, keys3, Int32Array.from(idx3), Int32Array.from(off3), sinks3, T3, H3, D3, 0.09);
      dsv4SparseAttention(b, q3, keys3, Int32Array.from(idx3), Int32Array.from(off3), sinks3, T3, H3, D3, 0.09, true);
      expect(Buffer.from(a.buffer).equals(Buffer.from(b.buffer))).toBe(true);
      expect(a.some((v) => v !== 0)).toBe(true);
    });
  }

  it('refuses a key index outside the pool', () => {
    const bad = Int32Array.from(idx);
    bad[3] = nKeys;
    expect(() => dsv4SparseAttention(new Float32Array(T * H * D), q, keys, bad, Int32Array.from(off), sinks, T, H, D, 0.1)).toThrow(/key index outside keys/);
  });
});
