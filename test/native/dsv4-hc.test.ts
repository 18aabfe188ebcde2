/**
 * native dsv4HcCollapse / dsv4HcExpand (src/ops/dsv4-hc.h) against the TypeScript
 * twin (hcCollapseRow / hcExpandRow in deepseek4-math.ts): bit for bit
 * (tolerance 0), at hc 4 and d 512 as deepseek4-small, with values over many
 * magnitudes so f64 sums that round differently from f32 ones would show.
 */
import { describe, expect, it } from 'vitest';

import { hcCollapseRow, hcExpandRow } from '../../inference-core/engine/deepseek4-math.ts';
import { dsv4HcCollapse, dsv4HcExpand } from '../../native/index.ts';
import { seededRandom } from '../fuzz/fuzz-runner.ts';

const T = 7;
const HC = 4;
const D = 512;

function values(n: number, rand: () => number): Float32Array {
  return Float32Array.from({ length: n }, () => (rand() * 2 - 1) * 10 ** Math.floor(rand() * 8 - 4));
}

const bits = (x: Float32Array) => Array.from(new Uint32Array(x.buffer, x.byteOffset, x.length));

describe('deepseek4 hyper-connections natively', () => {
  const rand = seededRandom(4);
  const H = values(T * HC * D, rand);
  const Y = values(T * D, rand);
  const pre = values(T * HC, rand);
  const post = values(T * HC, rand);
  const comb = values(T * HC * HC, rand);

  it('collapse equals hcCollapseRow bit for bit', () => {
    const want = new Float32Array(T * D);
    for (let t = 0; t < T; t++) hcCollapseRow(H, t, pre.subarray(t * HC, (t + 1) * HC), want, t, HC, D);
    const got = new Float32Array(T * D).fill(Number.NaN);
    expect(dsv4HcCollapse(got, H, pre, T, HC, D)).toBe(true);
    expect(bits(got)).toEqual(bits(want));
  });

  it('expand equals hcExpandRow bit for bit', () => {
    const want = new Float32Array(T * HC * D);
    for (let t = 0; t < T; t++) hcExpandRow(want, Y, H, t, post.subarray(t * HC, (t + 1) * HC), comb.subarray(t * HC * HC, (t + 1) * HC * HC), HC, D);
    const got = new Float32Array(T * HC * D);
    expect(dsv4HcExpand(got, Y, H, post, comb, T, HC, D)).toBe(true);
    expect(bits(got)).toEqual(bits(want));
  });

  it('refuses arrays shorter than the shapes', () => {
    expect(() => dsv4HcExpand(new Float32Array(10), Y, H, post, comb, T, HC, D)).toThrow(/out and H need/);
  });
});
