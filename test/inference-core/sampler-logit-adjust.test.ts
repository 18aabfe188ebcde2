// logit_bias and OpenAI's presence / frequency penalties in the sampler,
// checked against the documented formula computed here by hand:
//   x[j] + bias[j] − c[j]·frequency − (c[j] > 0)·presence, c = generated counts.
import { describe, expect, it } from 'vitest';
import { Sampler } from '../../inference-core/sampling/index.ts';
import { EngineError } from '../../inference-core/engine/engine-errors.ts';

const logits = Float32Array.from([1, 4, 3, 2, 0]);

describe('logit adjustments', () => {
  it('a bias of −100 bans the argmax and +100 forces a token, greedy and masked alike', () => {
    expect(new Sampler({ logitBias: [[1, -100]] }).sample(logits)).toBe(2);
    expect(new Sampler({ logitBias: [[4, 100]] }).sample(logits)).toBe(4);
    const allowOneTwoFour = Uint32Array.of(0b10110);
    expect(new Sampler({ logitBias: [[1, -100]] }).sample(logits, allowOneTwoFour)).toBe(2);
    // sampled (temperature 1): a +100 token takes essentially all the mass
    const s = new Sampler({ temperature: 1, seed: 5, logitBias: [[0, 100]] });
    for (let i = 0; i < 50; i++) expect(s.sample(logits)).toBe(0);
  });

  it('the model logits are never modified', () => {
    const copy = logits.slice();
    new Sampler({ logitBias: [[1, -100]], frequencyPenalty: 2 }).sample(logits);
    expect(logits).toEqual(copy);
  });

  it('frequency and presence penalties follow the formula over generated tokens', () => {
    // x = [1, 4, 3, 2, 0]; greedy. frequency 0.6: token 1 drops 0.6 per pick: 4, 3.4, 2.8 < 3 → token 2.
    const f = new Sampler({ frequencyPenalty: 0.6 });
    expect([f.sample(logits), f.sample(logits), f.sample(logits)]).toEqual([1, 1, 2]);
    // presence 1.5: once generated, token 1 is at 2.5 < 3 → token 2 (then 1.5), and 1 again: presence counts once, not per time.
    const p = new Sampler({ presencePenalty: 1.5 });
    expect([p.sample(logits), p.sample(logits), p.sample(logits), p.sample(logits)]).toEqual([1, 2, 1, 1]);
    // negative values encourage repeats
    const r = new Sampler({ presencePenalty: -2, logitBias: [[2, 1.5]] });
    expect([r.sample(logits), r.sample(logits)]).toEqual([2, 2]);
  });

  it('prompt tokens (accept) are not counted by the penalties', () => {
    const s = new Sampler({ presencePenalty: 2 });
    s.accept(1);
    expect(s.sample(logits)).toBe(1);
  });

  it('out-of-range options and ids outside the vocabulary are typed errors', () => {
    expect(() => new Sampler({ presencePenalty: 3 })).toThrow(EngineError);
    expect(() => new Sampler({ logitBias: [[1, 101]] })).toThrow(EngineError);
    expect(() => new Sampler({ logitBias: [[-1, 1]] })).toThrow(EngineError);
    expect(() => new Sampler({ logitBias: [[5, 1]] }).sample(logits)).toThrow(/outside the vocabulary/);
  });

  it('adjustsLogits says when a request changes logits (speculative decoding is then not used)', () => {
    expect(new Sampler({}).adjustsLogits).toBe(false);
    expect(new Sampler({ presencePenalty: 0, frequencyPenalty: 0, logitBias: [] }).adjustsLogits).toBe(false);
    expect(new Sampler({ frequencyPenalty: 0.1 }).adjustsLogits).toBe(true);
    expect(new Sampler({ logitBias: [[0, 1]] }).adjustsLogits).toBe(true);
  });
});
