/**
 * deepseek4 attention of T tokens at one layer, as llama.cpp's
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
 * Compressors and indexer: deepseek4-compressor.ts. Only the selected entries'
 * scores and values are computed.
 *
 * Rows: a call takes T consecutive tokens of one sequence (positions p0..p0+T−1)
 * at one layer. Every projection is one mat-mul over the T rows (native when
 * the model runs natively, bit-identical to T mat-vecs); the state updates run
 * token by token in position order, and each token's selection (the indexer's,
 * all T tokens in one native call) and attention read exactly the state after
 * it — T = 1 and T = whole prompt give the same values.
 */
import type { Deepseek4Config } from './deepseek4-config.ts';
import { compressorPush, indexerPicks } from './deepseek4-compressor.ts';
import { rmsNorm, ropeApply, ropeRows } from './deepseek4-math.ts';
import { dsv4RmsNormRows } from '../../native/index.ts';
import type { Deepseek4LayerState } from './deepseek4-state.ts';
import type { Deepseek4NativeMatVec } from './deepseek4-native.ts';
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

/** Row t of a [T][width] buffer (a view). */
function row(buf: Float32Array, t: number, width: number): Float32Array {
  return buf.subarray(t * width, (t + 1) * width);
}

/** The roped KV rows ([T][head_dim]) of normed inputs X at positions p0..: what a token adds to the SWA window. */
export function attentionKv(cfg: Deepseek4Config, w: Deepseek4Weights, l: number, X: Float32Array, T: number, p0: number): Float32Array {
  const P = `blk.${l}.`;
  const D = cfg.headDim;
  const rope = cfg.ratios[l] !== 0 ? cfg.ropeCompress : cfg.ropePlain;
  const kv = w.mm(P + 'attn_kv.weight', cfg.nEmbd, D, X, T);
  const kvNorm = w.get(P + 'attn_kv_a_norm.weight');
  const normed = w.native !== null && dsv4RmsNormRows(kv, kv, kvNorm, T, D, cfg.rmsEps);
  const ropes = ropeRows(p0, T, cfg.nRot, rope);
  for (let t = 0; t < T; t++) {
    if (!normed) rmsNorm(kv, cfg.rmsEps, kvNorm, kv, t * D, D);
    ropeApply(kv, t * D + D - cfg.nRot, ropes[t]!);
  }
  return kv;
}

/** Adds the key of position p to the SWA window, dropping those the window no longer covers. */
export function pushWindow(st: Deepseek4LayerState, key: Float32Array, p: number, window: number): void {
  st.raw.push(key);
  st.rawPos.push(p);
  while (st.rawPos.length > 0 && p - st.rawPos[0]! >= window) {
    st.raw.shift();
    st.rawPos.shift();
  }
}

/**
 * X: [T][n_embd] normed inputs of positions p0..p0+T−1; returns [T][n_embd].
 * `onRow(t)` runs once the state holds token t (rollback marks, deepseek4-marks.ts).
 */
