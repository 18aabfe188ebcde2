import { describe, expect, it } from 'vitest';
import { Prng, Sampler, argmax } from '../../inference-core/sampling/index.ts';
import { EngineError } from '../../inference-core/engine/engine-errors.ts';

function logitsOf(values: number[]): Float32Array {
  return Float32Array.from(values);
}

describe('Sampler', () => {
  it('greedy picks the argmax, first index on ties', () => {
    const s = new Sampler();
    expect(s.sample(logitsOf([0.1, 3, -1, 2.9]))).toBe(1);
    expect(argmax(logitsOf([5, 1, 5]))).toBe(0);
  });

  it('the same seed gives the same stream; another seed a different one', () => {
    const logits = logitsOf(Array.from({ length: 50 }, (_, i) => Math.sin(i) * 2));
    const draw = (seed: number) => {
      const s = new Sampler({ temperature: 1, seed });
      return Array.from({ length: 40 }, () => s.sample(logits));
    };
    expect(draw(7)).toEqual(draw(7));
    expect(draw(7)).not.toEqual(draw(8));
  });

  it('temperature sampling follows the softmax distribution', () => {
    const logits = logitsOf([Math.log(0.5), Math.log(0.3), Math.log(0.2)]);
    const s = new Sampler({ temperature: 1, seed: 1 });
    const counts = [0, 0, 0];
    const n = 20000;
    for (let i = 0; i < n; i++) counts[s.sample(logits)]++;
    // 4.5 standard deviations of a binomial at n=20000 is ≈ 0.016.
    expect(Math.abs(counts[0] / n - 0.5)).toBeLessThan(0.016);
    expect(Math.abs(counts[1] / n - 0.3)).toBeLessThan(0.016);
    expect(Math.abs(counts[2] / n - 0.2)).toBeLessThan(0.016);
  });

  it('top-k keeps only the k most likely tokens', () => {
    const logits = logitsOf([1, 4, 3, 2, 0]);
    const s = new Sampler({ temperature: 5, topK: 2, seed: 3 });
    const seen = new Set<number>();
    for (let i = 0; i < 2000; i++) seen.add(s.sample(logits));
    expect([...seen].sort()).toEqual([1, 2]);
  });

  it('top-p keeps the smallest set reaching p', () => {
    // probabilities 0.6, 0.25, 0.1, 0.05: p=0.8 keeps {0, 1}.
    const logits = logitsOf([Math.log(0.6), Math.log(0.25), Math.log(0.1), Math.log(0.05)]);
    const s = new Sampler({ temperature: 1, topP: 0.8, seed: 5 });
    const counts = [0, 0, 0, 0];
    for (let i = 0; i < 5000; i++) counts[s.sample(logits)]++;
    expect(counts[2] + counts[3]).toBe(0);
    expect(counts[0]).toBeGreaterThan(counts[1]);
    expect(counts[1]).toBeGreaterThan(0);
  });

  it('repetition penalty moves greedy off a repeated token', () => {
    const logits = logitsOf([2, 1.9, 0]);
    const s = new Sampler({ repetitionPenalty: 1.2 });
    expect(s.sample(logits)).toBe(0); // first time: argmax
    expect(s.sample(logits)).toBe(1); // 2/1.2 < 1.9: token 0 is penalised
    const logitsCopy = logitsOf([2, 1.9, 0]);
    expect(logits).toEqual(logitsCopy); // input untouched
  });

  it('stop tokens are reported', () => {
    const s = new Sampler({ stopTokens: [2, 9] });
    expect(s.isStop(9)).toBe(true);
    expect(s.isStop(3)).toBe(false);
  });

  it('rejects bad options with a typed error', () => {
    for (const bad of [{ temperature: -1 }, { topP: 0 }, { topP: 1.5 }, { topK: 1.5 }, { repetitionPenalty: 0 }, { seed: 0.5 }]) {
      try {
        new Sampler(bad);
        expect.unreachable();
      } catch (e) {
        expect(e).toBeInstanceOf(EngineError);
        expect((e as EngineError).code).toBe('KVT_ERR_ENGINE_SAMPLING_OPTIONS');
      }
    }
  });

  it('PRNG floats are uniform in [0,1)', () => {
    const p = new Prng(42);
    let sum = 0;
    let min = 1;
    let max = 0;
    for (let i = 0; i < 100000; i++) {
      const x = p.nextFloat();
      sum += x;
      min = Math.min(min, x);
      max = Math.max(max, x);
    }
    expect(min).toBeGreaterThanOrEqual(0);
    expect(max).toBeLessThan(1);
    expect(Math.abs(sum / 100000 - 0.5)).toBeLessThan(0.005);
  });
});
