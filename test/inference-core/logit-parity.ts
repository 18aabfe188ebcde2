/**
 * The comparison the llama.cpp parity tests (llamacpp-, arch-, deepseek-parity)
 * share: our last-position log-probabilities against llama.cpp's, as the
 * largest difference relative to llama.cpp's log-prob range; llama.cpp's
 * greedy run against ours.
 */
import { expect } from 'vitest';

import type { LoadedEngine } from '../../inference-core/engine/index.ts';
import { argmax, greedyFrom } from './engine-fixtures.ts';

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
