/**
 * native actRoundTrip (src/ops/act-roundtrip.h) against its TypeScript twin in
 * deepseek4-weights.ts: bit for bit (tolerance 0), on blocks that hit the edge
 * cases: all zero, one value, ties at .5, a block whose largest |x| is negative,
 * magnitudes from 1e-30 (f16 subnormal scales) to 1e30.
 */
import { describe, expect, it } from 'vitest';

import { roundTripQ8_0, roundTripQ8K } from '../../inference-core/engine/deepseek4-weights.ts';
import { actRoundTrip } from '../../native/index.ts';
import { seededRandom } from '../fuzz/fuzz-runner.ts';

function inputs(block: number): Float32Array {
  const rand = seededRandom(25);
  const blocks: number[][] = [new Array(block).fill(0), [...new Array(block - 1).fill(0), -3.5]];
  blocks.push(Array.from({ length: block }, (_, j) => (j % 2 ? -1 : 1) * (j + 0.5)));
  for (const scale of [1e-30, 1e-7, 6e-5, 1, 127, 1e4, 1e30]) {
    for (let k = 0; k < 8; k++) blocks.push(Array.from({ length: block }, () => (rand() * 2 - 1) * scale * (rand() < 0.1 ? 100 : 1)));
  }
  return Float32Array.from(blocks.flat());
}

const bits = (x: Float32Array) => Array.from(new Uint32Array(x.buffer, x.byteOffset, x.length));

describe('actRoundTrip: ggml activation quantization as f32', () => {
  it('q8_0 equals roundTripQ8_0 bit for bit', () => {
    const x = inputs(32);
    expect(bits(actRoundTrip('q8_0', x)!)).toEqual(bits(roundTripQ8_0(x)));
  });

  it('q8_K equals roundTripQ8K bit for bit', () => {
    const x = inputs(256);
    expect(bits(actRoundTrip('q8_K', x)!)).toEqual(bits(roundTripQ8K(x)));
  });

  it('refuses a length that is not whole blocks', () => {
    expect(() => actRoundTrip('q8_K', new Float32Array(100))).toThrow(/whole blocks/);
  });
});
