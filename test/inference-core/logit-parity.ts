/**
 * The comparison the llama.cpp parity tests (llamacpp-, arch-, deepseek-parity)
 * share: our last-position log-probabilities against llama.cpp's, as the
 * largest difference relative to llama.cpp's log-prob range; llama.cpp's
 * greedy run against ours; the cache-equivalence check on the same engine.
 */
import { expect } from 'vitest';

import type { LoadedEngine } from '../../inference-core/engine/index.ts';
import { argmax, greedyFrom, randomTokens } from './engine-fixtures.ts';

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

/**
 * kb blocks exported after a decode step, imported into a fresh sequence,
 * then r more tokens prefilled: the logits, 16 greedy tokens and the blocks
 * equal the whole prompt's, bit for bit.
 */
export function expectCacheEquivalence(engine: LoadedEngine, kb: number, r: number): void {
  const prompt = randomTokens(64 * kb + r, engine.vocabSize, 7000 + 100 * kb + r);
  const whole = engine.createSequence();
  const wholeLogits = whole.prefill(prompt);
  const wholeGreedy = greedyFrom(whole, wholeLogits, 16);
  const exporter = engine.createSequence();
  exporter.prefill(prompt.slice(0, 64 * kb));
  exporter.decode(3);
  const blocks = exporter.exportBlocks(0, kb);
  exporter.free();
  for (const b of blocks) expect(b.byteLength).toBe(engine.kvLayout.blockBytes);
  const hit = engine.createSequence();
  hit.importBlocks(blocks);
  const hitLogits = hit.prefill(prompt.slice(64 * kb));
  expect(Buffer.from(hitLogits.buffer).equals(Buffer.from(wholeLogits.buffer))).toBe(true);
  expect(greedyFrom(hit, hitLogits, 16)).toEqual(wholeGreedy);
  const a = whole.exportBlocks(0, kb);
  const b = hit.exportBlocks(0, kb);
  for (let i = 0; i < kb; i++) expect(Buffer.from(a[i]).equals(Buffer.from(b[i]))).toBe(true);
  whole.free();
  hit.free();
}
