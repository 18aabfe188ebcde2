/**
 * deepseek4 attention of one token at one layer, as llama.cpp's
 * llama_model_deepseek4::graph::build_attention_impl computes it:
 *
 *   qr = rmsnorm(wq_a·x)·q_a_norm; q = per-head rmsnorm(wq_b·qr), roped on
 *   the last n_rot dims; kv = rmsnorm(wkv·x)·kv_norm, roped (one KV head; V is K)
 *   keys = the SWA window (positions p−n_swa+1..p)
 *        + ratio 128 (HCA): every finished compressed entry
 *        + ratio 4   (CSA): the indexer's top-k finished entries
 *   out = softmax(q·k/√d with the head's sink logit)·k, de-roped at p,
 *   then grouped low-rank output: wo_b · (per group wo_a_g · out_g)
 *
 * Compressors: every token adds a kv row (wkv) and a score row (wgate + ape
 * row pos % ratio); when position p ends a block b (p+1 ≡ 0 mod ratio) the
 * entry is Σ softmax_per_dim(scores)·kv over the block's rows (CSA: the
 * previous block's first halves and this block's second halves, the previous
 * of block 0 being zero / −∞), rmsnorm·norm, roped at position b·ratio with the
 * compress rope. Only the selected entries' scores and values are computed.
 */
import type { Deepseek4Config } from './deepseek4-config.ts';
import { rmsNorm, ropeApply, ropeCache } from './deepseek4-math.ts';
import type { Deepseek4LayerState } from './deepseek4-state.ts';
import type { Deepseek4Weights } from './deepseek4-weights.ts';

/** Parts a test may switch off to show the check notices (never set in serving). */
export interface Deepseek4Ablation {
  noHyperConnections?: boolean;
  noCompression?: boolean;
  noIndexer?: boolean;
  noSwa?: boolean;
}

