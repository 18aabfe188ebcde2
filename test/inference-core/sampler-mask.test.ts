/**
 * Sampling under a token mask (structured output): only allowed ids come out,
 * greedy picks the best allowed one (lowest id on ties), and a drawn token
 * follows the softmax over the allowed ids (frequencies within a stated
 * tolerance over 20,000 draws), with and without top-k / top-p.
 */
import { describe, expect, it } from 'vitest';

import { Sampler } from '../../inference-core/index.ts';

function maskOf(vocab: number, ids: number[]): Uint32Array {
  const bits = new Uint32Array((vocab + 31) >>> 5);
  for (const id of ids) bits[id >>> 5] |= 1 << (id & 31);
  return bits;
}

describe('Sampler with an allowed-token mask', () => {
  const vocab = 70;
  const logits = new Float32Array(vocab).map((_, i) => Math.sin(i * 1.7) * 2);
  const allowed = [3, 5, 33, 34, 64, 69];
  const bits = maskOf(vocab, allowed);

  it('greedy picks the best allowed token; ties go to the lower id', () => {
    const best = allowed.reduce((a, b) => (logits[b] > logits[a] ? b : a));
    expect(new Sampler({ temperature: 0 }).sample(logits, bits)).toBe(best);
    const flat = new Float32Array(vocab).fill(1);
    expect(new Sampler({ temperature: 0 }).sample(flat, maskOf(vocab, [40, 7, 12]))).toBe(7);
  });

  for (const options of [{}, { topK: 3 }, { topP: 0.8 }]) {
    it(`draws follow the softmax over the allowed ids (${JSON.stringify(options)})`, () => {
      const sampler = new Sampler({ temperature: 0.9, seed: 5, ...options });
      const counts = new Map<number, number>();
      const draws = 20000;
      for (let i = 0; i < draws; i++) {
        const t = sampler.sample(logits, bits);
        counts.set(t, (counts.get(t) ?? 0) + 1);
      }
      for (const t of counts.keys()) expect(allowed).toContain(t);
      // Expected: softmax over the allowed ids, cut by top-k / top-p as the unmasked pipeline would.
      const ranked = [...allowed].sort((a, b) => logits[b] - logits[a] || a - b);
      let probs = ranked.map((t) => Math.exp(logits[t] / 0.9));
      const sum = probs.reduce((a, b) => a + b, 0);
      probs = probs.map((p) => p / sum);
      let keep = ranked.length;
      if ('topK' in options) keep = options.topK!;
      if ('topP' in options) {
        let cum = 0;
        for (let i = 0; i < ranked.length; i++) {
          cum += probs[i];
          if (cum >= options.topP!) {
            keep = i + 1;
            break;
          }
        }
      }
      const kept = probs.slice(0, keep).reduce((a, b) => a + b, 0);
      ranked.forEach((t, i) => {
        const expected = i < keep ? probs[i] / kept : 0;
        expect(Math.abs((counts.get(t) ?? 0) / draws - expected)).toBeLessThan(0.015);
      });
    });
  }

  it('an empty mask is a typed error', () => {
    expect(() => new Sampler({ temperature: 1 }).sample(logits, new Uint32Array(3))).toThrow(/mask allows no token/);
  });
});
