/**
 * kvtier's own deepseek4 forward (f32 reference path), token by token over a
 * Deepseek4State, as llama.cpp's llama_model_deepseek4::graph:
 *
 *   H = embedding repeated over hc = 4 streams
 *   per layer, twice (attention, then FFN):
 *     mixes = fn · rmsnorm(flatten H); pre = σ(mixes·s0 + b) + ε,
 *     post = 2σ(mixes·s1 + b), comb = Sinkhorn(mixes·s2 + b)
 *     y = block(rmsnorm(Σ_h pre_h H_h) · norm)
 *     H_dst = post_dst·y + Σ_src comb[dst, src]·H_src
 *   head: Σ_h pre_h H_h with the head's own mixer (no post/comb), rmsnorm, output
 *
 *   FFN = V4 MoE + one shared expert: router logits (f32) → sqrt(softplus);
 *   experts chosen by top-k of probs + exp_probs_b, or on the leading hash
 *   layers by the token's row of ffn_gate_tid2eid; weights = the chosen probs,
 *   normalised (sum clamped ≥ 2^-14) and × expert_weights_scale; SwiGLU clamped
 *   (gate ≤ L, |up| ≤ L). Only the chosen experts are computed.
 *
 * Rows: a call runs T tokens layer by layer (every mat-vec a mat-mul over the
 * T rows; experts over the tokens routed to them). Token p still sees exactly
 * the state after p (attention and state updates go in position order,
 * deepseek4-attention.ts), the same arithmetic as llama.cpp's one-ubatch pass,
 * and since a native mat-mul row does not depend on the other rows, chunked and
 * whole prefill give bit-identical logits.
 */
import { readGguf, type GgufFile } from '../gguf/index.ts';
import { readDeepseek4Config, type Deepseek4Config } from './deepseek4-config.ts';
import { deepseek4Attention, type Deepseek4Ablation, type Deepseek4Stats } from './deepseek4-attention.ts';
import { hcCollapseRow, hcExpandRow, hcWeights, rmsNorm } from './deepseek4-math.ts';
import { deepseek4Ffn } from './deepseek4-ffn.ts';
import { Deepseek4State } from './deepseek4-state.ts';
import { Deepseek4Weights } from './deepseek4-weights.ts';
import { Deepseek4NativeMatVec } from './deepseek4-native.ts';
import { markAt, markLayer, markWhole, ROLLBACK_ROWS } from './deepseek4-marks.ts';
import { mtpCatchUp } from './deepseek4-mtp.ts';
import { dsv4HcCollapse, dsv4HcExpand, dsv4HcWeights, dsv4RmsNormRows, type Backend } from '../../native/index.ts';

export class Deepseek4Model {
  readonly cfg: Deepseek4Config;
  readonly weights: Deepseek4Weights;
  readonly stats: Deepseek4Stats = { compressedAttended: 0, compressedAvailable: 0, expertsComputed: 0 };

  /** rows()' two hc-stream buffers (see rows()). */
  private streams: [Float32Array, Float32Array] = [new Float32Array(0), new Float32Array(0)];

  /** From a path (opened and closed here) or an open file (left open: the caller owns it). */
  constructor(
    source: string | GgufFile,
    readonly ablation: Deepseek4Ablation = {},
  ) {
    const g = typeof source === 'string' ? readGguf(source) : source;
    try {
      this.cfg = readDeepseek4Config(g);
      // an open file stays open with the model (the engine's): tensors dequantize on first use
      this.weights = new Deepseek4Weights(g, this.cfg, typeof source !== 'string');
    } finally {
      if (typeof source === 'string') g.close();
    }
  }

  /**
   * Runs the mat-vecs on `backend`'s native kernels from now on (the file `g` must
   * stay open while the model is used); the TypeScript loop stays the reference.
   */
  useNative(backend: Backend, g: GgufFile): Deepseek4NativeMatVec {
    this.weights.native?.destroy();
    this.weights.native = new Deepseek4NativeMatVec(backend, g);
    return this.weights.native;
  }

  /** `withMtp`: the state also keeps the MTP block's window (drafting on; the file must have the block). */
  newState(withMtp = false): Deepseek4State {
    return new Deepseek4State(this.cfg.nLayer, withMtp ? this.cfg.nSwa : 0);
  }

  /** Feeds `tokens` in order; returns the logits after the last one. */
  eval(st: Deepseek4State, tokens: readonly number[]): Float32Array {
    if (tokens.length === 0) throw new RangeError('eval needs at least one token');
    return this.rows(st, tokens, [tokens.length - 1])[0]!;
  }

