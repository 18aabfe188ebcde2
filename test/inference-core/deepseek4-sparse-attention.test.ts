/**
 * The deepseek4 sparse-attention kernel (native/src/ops/dsv4-sparse-attention.h):
 * the threaded kernel equals its one-thread reference twin bit for bit, and a
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

  it('refuses a key index outside the pool', () => {
    const bad = Int32Array.from(idx);
    bad[3] = nKeys;
    expect(() => dsv4SparseAttention(new Float32Array(T * H * D), q, keys, bad, Int32Array.from(off), sinks, T, H, D, 0.1)).toThrow(/key index outside keys/);
  });
});
