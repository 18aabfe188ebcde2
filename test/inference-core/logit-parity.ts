/**
 * The comparison the llama.cpp parity tests (llamacpp-, arch-, deepseek-parity)
 * share: our last-position log-probabilities against llama.cpp's, as the
 * largest difference relative to llama.cpp's log-prob range; llama.cpp's
 * greedy run against ours.
 */
import { expect, it } from 'vitest';

import { loadEngine, type LoadedEngine } from '../../inference-core/engine/index.ts';
import { llamaBatch, type LlamaBatchRequest } from '../helpers/llamacpp.ts';
import { argmax, greedyFrom, randomTokens } from './engine-fixtures.ts';

/** One model file's engine, the prompts asked of both sides, and llama.cpp's answers. */
export interface ParityCase {
  engine: LoadedEngine;
  prompts: number[][];
  greedyPrompt: number[];
  ref: (number | null)[][];
  refGreedy: { tokens: number[]; margins: number[] };
}

/**
 * Loads each model (f16 KV, one thread), draws a prompt per length (seed
 * promptSeed + length) and a 100-token greedy prompt, and asks llama.cpp in
 * one batch for each prompt's last-position log-probs and 32 greedy tokens.
 */
export async function loadParityCases<K>(
  models: Array<[K, string]>,
  o: { poolBytes: number; lengths: number[]; promptSeed: number; greedySeed: number },
): Promise<Map<K, ParityCase>> {
  const requests: LlamaBatchRequest[] = [];
  const pending: Array<Omit<ParityCase, 'ref' | 'refGreedy'> & { key: K }> = [];
  for (const [key, modelPath] of models) {
    const engine = await loadEngine(modelPath, { kvDtype: 'f16', threads: 1, poolBytes: o.poolBytes });
    const prompts = o.lengths.map((n) => randomTokens(n, engine.vocabSize, o.promptSeed + n));
    const greedyPrompt = randomTokens(100, engine.vocabSize, o.greedySeed);
    pending.push({ key, engine, prompts, greedyPrompt });
    requests.push({ op: 'logitsMany', modelPath, prompts, kvType: 'f16', threads: 1 });
    requests.push({ op: 'greedy', modelPath, tokens: greedyPrompt, nPredict: 32, kvType: 'f16', threads: 1 });
  }
  const results = await llamaBatch(requests);
  const cases = new Map<K, ParityCase>();
  pending.forEach(({ key, ...p }, i) => {
    const g = results[2 * i + 1];
    cases.set(key, { ...p, ref: results[2 * i].logprobs!, refGreedy: { tokens: g.tokens!, margins: g.margins! } });
  });
  return cases;
}

/** Declares one model's parity tests: each prompt's last-position log-probs within `tolerance`, and expectGreedyParity. */
export function itMatchesLlamaCpp(label: string, weightType: string, c: () => ParityCase, lengths: number[], tolerance: number, nearTie: number): void {
  it.each(lengths.map((n, i) => [n, i]))(`last-position logits of a %i-token prompt within ${tolerance} of llama.cpp`, (n, i) => {
    const k = c();
    expect(k.ref[i]).toHaveLength(k.engine.vocabSize);
    const err = relError(lastLogits(k.engine, k.prompts[i]), k.ref[i]);
    console.log(`${label} parity ${weightType} n=${n}: relative error ${err.toExponential(2)} (tolerance ${tolerance})`);
    expect(err).toBeLessThan(tolerance);
  });
  it('greedy 32 tokens after a 100-token prompt equal up to llama.cpp’s first near-tie, teacher-forced argmax after', () => {
    const k = c();
    expectGreedyParity(k.engine, k.greedyPrompt, k.refGreedy, nearTie, `${label} greedy ${weightType}`);
  });
}

export function logSoftmax(logits: Float32Array): Float64Array {
  let max = -Infinity;
  for (const v of logits) max = Math.max(max, v);
  let sum = 0;
  for (const v of logits) sum += Math.exp(v - max);
  const lse = max + Math.log(sum);
  return Float64Array.from(logits, (v) => v - lse);
}

/** max |ours − ref| / (max ref − min ref) over the entries llama.cpp gives. */
export function relError(ours: Float64Array, ref: (number | null)[]): number {
  let lo = Infinity;
  let hi = -Infinity;
  let maxDiff = 0;
  for (let i = 0; i < ref.length; i++) {
    const r = ref[i];
    if (r === null) continue; // underflowed in llama.cpp's f32 softmax
    lo = Math.min(lo, r);
    hi = Math.max(hi, r);
    maxDiff = Math.max(maxDiff, Math.abs(ours[i] - r));
  }
  return maxDiff / (hi - lo);
}

/** Log-probabilities after prefilling `tokens` into a fresh sequence. */
export function lastLogits(engine: LoadedEngine, tokens: number[]): Float64Array {
  const seq = engine.createSequence();
  try {
    return logSoftmax(seq.prefill(tokens));
  } finally {
    seq.free();
  }
}

/**
 * 32 greedy tokens from `prompt` equal llama.cpp's up to its first near-tie
 * (top-2 margin < nearTie), then teacher-forced on llama.cpp's tokens: our
 * argmax matches at every step that is not a near-tie (at least 24 of them).
 */
export function expectGreedyParity(engine: LoadedEngine, prompt: number[], ref: { tokens: number[]; margins: number[] }, nearTie: number, label: string): void {
  const seq = engine.createSequence();
  const ours = greedyFrom(seq, seq.prefill(prompt), 32);
  seq.free();
  const firstTie = ref.margins.findIndex((m) => m < nearTie);
  const upTo = firstTie === -1 ? 32 : firstTie;
  const firstDiff = ours.findIndex((t, i) => t !== ref.tokens[i]);
  console.log(`${label}: ${firstDiff === -1 ? 'identical' : `first difference at ${firstDiff}`}; first near-tie ${firstTie === -1 ? 'none' : firstTie}`);
  expect(ours.slice(0, upTo)).toEqual(ref.tokens.slice(0, upTo));
  const forced = engine.createSequence();
  let logits = forced.prefill(prompt);
  let checked = 0;
  for (let i = 0; i < ref.tokens.length; i++) {
    if (ref.margins[i] >= nearTie) {
      expect(argmax(logits), `step ${i}`).toBe(ref.tokens[i]);
      checked++;
    }
    if (i + 1 < ref.tokens.length) logits = forced.decode(ref.tokens[i]);
  }
  forced.free();
  expect(checked).toBeGreaterThanOrEqual(24);
}