  /** One token at position st.pos: updates the state, returns its next-token logits. */
  step(st: Deepseek4State, token: number): Float32Array {
    return this.rows(st, [token], [0])[0]!;
  }

  /** step(), with the LM head computed only when `logits` (a prefill row whose logits nobody reads skips it). */
  advance(st: Deepseek4State, token: number, logits: boolean): Float32Array | null {
    return logits ? this.step(st, token) : (this.rows(st, [token], []), null);
  }

  /**
   * Feeds `tokens` (positions st.pos..) in one pass; returns the logits of the
   * rows in `logitRows` (ascending), in that order.
   */
  rows(st: Deepseek4State, tokens: readonly number[], logitRows: readonly number[]): Float32Array[] {
    const c = this.cfg;
    const w = this.weights;
    const d = c.nEmbd;
    const hc = c.hc;
    const T = tokens.length;
    const p0 = st.pos;
    const embd = w.get('token_embd.weight');
    // the hc streams ping-pong between two buffers the model keeps: a fresh 4 MiB pair per
    // block of a 512-row chunk was most of a prefill's garbage. Nothing holds them past rows()
    // (head() and mtpCatchUp() copy what they keep).
    const n = T * hc * d;
    if (this.streams[0].length < n) this.streams = [new Float32Array(n), new Float32Array(n)];
    const [sa, sb] = [this.streams[0].subarray(0, n), this.streams[1].subarray(0, n)];
    const other = (h: Float32Array) => (h === sa ? sb : sa);
    let H: Float32Array = sa;
    for (let t = 0; t < T; t++) {
      const emb = embd.subarray(tokens[t]! * d, (tokens[t]! + 1) * d);
      for (let h = 0; h < hc; h++) H.set(emb, (t * hc + h) * d);
    }
    // rollback marks (deepseek4-marks.ts): the state after each of the last ROLLBACK_ROWS rows
    st.marks.clear();
    if (T <= ROLLBACK_ROWS) markWhole(st);
    const marked = (t: number) => t >= T - ROLLBACK_ROWS;
    for (let l = 0; l < c.nLayer; l++) {
      const P = `blk.${l}.`;
      const onRow = (t: number) => {
        if (marked(t)) markAt(st, p0 + t + 1).layers[l] = markLayer(st.layers[l]!);
      };
      H = this.hcBlock(H, T, P + 'hc_attn', (X) => deepseek4Attention(c, w, l, this.normRows(X, T, P + 'attn_norm.weight'), T, p0, st.layers[l]!, this.ablation, this.stats, onRow), other(H));
      H = this.hcBlock(H, T, P + 'hc_ffn', (X) => deepseek4Ffn(c, w, l, this.normRows(X, T, P + 'ffn_norm.weight'), T, tokens, this.stats), other(H));
    }
    if (st.mtp) mtpCatchUp(this, st, tokens, H);
    st.pos += T;
    return this.head(H, logitRows);
  }

  /** @internal rmsnorm·weight of every row of X ([T][n_embd], in place). */
  normRows(X: Float32Array, T: number, weight: string): Float32Array {
    const d = this.cfg.nEmbd;
    const g = this.weights.get(weight);
    // natively in one call (same bits); the TypeScript loop is the reference path
    if (this.weights.native && dsv4RmsNormRows(X, X, g, T, d, this.cfg.rmsEps)) return X;
    for (let t = 0; t < T; t++) rmsNorm(X, this.cfg.rmsEps, g, X, t * d, d);
    return X;
  }

