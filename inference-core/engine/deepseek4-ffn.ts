/**
 * deepseek4's FFN over T tokens of one layer: V4 MoE + one shared expert.
 *
 *   router logits (f32) → sqrt(softplus); experts chosen by top-k of probs +
 *   exp_probs_b, or on the leading hash layers by the token's row of
 *   ffn_gate_tid2eid; weights = the chosen probs, normalised (sum clamped ≥
 *   2^-14) and × expert_weights_scale; SwiGLU clamped (gate ≤ L, |up| ≤ L).
 *
 * Only the chosen experts are computed: each expert runs one mat-mul over the
 * tokens routed to it (rows gathered, results scattered back). A token's
 * expert outputs are summed in its own choice order, then the shared expert's,
 * the same f32 order as one token alone.
 */
import type { Deepseek4Config } from './deepseek4-config.ts';
import type { Deepseek4Stats } from './deepseek4-attention.ts';
import { softplus, swigluClamp } from './deepseek4-math.ts';
import type { Deepseek4Weights } from './deepseek4-weights.ts';
import { dsv4MoeCombine, dsv4SwigluClamp } from '../../native/index.ts';

/** The experts each token uses and their weights ([T][nExpertUsed] each). */
function route(c: Deepseek4Config, w: Deepseek4Weights, l: number, X: Float32Array, T: number, tokens: readonly number[]): { chosen: Int32Array; weights: Float32Array } {
  const P = `blk.${l}.`;
  const K = c.nExpertUsed;
  const E = c.nExpert;
  const logits = w.mm(P + 'ffn_gate_inp.weight', c.nEmbd, E, X, T);
  const chosen = new Int32Array(T * K);
  const weights = new Float32Array(T * K);
  const probs = new Float32Array(E);
  const key = new Float64Array(E);
  const taken = new Uint8Array(E);
  const hashed = l < c.hashLayers;
  const tab = hashed ? w.table(P + 'ffn_gate_tid2eid.weight') : null;
  const b = hashed ? null : w.get(P + 'exp_probs_b.bias');
  const wts = new Float64Array(K);
  for (let t = 0; t < T; t++) {
    for (let e = 0; e < E; e++) probs[e] = Math.sqrt(softplus(logits[t * E + e]!));
    if (tab) {
      for (let k = 0; k < K; k++) chosen[t * K + k] = tab[tokens[t]! * K + k]!;
    } else {
      // top-k of probs + bias, ties to the lower expert: what a stable descending sort's first k are
      for (let e = 0; e < E; e++) {
        key[e] = probs[e]! + b![e]!;
        taken[e] = 0;
      }
      for (let k = 0; k < K; k++) {
        let best = -1;
        for (let e = 0; e < E; e++) if (!taken[e] && (best < 0 || key[e]! > key[best]!)) best = e;
        taken[best] = 1;
        chosen[t * K + k] = best;
      }
    }
    for (let k = 0; k < K; k++) wts[k] = probs[chosen[t * K + k]!]!;
    if (c.weightsNorm) {
      let sum = 0;
      for (let k = 0; k < K; k++) sum += wts[k]!;
      const s = Math.max(sum, 6.103515625e-5);
      for (let k = 0; k < K; k++) wts[k] = wts[k]! / s;
    }
    if (c.weightsScale !== 0 && c.weightsScale !== 1) for (let k = 0; k < K; k++) wts[k] = wts[k]! * c.weightsScale;
    for (let k = 0; k < K; k++) weights[t * K + k] = wts[k]!;
  }
  return { chosen, weights };
}

/** The clamped SwiGLU of n values (natively when the model runs natively; C's exp, V8's but for its last f64 bit). */
function swiglu(w: Deepseek4Weights, g: Float32Array, u: Float32Array, n: number, limit: number, act: Float32Array = new Float32Array(n)): Float32Array {
  if (w.native && dsv4SwigluClamp(act, g, u, n, limit)) return act;
  for (let i = 0; i < n; i++) act[i] = swigluClamp(g[i]!, u[i]!, limit);
  return act;
}

/** X: [T][n_embd] normed inputs; tokens: their ids (hash routing); returns [T][n_embd]. */
export function deepseek4Ffn(c: Deepseek4Config, w: Deepseek4Weights, l: number, X: Float32Array, T: number, tokens: readonly number[], stats: Deepseek4Stats): Float32Array {
  const P = `blk.${l}.`;
  const d = c.nEmbd;
  const F = c.expertFfn;
  const K = c.nExpertUsed;
  const { chosen, weights } = route(c, w, l, X, T, tokens);
  stats.expertsComputed += T * K;

  // per expert: the (token, choice) slots routed to it
  const slots = new Map<number, number[]>();
  for (let i = 0; i < T * K; i++) {
    const e = chosen[i]!;
    let list = slots.get(e);
    if (!list) slots.set(e, (list = []));
    list.push(i);
  }
  const y = w.temp('ffn.y', T * K * d); // expert output of slot (t, k): every slot is written below
  let most = 0;
  for (const list of slots.values()) most = Math.max(most, list.length);
  // one expert's gathered rows, gate, up, activation and output at a time: reused buffers (Deepseek4Weights.temp),
  // each written whole before it is read and dead when the next expert starts
  const xe = w.temp('ffn.xe', most * d);
  const ge = w.temp('ffn.g', most * F);
  const ue = w.temp('ffn.u', most * F);
  const ae = w.temp('ffn.act', most * F);
  const yb = w.temp('ffn.ye', most * d);
  for (const [e, list] of slots) {
    const n = list.length;
    for (let j = 0; j < n; j++) {
      const t = Math.floor(list[j]! / K);
      xe.set(X.subarray(t * d, (t + 1) * d), j * d);
    }
    const g = w.mm(P + 'ffn_gate_exps.weight', d, F, xe, n, ge, e * F);
    const u = w.mm(P + 'ffn_up_exps.weight', d, F, xe, n, ue, e * F);
    const act = swiglu(w, g, u, n * F, c.clampExp[l]!, ae);
    const ye = w.mm(P + 'ffn_down_exps.weight', F, d, act, n, yb, e * d);
    for (let j = 0; j < n; j++) y.set(ye.subarray(j * d, (j + 1) * d), list[j]! * d);
  }

  const S = F * c.nExpertShared;
  const sg = w.mm(P + 'ffn_gate_shexp.weight', d, S, X, T, w.temp('ffn.sg', T * S));
  const su = w.mm(P + 'ffn_up_shexp.weight', d, S, X, T, w.temp('ffn.su', T * S));
  const sa = swiglu(w, sg, su, T * S, c.clampShexp[l]!, w.temp('ffn.sa', T * S));
  const sy = w.mm(P + 'ffn_down_shexp.weight', S, d, sa, T, w.temp('ffn.sy', T * d));

  const out = new Float32Array(T * d);
  // natively in one call, the same f32 order (bit for bit); the loops below are the reference
  if (w.native && dsv4MoeCombine(out, y, weights, sy, T, K, d)) return out;
  for (let t = 0; t < T; t++) {
    for (let k = 0; k < K; k++) {
      const wt = weights[t * K + k]!;
      const yo = (t * K + k) * d;
      for (let i = 0; i < d; i++) out[t * d + i] = out[t * d + i]! + y[yo + i]! * wt;
    }
    for (let i = 0; i < d; i++) out[t * d + i] = out[t * d + i]! + sy[t * d + i]!;
  }
  return out;
}