export function deepseek4Attention(cfg: Deepseek4Config, w: Deepseek4Weights, l: number, X: Float32Array, T: number, p0: number, st: Deepseek4LayerState, ab: Deepseek4Ablation, stats: Deepseek4Stats, onRow?: (t: number) => void): Float32Array {
  const P = `blk.${l}.`;
  const D = cfg.headDim;
  const H = cfg.nHead;
  const d = cfg.nEmbd;
  const nope = D - cfg.nRot;
  const ratio = ab.noCompression ? 0 : cfg.ratios[l]!;
  const rope = cfg.ratios[l] !== 0 ? cfg.ropeCompress : cfg.ropePlain;

  // projections into reused buffers (Deepseek4Weights.temp): each written whole by its mat-mul, read only in this call
  // (the window and compressor state keep copies), so a 512-row chunk allocates none of these per layer
  const qr = w.mm(P + 'attn_q_a.weight', d, cfg.qLoraRank, X, T, w.temp('attn.qr', T * cfg.qLoraRank));
  const qaNorm = w.get(P + 'attn_q_a_norm.weight');
  // the row norms natively in one call each when the model runs natively (same bits), else row by row
  if (!w.native || !dsv4RmsNormRows(qr, qr, qaNorm, T, cfg.qLoraRank, cfg.rmsEps)) for (let t = 0; t < T; t++) rmsNorm(qr, cfg.rmsEps, qaNorm, qr, t * cfg.qLoraRank, cfg.qLoraRank);
  const q = w.mm(P + 'attn_q_b.weight', cfg.qLoraRank, H * D, qr, T, w.temp('attn.q', T * H * D));
  const kv = attentionKv(cfg, w, l, X, T, p0);
  const qNormed = w.native !== null && dsv4RmsNormRows(q, q, null, T * H, D, cfg.rmsEps);
  const ropes = ropeRows(p0, T, cfg.nRot, rope);
  for (let t = 0; t < T; t++) {
    const cache = ropes[t]!;
    for (let h = 0; h < H; h++) {
      if (!qNormed) rmsNorm(q, cfg.rmsEps, undefined, q, (t * H + h) * D, D);
      ropeApply(q, (t * H + h) * D + nope, cache);
    }
  }

  // compressor (and on CSA layers indexer) rows of every token, projected at once
  const width = (ratio === 4 ? 2 : 1) * D;
  const iWidth = 2 * cfg.indexerDim;
  const ckv = ratio !== 0 ? w.mm(P + 'attn_compressor_kv.weight', d, width, X, T, w.temp('attn.ckv', T * width)) : null;
  const cgate = ratio !== 0 ? w.mm(P + 'attn_compressor_gate.weight', d, width, X, T, w.temp('attn.cgate', T * width)) : null;
  const ikv = ratio === 4 ? w.mm(P + 'indexer_compressor_kv.weight', d, iWidth, X, T, w.temp('attn.ikv', T * iWidth)) : null;
  const igate = ratio === 4 ? w.mm(P + 'indexer_compressor_gate.weight', d, iWidth, X, T, w.temp('attn.igate', T * iWidth)) : null;
  // the indexer's queries only where some token has more than top-k keys to choose from
  const IH = cfg.indexerHeads * cfg.indexerDim;
  const needIndexer = ratio === 4 && !ab.noIndexer && Math.floor((p0 + T) / 4) > cfg.indexerTopK;
  let iq: Float32Array | null = null;
  let ihw: Float32Array | null = null;
  if (needIndexer) {
    iq = w.mm(`${P}indexer.attn_q_b.weight`, cfg.qLoraRank, IH, qr, T, w.temp('attn.iq', T * IH));
    ihw = w.mm(`${P}indexer.proj.weight`, d, cfg.indexerHeads, X, T, w.temp('attn.ihw', T * cfg.indexerHeads));
  }

  const out = w.temp('attn.out', T * H * D).fill(0); // read only by the output projection below
  const sinks = w.get(P + 'attn_sinks.weight');
  const scale = 1 / Math.sqrt(D);
  const window = ab.noSwa ? Infinity : cfg.nSwa;
  // the window before this call; with this call's kv rows after it, every token's window is a range of them
  const priorKeys = st.raw.slice();
  const priorPos = st.rawPos.slice();
  // state updates token by token; each token's entry / indexer key counts are
  // kept so its selection (all tokens at once, below) sees the state after it
  const nEntries = new Int32Array(T);
  const nIdx = new Int32Array(T);
  for (let t = 0; t < T; t++) {
    const p = p0 + t;
    pushWindow(st, kv.slice(t * D, (t + 1) * D), p, window);
    if (ratio !== 0) {
      const pre = P + 'attn_compressor';
      const e = compressorPush(cfg, w.get(pre + '_ape.weight'), w.get(pre + '_norm.weight'), row(ckv!, t, width), row(cgate!, t, width), p, ratio, D, st.compKv, st.compScore);
      if (e) st.entries.push(e);
      if (ratio === 4) {
        const ip = P + 'indexer_compressor';
        const ik = compressorPush(cfg, w.get(ip + '_ape.weight'), w.get(ip + '_norm.weight'), row(ikv!, t, iWidth), row(igate!, t, iWidth), p, ratio, cfg.indexerDim, st.idxKv, st.idxScore);
        if (ik) st.idxKeys.push(ik);
      }
    }
    onRow?.(t);
    nEntries[t] = st.entries.length;
    nIdx[t] = st.idxKeys.length;
  }
  let picks: number[][] | null = null;
  if (ratio === 4 && !ab.noIndexer) {
    // queries roped at their positions, only on the rows the indexer reads
    const iropes = iq ? ropeRows(p0, T, cfg.nRot, cfg.ropeCompress) : [];
    for (let t = 0; iq && t < T; t++) {
      if (nIdx[t]! <= cfg.indexerTopK) continue;
      const cache = iropes[t]!;
      for (let h = 0; h < cfg.indexerHeads; h++) ropeApply(iq, t * IH + h * cfg.indexerDim + cfg.indexerDim - cfg.nRot, cache);
    }
    picks = indexerPicks(cfg, w.native, iq, ihw, st.idxKeys, nIdx, T);
  }
  const keys = new WindowKeys(priorKeys, priorPos, kv, p0, T, D, window);
  const comp = (t: number): number[] | number => (picks ? picks[t]! : ratio !== 0 ? nEntries[t]! : 0);
  for (let t = 0; t < T; t++) {
    const c = comp(t);
    stats.compressedAttended += typeof c === 'number' ? c : c.length;
    stats.compressedAvailable += nEntries[t]!;
  }
  // natively: all T tokens at once over one pool (window keys, then the entries); else token by token
  if (w.native) keys.attendAll(w.native, out, q, st.entries, comp, sinks, T, H, scale);
  else {
    for (let t = 0; t < T; t++) {
      const c = comp(t);
      const ents = typeof c === 'number' ? st.entries.slice(0, c) : c.map((i) => st.entries[i]!);
      attendOne(q, t * H * D, [...keys.windowOf(t), ...ents], sinks, scale, H, D, out);
    }
  }
  const inverse = ropeRows(p0, T, cfg.nRot, rope, true);
  for (let t = 0; t < T; t++) {
    const inv = inverse[t]!;
    for (let h = 0; h < H; h++) ropeApply(out, (t * H + h) * D + nope, inv);
  }

  // grouped low-rank output: each group's slice of every row, one mat-mul per group
  const G = cfg.oGroups;
  const R = cfg.oLoraRank;
  const gd = (H / G) * D;
  const oa = w.temp('attn.oa', T * G * R); // every element written: R columns per group
  const slice = w.temp('attn.slice', T * gd);
  const part = w.temp('attn.part', T * R);
  for (let g = 0; g < G; g++) {
    for (let t = 0; t < T; t++) slice.set(out.subarray(t * H * D + g * gd, t * H * D + (g + 1) * gd), t * gd);
    w.mm(P + 'attn_output_a.weight', gd, R, slice, T, part, g * R);
    for (let t = 0; t < T; t++) oa.set(part.subarray(t * R, (t + 1) * R), t * G * R + g * R);
  }
  return w.mm(P + 'attn_output_b.weight', G * R, d, oa, T);
}

