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
 * Processing a prompt token by token is the same arithmetic as llama.cpp's
 * one-ubatch pass (its masks let token p see exactly what existed after p), so
 * chunked and whole prefill give the same logits by construction.
 */
import { readGguf, type GgufFile } from '../gguf/index.ts';
import { readDeepseek4Config, type Deepseek4Config } from './deepseek4-config.ts';
import { deepseek4Attention, type Deepseek4Ablation, type Deepseek4Stats } from './deepseek4-attention.ts';
import { hcWeights, rmsNorm, softplus, swigluClamp } from './deepseek4-math.ts';
import { Deepseek4State } from './deepseek4-state.ts';
import { Deepseek4Weights } from './deepseek4-weights.ts';
import { Deepseek4NativeMatVec } from './deepseek4-native.ts';
import type { Backend } from '../../native/index.ts';

export class Deepseek4Model {
  readonly cfg: Deepseek4Config;
  readonly weights: Deepseek4Weights;
  readonly stats: Deepseek4Stats = { compressedAttended: 0, compressedAvailable: 0, expertsComputed: 0 };

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

  newState(): Deepseek4State {
    return new Deepseek4State(this.cfg.nLayer);
  }

  /** Feeds `tokens` in order; returns the logits after the last one. */
  eval(st: Deepseek4State, tokens: readonly number[]): Float32Array {
    let logits: Float32Array | undefined;
    for (const t of tokens) logits = this.step(st, t);
    if (!logits) throw new RangeError('eval needs at least one token');
    return logits;
  }

  /** One token at position st.pos: updates the state, returns its next-token logits. */
  step(st: Deepseek4State, token: number): Float32Array {
    return this.advance(st, token, true)!;
  }

  /** step(), with the LM head computed only when `logits` (a prefill row whose logits nobody reads skips it). */
  advance(st: Deepseek4State, token: number, logits: boolean): Float32Array | null {
    const c = this.cfg;
    const w = this.weights;
    const d = c.nEmbd;
    const hc = c.hc;
    const p = st.pos;
    const emb = w.get('token_embd.weight').subarray(token * d, (token + 1) * d);
    let H: Float32Array = new Float32Array(hc * d);
    for (let h = 0; h < hc; h++) H.set(emb, h * d);
    for (let l = 0; l < c.nLayer; l++) {
      const P = `blk.${l}.`;
      H = this.hcBlock(H, P + 'hc_attn', (x) => deepseek4Attention(c, w, l, rmsNorm(x, c.rmsEps, w.get(P + 'attn_norm.weight')), p, st.layers[l]!, this.ablation, this.stats));
      H = this.hcBlock(H, P + 'hc_ffn', (x) => this.ffn(l, rmsNorm(x, c.rmsEps, w.get(P + 'ffn_norm.weight')), token));
    }
    st.pos++;
    return logits ? this.head(H) : null;
  }

  private mix(H: Float32Array, prefix: string, nMix: number, withComb: boolean) {
    const c = this.cfg;
    const flat = rmsNorm(H, c.rmsEps);
    const mixes = this.weights.mv(`${prefix}_fn.weight`, c.hc * c.nEmbd, nMix, flat);
    return hcWeights(mixes, this.weights.get(`${prefix}_scale.weight`), this.weights.get(`${prefix}_base.weight`), c.hc, c.hcEps, c.sinkhornIters, withComb);
  }

  private collapse(H: Float32Array, pre: Float32Array): Float32Array {
    const d = this.cfg.nEmbd;
    const x = new Float32Array(d);
    for (let h = 0; h < this.cfg.hc; h++) for (let i = 0; i < d; i++) x[i] = x[i]! + H[h * d + i]! * pre[h]!;
    return x;
  }

