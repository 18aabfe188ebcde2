/**
 * deepseek4's compressors and lightning indexer, per token, on rows the caller
 * projected (one token's or a whole prefill's mat-muls, deepseek4-attention.ts):
 *
 *   compressorPush: every token adds a kv row (wkv·x) and a score row (wgate·x +
 *   ape row pos % ratio); when position p ends a block b (p+1 ≡ 0 mod ratio) the
 *   entry is Σ softmax_per_dim(scores)·kv over the block's rows (CSA: the
 *   previous block's first halves and this block's second halves, the previous
 *   of block 0 being zero / −∞), rmsnorm·norm, roped at position b·ratio with the
 *   compress rope.
 *   indexerTopK: the indexer's top-k finished CSA entries for a token, scored
 *   Σ_h relu(q_h·k)·w_h/√(D·H) (only computed when there are more than k);
 *   indexerPicks: the same for a call's T tokens, natively in one batched call
 *   (native/src/ops/dsv4-indexer.h, same picks bit for bit) or by indexerTopK,
 *   the reference twin, when the model runs without the native engine.
 */
import type { Deepseek4Config } from './deepseek4-config.ts';
import type { Deepseek4NativeMatVec } from './deepseek4-native.ts';
import { rmsNorm, ropeApply, ropeCache } from './deepseek4-math.ts';

function compressRows(
  kvRows: Map<number, Float32Array>,
  scoreRows: Map<number, Float32Array>,
  start: number,
  ratio: number,
  dim: number,
  overlap: boolean,
): Float32Array {
  const out = new Float32Array(dim);
  const n = overlap ? 2 * ratio : ratio;
  const sc = new Float64Array(n);
  const kv = new Float64Array(n);
  // each row looked up once (a missing one, before position 0, scores −∞ with value 0)
  const kvOf: (Float32Array | undefined)[] = [];
  const scOf: (Float32Array | undefined)[] = [];
  const colOff = new Int32Array(n);
  for (let i = 0; i < n; i++) {
    const pos = overlap ? (i < ratio ? start - ratio + i : start + (i - ratio)) : start + i;
    colOff[i] = overlap && i >= ratio ? dim : 0;
    kvOf.push(kvRows.get(pos));
    scOf.push(scoreRows.get(pos));
  }
  for (let j = 0; j < dim; j++) {
    let max = -Infinity;
    for (let i = 0; i < n; i++) {
      const k = kvOf[i];
      sc[i] = k ? scOf[i]![colOff[i]! + j]! : -Infinity;
      kv[i] = k ? k[colOff[i]! + j]! : 0;
      if (sc[i]! > max) max = sc[i]!;
    }
    let sum = 0;
    let acc = 0;
    for (let i = 0; i < n; i++) {
      const e = Math.exp(sc[i]! - max);
      sum += e;
      acc += e * kv[i]!;
    }
    out[j] = acc / sum;
  }
  return out;
}

/**
 * Adds this token's compressor rows (kv, and score before the ape row; both
 * width (ratio 4 ? 2 : 1)·dim, copied) at position p; returns the finished
 * entry when p ends a block.
 */
export function compressorPush(
  cfg: Deepseek4Config,
  ape: Float32Array,
  norm: Float32Array,
  kv: Float32Array,
  score: Float32Array,
  p: number,
  ratio: number,
  dim: number,
  kvRows: Map<number, Float32Array>,
  scoreRows: Map<number, Float32Array>,
): Float32Array | null {
  const overlap = ratio === 4;
  const width = (overlap ? 2 : 1) * dim;
  const sc = score.slice(0, width);
  for (let j = 0; j < width; j++) sc[j] = sc[j]! + ape[(p % ratio) * width + j]!;
  kvRows.set(p, kv.slice(0, width));
  scoreRows.set(p, sc);
  if ((p + 1) % ratio !== 0) return null;
  const start = p + 1 - ratio;
  const entry = compressRows(kvRows, scoreRows, start, ratio, dim, overlap);
  rmsNorm(entry, cfg.rmsEps, norm, entry);
  ropeApply(entry, dim - cfg.nRot, ropeCache(start, cfg.nRot, cfg.ropeCompress));
  // rows no later block reads: CSA keeps this block (the next one's previous half)
  const keepFrom = overlap ? start : start + ratio;
  for (const k of [...kvRows.keys()]) {
    if (k < keepFrom) {
      kvRows.delete(k);
      scoreRows.delete(k);
    }
  }
  return entry;
}