/**
 * The SWA windows of a call's T tokens as ranges of one key list: the window
 * before the call (positions ascending), then the call's kv rows. Token t at
 * p0 + t sees keys [start[t], nPrior + t]: no per-key lookup, one packed pool.
 */
class WindowKeys {
  private readonly start: Int32Array;
  private readonly nPrior: number;

  constructor(
    private readonly prior: Float32Array[],
    priorPos: number[],
    private readonly kv: Float32Array,
    p0: number,
    T: number,
    private readonly D: number,
    window: number,
  ) {
    this.nPrior = prior.length;
    this.start = new Int32Array(T);
    let j = 0;
    for (let t = 0; t < T; t++) {
      const lo = p0 + t - window + 1;
      while (j < this.nPrior + t && (j < this.nPrior ? priorPos[j]! : p0 + j - this.nPrior) < lo) j++;
      this.start[t] = j;
    }
  }

  /** Token t's window keys, oldest first (the reference path). */
  windowOf(t: number): Float32Array[] {
    const out: Float32Array[] = [];
    for (let j = this.start[t]!; j <= this.nPrior + t; j++) out.push(j < this.nPrior ? this.prior[j]! : this.kv.subarray((j - this.nPrior) * this.D, (j - this.nPrior + 1) * this.D));
    return out;
  }

  /** Every token's window then its entries (comp(t): the first n, or those indices) in one native call. */
  attendAll(native: Deepseek4NativeMatVec, out: Float32Array, q: Float32Array, entries: Float32Array[], comp: (t: number) => number[] | number, sinks: Float32Array, T: number, H: number, scale: number): void {
    const D = this.D;
    const base = this.nPrior + T;
    const pool = new Float32Array(Math.max(1, base + entries.length) * D);
    this.prior.forEach((k, j) => pool.set(k, j * D));
    pool.set(this.kv.subarray(0, T * D), this.nPrior * D);
    entries.forEach((e, i) => pool.set(e, (base + i) * D));
    const off = new Int32Array(T + 1);
    for (let t = 0; t < T; t++) {
      const c = comp(t);
      off[t + 1] = off[t]! + (this.nPrior + t + 1 - this.start[t]!) + (typeof c === 'number' ? c : c.length);
    }
    const idx = new Int32Array(off[T]!);
    for (let t = 0; t < T; t++) {
      let o = off[t]!;
      for (let j = this.start[t]!; j <= this.nPrior + t; j++) idx[o++] = j;
      const c = comp(t);
      if (typeof c === 'number') for (let i = 0; i < c; i++) idx[o++] = base + i;
      else for (const i of c) idx[o++] = base + i;
    }
    native.attend(out, q, pool, idx, off, sinks, T, H, D, scale);
  }
}

/** softmax(q·k/√D with the head's sink)·k for one token's H heads (q and out at qOff, V is K). */
function attendOne(q: Float32Array, qOff: number, keys: Float32Array[], sinks: Float32Array, scale: number, H: number, D: number, out: Float32Array): void {
  const logits = new Float64Array(keys.length);
  for (let h = 0; h < H; h++) {
    const o = qOff + h * D;
    let max = sinks[h]!;
    for (let j = 0; j < keys.length; j++) {
      const k = keys[j]!;
      let dot = 0;
      for (let i = 0; i < D; i++) dot += q[o + i]! * k[i]!;
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
      for (let i = 0; i < D; i++) out[o + i] = out[o + i]! + a * k[i]!;
    }
  }
}