  private hcBlock(H: Float32Array, prefix: string, block: (x: Float32Array) => Float32Array): Float32Array {
    const c = this.cfg;
    const d = c.nEmbd;
    const hc = c.hc;
    if (this.ablation.noHyperConnections) {
      // one plain residual stream: what the model would be without hyper-connections
      const y = block(H.subarray(0, d).slice());
      const out = new Float32Array(hc * d);
      for (let h = 0; h < hc; h++) for (let i = 0; i < d; i++) out[h * d + i] = H[i]! + y[i]!;
      return out;
    }
    const { pre, post, comb } = this.mix(H, prefix, (2 + hc) * hc, true);
    const y = block(this.collapse(H, pre));
    const out = new Float32Array(hc * d);
    for (let dst = 0; dst < hc; dst++) {
      for (let i = 0; i < d; i++) {
        let v = y[i]! * post[dst]!;
        for (let src = 0; src < hc; src++) v += H[src * d + i]! * comb[dst + hc * src]!;
        out[dst * d + i] = v;
      }
    }
    return out;
  }

  private head(H: Float32Array): Float32Array {
    const c = this.cfg;
    const x = this.ablation.noHyperConnections ? H.subarray(0, c.nEmbd).slice() : this.collapse(H, this.mix(H, 'output_hc', c.hc, false).pre);
    rmsNorm(x, c.rmsEps, this.weights.get('output_norm.weight'), x);
    return this.weights.mv('output.weight', c.nEmbd, c.nVocab, x);
  }

  private ffn(l: number, x: Float32Array, token: number): Float32Array {
    const c = this.cfg;
    const w = this.weights;
    const P = `blk.${l}.`;
    const d = c.nEmbd;
    const F = c.expertFfn;
    const logits = w.mv(P + 'ffn_gate_inp.weight', d, c.nExpert, x);
    const probs = logits.map((v) => Math.sqrt(softplus(v)));
    let chosen: number[];
    if (l < c.hashLayers) {
      const t = w.table(P + 'ffn_gate_tid2eid.weight');
      chosen = Array.from(t.subarray(token * c.nExpertUsed, (token + 1) * c.nExpertUsed));
    } else {
      const b = w.get(P + 'exp_probs_b.bias');
      chosen = Array.from({ length: c.nExpert }, (_, e) => e)
        .sort((a, bb) => probs[bb]! + b[bb]! - (probs[a]! + b[a]!) || a - bb)
        .slice(0, c.nExpertUsed);
    }
    const wts = chosen.map((e) => probs[e]!);
    if (c.weightsNorm) {
      const s = Math.max(wts.reduce((a, v) => a + v, 0), 6.103515625e-5);
      for (let k = 0; k < wts.length; k++) wts[k] = wts[k]! / s;
    }
    if (c.weightsScale !== 0 && c.weightsScale !== 1) for (let k = 0; k < wts.length; k++) wts[k] = wts[k]! * c.weightsScale;
    const out = new Float32Array(d);
    const act = new Float32Array(F);
    const y = new Float32Array(d);
    this.stats.expertsComputed += chosen.length;
    chosen.forEach((e, k) => {
      const g = w.mv(P + 'ffn_gate_exps.weight', d, F, x, 0, new Float32Array(F), e * F);
      const u = w.mv(P + 'ffn_up_exps.weight', d, F, x, 0, new Float32Array(F), e * F);
      for (let i = 0; i < F; i++) act[i] = swigluClamp(g[i]!, u[i]!, c.clampExp[l]!);
      w.mv(P + 'ffn_down_exps.weight', F, d, act, 0, y, e * d);
      for (let i = 0; i < d; i++) out[i] = out[i]! + y[i]! * wts[k]!;
    });
    const S = F * c.nExpertShared;
    const sg = w.mv(P + 'ffn_gate_shexp.weight', d, S, x);
    const su = w.mv(P + 'ffn_up_shexp.weight', d, S, x);
    const sa = new Float32Array(S);
    for (let i = 0; i < S; i++) sa[i] = swigluClamp(sg[i]!, su[i]!, c.clampShexp[l]!);
    const sy = w.mv(P + 'ffn_down_shexp.weight', S, d, sa);
    for (let i = 0; i < d; i++) out[i] = out[i]! + sy[i]!;
    return out;
  }
}
