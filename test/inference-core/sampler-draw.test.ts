/**
 * The sampler's draw at temperature > 0 (native sampleMasked): how
 * determinism under a seed is kept, and that masks and no mask share one law.
 *  - a Sampler's tokens are the plain twin's (sampleMaskedRef) fed with the
 *    seeded xoshiro128** words, two per draw (hi, lo), after the repetition
 *    penalty — unmasked and masked, with top-k / top-p, on a 128k vocabulary;
 *  - a mask allowing every id gives the same stream as no mask;
 *  - the same seed repeats the stream, another seed does not.
 */
import { describe, expect, it } from 'vitest';

import { nativeAddon } from '../../native/index.ts';
import { Prng, Sampler } from '../../inference-core/sampling/index.ts';

const addon = nativeAddon();
const VOCAB = 128256;

function logits(seed: number): Float32Array {
  const p = new Prng(seed);
  return Float32Array.from({ length: VOCAB }, () => (p.nextFloat() * 2 - 1) * 6);
}

function randomMask(seed: number): Uint32Array {
  const p = new Prng(seed);
  return Uint32Array.from({ length: (VOCAB + 31) >>> 5 }, () => p.nextU32() & p.nextU32());
}

describe('Sampler draw (temperature > 0)', () => {
  const x = logits(1);
  const mask = randomMask(2);
  for (const o of [{ temperature: 1 }, { temperature: 0.7, topK: 40 }, { temperature: 1.3, topP: 0.9 }, { temperature: 0.8, topK: 50, topP: 0.95, repetitionPenalty: 1.3 }]) {
    it(`tokens equal the twin fed with the seeded PRNG's words (${JSON.stringify(o)})`, () => {
      for (const allowed of [undefined, mask]) {
        const sampler = new Sampler({ ...o, seed: 42 });
        const prng = new Prng(42);
        const recent: number[] = [];
        for (let step = 0; step < 12; step++) {
          const token = sampler.sample(x, allowed);
          let y = x;
          if (o.repetitionPenalty && recent.length > 0) {
            y = Float32Array.from(x);
            for (const t of new Set(recent)) y[t] = y[t] > 0 ? y[t] / o.repetitionPenalty : y[t] * o.repetitionPenalty;
          }
          const hi = prng.nextU32();
          const lo = prng.nextU32();
          expect(token).toBe(addon.sampleMaskedRef(y, allowed ?? null, 1 / o.temperature, o.topK ?? 0, o.topP ?? 1, hi, lo));
          if (allowed) expect((allowed[token >>> 5] >>> (token & 31)) & 1).toBe(1);
          recent.push(token);
        }
      }
    });
  }

  it('a mask that allows every id samples exactly as no mask', () => {
    const all = new Uint32Array((VOCAB + 31) >>> 5).fill(0xffffffff);
    const a = new Sampler({ temperature: 1, topP: 0.9, seed: 9 });
    const b = new Sampler({ temperature: 1, topP: 0.9, seed: 9 });
    for (let i = 0; i < 20; i++) expect(a.sample(x, all)).toBe(b.sample(x));
  });

  it('the same seed repeats the stream; another seed gives another', () => {
    const draw = (seed: number) => {
      const s = new Sampler({ temperature: 1, seed });
      return Array.from({ length: 30 }, () => s.sample(x, mask));
    };
    expect(draw(5)).toEqual(draw(5));
    expect(draw(5)).not.toEqual(draw(6));
  });

  it('a temperature near 0 draws only among the largest logits (1/T beyond f32 is clamped, not NaN)', () => {
    const y = Float32Array.from({ length: 64 }, (_, i) => (i === 9 || i === 41 ? 3 : i % 3));
    const s = new Sampler({ temperature: 1e-300, seed: 3 });
    const seen = new Set<number>();
    for (let i = 0; i < 200; i++) seen.add(s.sample(y));
    expect([...seen].sort((a, b) => a - b)).toEqual([9, 41]);
  });

  it('a mask shorter than the vocabulary allows nothing past its end', () => {
    const short = new Uint32Array(2).fill(0xffffffff); // ids 0..63
    const s = new Sampler({ temperature: 2, seed: 1 });
    for (let i = 0; i < 50; i++) expect(s.sample(x, short)).toBeLessThan(64);
  });
});