/**
 * Indices of the indexer's top-k finished CSA entries for a token (all when
 * there are ≤ k). q: the token's indexer queries (H·D, roped at its position),
 * hw: its head weights (H); both only read when there are more than k keys.
 */
export function indexerTopK(cfg: Deepseek4Config, q: () => Float32Array, hw: () => Float32Array, keys: Float32Array[]): number[] {
  const n = keys.length;
  if (n <= cfg.indexerTopK) return Array.from({ length: n }, (_, i) => i);
  const H = cfg.indexerHeads;
  const D = cfg.indexerDim;
  const qv = q();
  const w = hw();
  const s = 1 / Math.sqrt(D * H);
  const scores = new Float32Array(n);
  for (let j = 0; j < n; j++) {
    const k = keys[j]!;
    let acc = 0;
    for (let h = 0; h < H; h++) {
      let dot = 0;
      for (let i = 0; i < D; i++) dot += qv[h * D + i]! * k[i]!;
      if (dot > 0) acc += dot * w[h]! * s;
    }
    scores[j] = acc;
  }
  return topK(scores, cfg.indexerTopK);
}

/**
 * The indexer's picks for the T tokens of a call: token t chooses among
 * keys[0..n[t]) (keys only grow during a call). q: [T][H·D] queries, roped at
 * each token's position on the rows of tokens with more than k keys (the only
 * rows read); hw: [T][H] head weights; both may be null when no token has.
 */
export function indexerPicks(cfg: Deepseek4Config, native: Deepseek4NativeMatVec | null, q: Float32Array | null, hw: Float32Array | null, keys: Float32Array[], n: Int32Array, T: number): number[][] {
  const k = cfg.indexerTopK;
  const H = cfg.indexerHeads;
  const D = cfg.indexerDim;
  const all = (m: number) => Array.from({ length: m }, (_, i) => i);
  if (!n.some((m) => m > k)) return Array.from(n, all);
  if (!native) {
    return Array.from(n, (m, t) => indexerTopK(cfg, () => q!.subarray(t * H * D, (t + 1) * H * D), () => hw!.subarray(t * H, (t + 1) * H), keys.slice(0, m)));
  }
  let nMax = 0;
  for (const m of n) nMax = Math.max(nMax, m);
  const packed = new Float32Array(nMax * D);
  for (let j = 0; j < nMax; j++) packed.set(keys[j]!, j * D);
  const sel = new Int32Array(T * k);
  native.indexer(sel, q!, hw!, packed, n, T, H, D, k, 1 / Math.sqrt(D * H));
  return Array.from(n, (m, t) => (m <= k ? all(m) : Array.from(sel.subarray(t * k, (t + 1) * k))));
}

/**
 * The index set ggml_top_k picks: libstdc++'s std::partial_sort (heap select)
 * with data[a] > data[b], so ties at the k-th score (the indexer's ReLU makes
 * exact zeros common) resolve as llama.cpp resolves them.
 */
export function topK(data: Float32Array, k: number): number[] {
  const n = data.length;
  const idx = Array.from({ length: n }, (_, i) => i);
  if (k >= n) return idx;
  const comp = (a: number, b: number) => data[a]! > data[b]!;
  const pushHeap = (hole: number, top: number, value: number) => {
    let parent = Math.floor((hole - 1) / 2);
    while (hole > top && comp(idx[parent]!, value)) {
      idx[hole] = idx[parent]!;
      hole = parent;
      parent = Math.floor((hole - 1) / 2);
    }
    idx[hole] = value;
  };
  const adjustHeap = (hole: number, len: number, value: number) => {
    const top = hole;
    let child = hole;
    while (child < Math.floor((len - 1) / 2)) {
      child = 2 * (child + 1);
      if (comp(idx[child]!, idx[child - 1]!)) child--;
      idx[hole] = idx[child]!;
      hole = child;
    }
    if ((len & 1) === 0 && child === Math.floor((len - 2) / 2)) {
      child = 2 * (child + 1);
      idx[hole] = idx[child - 1]!;
      hole = child - 1;
    }
    pushHeap(hole, top, value);
  };
  if (k >= 2) {
    for (let parent = Math.floor((k - 2) / 2); ; parent--) {
      adjustHeap(parent, k, idx[parent]!);
      if (parent === 0) break;
    }
  }
  for (let i = k; i < n; i++) {
    if (comp(idx[i]!, idx[0]!)) {
      const value = idx[i]!;
      idx[i] = idx[0]!;
      adjustHeap(0, k, value);
    }
  }
  return idx.slice(0, k);
}
