/**
 * The comparison the llama.cpp parity tests (llamacpp-, arch-, deepseek-parity)
 * share: our last-position log-probabilities against llama.cpp's, as the
 * largest difference relative to llama.cpp's log-prob range.
 */
import type { LoadedEngine } from '../../inference-core/engine/index.ts';

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