/** Work counters: what the sparse paths actually computed (tests read them). */
export interface Deepseek4Stats {
  /** compressed entries whose score and value were computed, summed over tokens and layers */
  compressedAttended: number;
  /** finished compressed entries that existed at those steps */
  compressedAvailable: number;
  /** routed experts evaluated, summed over tokens and layers */
  expertsComputed: number;
}

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
  for (let j = 0; j < dim; j++) {
    let max = -Infinity;
    for (let i = 0; i < n; i++) {
      let pos: number;
      let col: number;
      if (overlap) {
        pos = i < ratio ? start - ratio + i : start + (i - ratio);
        col = i < ratio ? j : dim + j;
      } else {
        pos = start + i;
        col = j;
      }
      const k = kvRows.get(pos);
      sc[i] = k ? scoreRows.get(pos)![col]! : -Infinity;
      kv[i] = k ? k[col]! : 0;
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

/** Adds this token's compressor rows; returns the finished entry when p ends a block. */
function compressorStep(
  cfg: Deepseek4Config,
  w: Deepseek4Weights,
  prefix: string,
  x: Float32Array,
  p: number,
  ratio: number,
  dim: number,
  kvRows: Map<number, Float32Array>,
  scoreRows: Map<number, Float32Array>,
): Float32Array | null {
  const overlap = ratio === 4;
  const width = (overlap ? 2 : 1) * dim;
  const kv = w.mv(`${prefix}_kv.weight`, cfg.nEmbd, width, x);
  const score = w.mv(`${prefix}_gate.weight`, cfg.nEmbd, width, x);
  const ape = w.get(`${prefix}_ape.weight`);
  for (let j = 0; j < width; j++) score[j] = score[j]! + ape[(p % ratio) * width + j]!;
  kvRows.set(p, kv);
  scoreRows.set(p, score);
  if ((p + 1) % ratio !== 0) return null;
  const start = p + 1 - ratio;
  const entry = compressRows(kvRows, scoreRows, start, ratio, dim, overlap);
  rmsNorm(entry, cfg.rmsEps, w.get(`${prefix}_norm.weight`), entry);
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

/** Indices of the indexer's top-k finished CSA entries for this token (all when there are ≤ k). */
function indexerTopK(cfg: Deepseek4Config, w: Deepseek4Weights, l: number, x: Float32Array, qr: Float32Array, p: number, keys: Float32Array[]): number[] {
  const n = keys.length;
  if (n <= cfg.indexerTopK) return Array.from({ length: n }, (_, i) => i);
  const H = cfg.indexerHeads;
  const D = cfg.indexerDim;
  const q = w.mv(`blk.${l}.indexer.attn_q_b.weight`, cfg.qLoraRank, H * D, qr);
  const cache = ropeCache(p, cfg.nRot, cfg.ropeCompress);
  for (let h = 0; h < H; h++) ropeApply(q, h * D + D - cfg.nRot, cache);
  const hw = w.mv(`blk.${l}.indexer.proj.weight`, cfg.nEmbd, H, x);
  const s = 1 / Math.sqrt(D * H);
  const scores = new Float64Array(n);
  for (let j = 0; j < n; j++) {
    const k = keys[j]!;
    let acc = 0;
    for (let h = 0; h < H; h++) {
      let dot = 0;
      for (let i = 0; i < D; i++) dot += q[h * D + i]! * k[i]!;
      if (dot > 0) acc += dot * hw[h]! * s;
    }
    scores[j] = acc;
  }
  return topK(Float32Array.from(scores), cfg.indexerTopK);
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

export function deepseek4Attention(cfg: Deepseek4Config, w: Deepseek4Weights, l: number, x: Float32Array, p: number, st: Deepseek4LayerState, ab: Deepseek4Ablation, stats: Deepseek4Stats): Float32Array {
  const P = `blk.${l}.`;
  const D = cfg.headDim;
  const H = cfg.nHead;
  const nope = D - cfg.nRot;
  const ratio = ab.noCompression ? 0 : cfg.ratios[l]!;
  const rope = cfg.ratios[l] !== 0 ? cfg.ropeCompress : cfg.ropePlain;
  const cache = ropeCache(p, cfg.nRot, rope);

  const qr = w.mv(P + 'attn_q_a.weight', cfg.nEmbd, cfg.qLoraRank, x);
  rmsNorm(qr, cfg.rmsEps, w.get(P + 'attn_q_a_norm.weight'), qr);
  const q = w.mv(P + 'attn_q_b.weight', cfg.qLoraRank, H * D, qr);
  for (let h = 0; h < H; h++) {
    rmsNorm(q, cfg.rmsEps, undefined, q, h * D, D);
    ropeApply(q, h * D + nope, cache);
  }
  const kv = w.mv(P + 'attn_kv.weight', cfg.nEmbd, D, x);
  rmsNorm(kv, cfg.rmsEps, w.get(P + 'attn_kv_a_norm.weight'), kv);
  ropeApply(kv, nope, cache);

  st.raw.push(kv);
  st.rawPos.push(p);
  const window = ab.noSwa ? Infinity : cfg.nSwa;
  while (st.rawPos.length > 0 && p - st.rawPos[0]! >= window) {
    st.raw.shift();
    st.rawPos.shift();
  }

  let comp: Float32Array[] = [];
  if (ratio !== 0) {
    const e = compressorStep(cfg, w, P + 'attn_compressor', x, p, ratio, D, st.compKv, st.compScore);
    if (e) st.entries.push(e);
    if (ratio === 4) {
      const ik = compressorStep(cfg, w, P + 'indexer_compressor', x, p, ratio, cfg.indexerDim, st.idxKv, st.idxScore);
      if (ik) st.idxKeys.push(ik);
      comp = ab.noIndexer ? st.entries : indexerTopK(cfg, w, l, x, qr, p, st.idxKeys).map((i) => st.entries[i]!);
    } else comp = st.entries;
  }

  stats.compressedAttended += comp.length;
  stats.compressedAvailable += st.entries.length;
  const keys = [...st.raw, ...comp];
  const sinks = w.get(P + 'attn_sinks.weight');
  const scale = 1 / Math.sqrt(D);
  const out = new Float32Array(H * D);
  const logits = new Float64Array(keys.length);
  for (let h = 0; h < H; h++) {
    let max = sinks[h]!;
    for (let j = 0; j < keys.length; j++) {
      const k = keys[j]!;
      let dot = 0;
      for (let i = 0; i < D; i++) dot += q[h * D + i]! * k[i]!;
      logits[j] = dot * scale;
      if (logits[j]! > max) max = logits[j]!;
    }
    let sum = Math.exp(sinks[h]! - max);
    for (let j = 0; j < keys.length; j++) {
      logits[j] = Math.exp(logits[j]! - max);
      sum += logits[j]!;
    }
    for (let j = 0; j < keys.length; j++) {
      const a = logits[j]! / sum;
      const k = keys[j]!;
      for (let i = 0; i < D; i++) out[h * D + i] = out[h * D + i]! + a * k[i]!;
    }
    ropeApply(out, h * D + nope, ropeCache(p, cfg.nRot, rope, true));
  }

  const G = cfg.oGroups;
  const R = cfg.oLoraRank;
  const gd = (H / G) * D;
  const oa = new Float32Array(G * R);
  for (let g = 0; g < G; g++) w.mv(P + 'attn_output_a.weight', gd, R, out, g * gd, oa.subarray(g * R, (g + 1) * R), g * R);
  return w.mv(P + 'attn_output_b.weight', G * R, cfg.nEmbd, oa);
}