  /**
   * @internal pre (and post, comb) mix weights of every row of H ([T][hc·d]),
   * packed as the native hyper-connection ops take them: [T][hc], [T][hc], [T][hc·hc].
   */
  mix(H: Float32Array, T: number, prefix: string, nMix: number, withComb: boolean): Mixes {
    const c = this.cfg;
    const hc = c.hc;
    const n = hc * c.nEmbd;
    const native = this.weights.native !== null;
    const flat = this.weights.temp('hc.flat', T * n); // read by the mat-mul below only
    if (!native || !dsv4RmsNormRows(flat, H, null, T, n, c.rmsEps)) for (let t = 0; t < T; t++) rmsNorm(H, c.rmsEps, undefined, flat, t * n, n);
    const mixes = this.weights.mm(`${prefix}_fn.weight`, n, nMix, flat, T);
    const scale = this.weights.get(`${prefix}_scale.weight`);
    const base = this.weights.get(`${prefix}_base.weight`);
    const out: Mixes = { pre: new Float32Array(T * hc), post: new Float32Array(withComb ? T * hc : 0), comb: new Float32Array(withComb ? T * hc * hc : 0) };
    // natively the rows' sigmoids and Sinkhorn run in one call (C's exp: equal to V8's but for its last f64 bit)
    if (native && dsv4HcWeights(out.pre, out.post, out.comb, mixes, scale, base, T, hc, c.hcEps, c.sinkhornIters, withComb)) return out;
    for (let t = 0; t < T; t++) {
      const m = hcWeights(mixes.subarray(t * nMix, (t + 1) * nMix), scale, base, hc, c.hcEps, c.sinkhornIters, withComb);
      out.pre.set(m.pre, t * hc);
      if (withComb) {
        out.post.set(m.post, t * hc);
        out.comb.set(m.comb, t * hc * hc);
      }
    }
    return out;
  }

  /** @internal Σ_h pre_h H_h of every row of H ([T][hc·d]) into X ([T][d]); pre [T][hc]. */
  collapseRows(H: Float32Array, T: number, pre: Float32Array, X: Float32Array): void {
    const { hc, nEmbd: d } = this.cfg;
    // natively (the hc·d loops were a tenth of a prefill in TypeScript), else the reference loop: same bits
    if (this.weights.native && dsv4HcCollapse(X, H, pre, T, hc, d)) return;
    for (let t = 0; t < T; t++) hcCollapseRow(H, t, pre.subarray(t * hc, (t + 1) * hc), X, t, hc, d);
  }

  /** @internal */
  hcBlock(H: Float32Array, T: number, prefix: string, block: (X: Float32Array) => Float32Array, out: Float32Array = new Float32Array(T * this.cfg.hc * this.cfg.nEmbd)): Float32Array {
    const c = this.cfg;
    const d = c.nEmbd;
    const hc = c.hc;
    // the block's input: attention and FFN read it and keep none of it (they copy what state keeps)
    const X = this.weights.temp('hc.x', T * d);
    if (this.ablation.noHyperConnections) {
      // one plain residual stream: what the model would be without hyper-connections
      for (let t = 0; t < T; t++) X.set(H.subarray(t * hc * d, t * hc * d + d), t * d);
      const Y = block(X);
      for (let t = 0; t < T; t++) for (let h = 0; h < hc; h++) for (let i = 0; i < d; i++) out[(t * hc + h) * d + i] = H[t * hc * d + i]! + Y[t * d + i]!;
      return out;
    }
    const m = this.mix(H, T, prefix, (2 + hc) * hc, true);
    this.collapseRows(H, T, m.pre, X);
    const Y = block(X);
    if (!this.weights.native || !dsv4HcExpand(out, Y, H, m.post, m.comb, T, hc, d)) {
      for (let t = 0; t < T; t++) hcExpandRow(out, Y, H, t, m.post.subarray(t * hc, (t + 1) * hc), m.comb.subarray(t * hc * hc, (t + 1) * hc * hc), hc, d);
    }
    return out;
  }

  /** @internal The LM head of the rows `logitRows` of H (the MTP block passes its shared head's norm and output). */
  head(H: Float32Array, logitRows: readonly number[], normName = 'output_norm.weight', outName = 'output.weight'): Float32Array[] {
    const c = this.cfg;
    const d = c.nEmbd;
    const n = logitRows.length;
    if (n === 0) return [];
    const sel = new Float32Array(n * c.hc * d);
    logitRows.forEach((r, i) => sel.set(H.subarray(r * c.hc * d, (r + 1) * c.hc * d), i * c.hc * d));
    const X = new Float32Array(n * d);
    if (this.ablation.noHyperConnections) for (let i = 0; i < n; i++) X.set(sel.subarray(i * c.hc * d, i * c.hc * d + d), i * d);
    else this.collapseRows(sel, n, this.mix(sel, n, 'output_hc', c.hc, false).pre, X);
    this.normRows(X, n, normName);
    const logits = this.weights.mm(outName, d, c.nVocab, X, n);
    return Array.from({ length: n }, (_, i) => logits.slice(i * c.nVocab, (i + 1) * c.nVocab));
  }
}

/** Hyper-connection mix weights of T rows: pre [T][hc], post [T][hc], comb [T][hc·hc] (dst + hc·src); post and comb empty without comb. */
export interface Mixes {
  pre: Float32Array;
  post: Float32Array;
  comb: Float32Array;
}
