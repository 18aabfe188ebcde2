/**
 * The distribution the target would sample a token from, after the same
 * pipeline as sampling/sampler.ts (repetition penalty → temperature → top-k →
 * softmax → top-p), as explicit probabilities: the rejection rule of
 * speculative sampling needs p(token), not one draw.
 *
 * Greedy (temperature 0) is the argmax of the penalized logits, first index
 * on ties — exactly Sampler's choice, so greedy speculation reproduces plain
 * greedy decoding token for token.
 *
 * With a mask (a grammar's allowed tokens, a bitset over ids) the law is
 * Sampler's masked one: only allowed ids are candidates, before the penalty,
 * temperature, top-k and top-p (as if every other logit were -Infinity);
 * greedy takes the lowest allowed id among the largest.
 */
import type { SamplingOptions } from '../sampling/sampler.ts';
import { argmax, forEachAllowedId, maskedArgmax, noTokenAllowed } from '../sampling/sampler.ts';

/** Sparse distribution: ids with p > 0 and their probabilities (summing to 1). */
export interface TokenDistribution {
  ids: Int32Array;
  probs: Float64Array;
}

export function penalized(logits: Float32Array, o: SamplingOptions, history: readonly number[]): Float32Array {
  const rp = o.repetitionPenalty ?? 1;
  const lastN = o.repeatLastN ?? 64;
  if (rp === 1 || lastN === 0 || history.length === 0) return logits;
  const x = Float32Array.from(logits);
  const recent = new Set(history.slice(Math.max(0, history.length - lastN)));
  // llama.cpp's rule (as Sampler): shrink positive logits, push negative ones further down.
  for (const t of recent) if (t < x.length) x[t] = x[t] > 0 ? x[t] / rp : x[t] * rp;
  return x;
}

export function greedyToken(logits: Float32Array, o: SamplingOptions, history: readonly number[], mask: Uint32Array | null = null): number {
  const x = penalized(logits, o, history);
  return mask ? maskedArgmax(x, mask) : argmax(x);
}

export function targetDistribution(logits: Float32Array, o: SamplingOptions, history: readonly number[], mask: Uint32Array | null = null): TokenDistribution {
  const x = penalized(logits, o, history);
  const t = o.temperature ?? 0;
  if (mask && t === 0) return { ids: Int32Array.of(maskedArgmax(x, mask)), probs: Float64Array.of(1) };
  if (mask) return maskedDistribution(x, allowedIds(mask, x.length), t, o);
  if (t === 0) return { ids: Int32Array.of(argmax(x)), probs: Float64Array.of(1) };
  const vocab = x.length;
  const k = o.topK && o.topK > 0 && o.topK < vocab ? o.topK : vocab;
  const topP = o.topP ?? 1;
  // Without top-p the law needs no order: every kept token's softmax weight (a verify
  // step computes one law per row, so a full sort of a 128k vocabulary per row would cost).
  if (topP >= 1 && k === vocab) return softmaxAll(x, t);
  const order = k <= SELECT_MAX_K ? topKOrder(x, k) : fullOrder(x);
  return lawOverOrder(x, order, k, t, topP);
}

/**
 * Softmax at temperature `t` over the first `k` ids of `order`, cut to the
 * shortest prefix reaching `topP` (order must then be by logit descending),
 * renormalized. The one law both the plain and the masked paths compute.
 */
function lawOverOrder(x: Float32Array, order: Int32Array, k: number, t: number, topP: number): TokenDistribution {
  let max = -Infinity;
  for (let i = 0; i < k; i++) if (x[order[i]] > max) max = x[order[i]];
  const w = new Float64Array(k);
  let sum = 0;
  for (let i = 0; i < k; i++) sum += w[i] = Math.exp((x[order[i]] - max) / t);
  let m = k;
  if (topP < 1) {
    let cum = 0;
    for (let i = 0; i < k; i++) {
      cum += w[i] / sum;
      if (cum >= topP) {
        m = i + 1;
        break;
      }
    }
  }
  let kept = 0;
  for (let i = 0; i < m; i++) kept += w[i];
  const probs = new Float64Array(m);
  for (let i = 0; i < m; i++) probs[i] = w[i] / kept;
  return { ids: order.slice(0, m), probs };
}

/** Allowed ids in ascending order. */
function allowedIds(mask: Uint32Array, vocab: number): Int32Array {
  const ids = new Int32Array(vocab);
  let n = 0;
  forEachAllowedId(mask, vocab, (id) => {
    ids[n++] = id;
  });
  if (n === 0) throw noTokenAllowed();
  return ids.subarray(0, n);
}

/** Sampler.pickMasked's law over the allowed `ids` (penalized logits `x`). */
function maskedDistribution(x: Float32Array, ids: Int32Array, t: number, o: SamplingOptions): TokenDistribution {
  const n = ids.length;
  const k = o.topK && o.topK > 0 && o.topK < n ? o.topK : n;
  const topP = o.topP ?? 1;
  const order = k === n && topP >= 1 ? ids : ids.sort((a, b) => x[b] - x[a] || a - b);
  return lawOverOrder(x, order, k, t, topP);
}

/** Top-k by selection: ids by logit descending, lower id first on ties (the sort's order), O(vocab·k). */
const SELECT_MAX_K = 64;

function topKOrder(x: Float32Array, k: number): Int32Array {
  const ids = new Int32Array(k);
  let n = 0;
  for (let id = 0; id < x.length; id++) {
    const v = x[id];
    if (n === k && !(v > x[ids[k - 1]])) continue;
    let j = n < k ? n++ : k - 1;
    // Strictly greater moves up: an equal logit stays behind the lower id already kept.
    while (j > 0 && v > x[ids[j - 1]]) {
      ids[j] = ids[j - 1];
      j--;
    }
    ids[j] = id;
  }
  return ids;
}

function fullOrder(x: Float32Array): Int32Array {
  const order = new Int32Array(x.length);
  for (let i = 0; i < x.length; i++) order[i] = i;
  return order.sort((a, b) => x[b] - x[a] || a - b);
}

function softmaxAll(x: Float32Array, t: number): TokenDistribution {
  let max = -Infinity;
  for (let i = 0; i < x.length; i++) if (x[i] > max) max = x[i];
  const probs = new Float64Array(x.length);
  let sum = 0;
  for (let i = 0; i < x.length; i++) {
    probs[i] = Math.exp((x[i] - max) / t);
    sum += probs[i];
  }
  const ids = new Int32Array(x.length);
  for (let i = 0; i < x.length; i++) {
    ids[i] = i;
    probs[i] /= sum;
  }
  return { ids, probs };
}

export function probabilityOf(d: TokenDistribution, token: number): number {
  for (let i = 0; i < d.ids.length; i++) if (d.ids[i] === token) return d.probs[i];
  return 0;
}

/** Draws from `d` with a uniform u in [0, 1). */
export function drawFrom(d: TokenDistribution, u: number): number {
  let acc = 0;
  for (let i = 0; i < d.ids.length; i++) {
    acc += d.probs[i];
    if (u < acc) return d.ids[i];
  }
  return d.ids[d.ids.length - 1];
}
