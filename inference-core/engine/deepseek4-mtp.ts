/**
 * deepseek4's MTP block (nextn_predict_layers = 1) as llama.cpp's
 * llama_model_deepseek4::graph_mtp computes it and common/speculative.cpp's
 * draft-mtp drives it:
 *
 *   input at position p: token x_p and h_{p−1}, the trunk's hidden state (all
 *   hc streams, before the head) after x_{p−1} (zeros at p = 0)
 *   H = eh_proj · [rmsnorm(embd(x_p))·enorm ; rmsnorm(h_stream)·hnorm]   per stream
 *   H = the block at layer n_layer (hyper-connected attention over its own
 *       SWA window, compress ratio 0; V4 MoE, never hash-routed; shared expert)
 *   logits = output · rmsnorm(hc_head(H))·shared_head_norm  → x_{p+1}; H is the next step's h
 *
 * Catch-up (llama.cpp's process()): the block's window holds the keys of
 * the fed positions, paired with the target's own hidden states. A key depends
 * only on its row's input, not on the window, so a decode step only records
 * the inputs (mtpCatchUp) and the keys are computed when a draft is about to
 * be made (mtpKeys), only up to the key (no attention, FFN or head), and only
 * for the rows a draft attends to: decoding without drafting pays nothing for
 * MTP. A prefill chunk keys its window in the same pass (one batch). Drafting (MtpDrafter) runs whole blocks on a copy of the window: the
 * sequence's state never holds a draft.
 */
import { EngineError } from './engine-errors.ts';
import { attentionKv, deepseek4Attention, type Deepseek4Stats } from './deepseek4-attention.ts';
import { deepseek4Ffn } from './deepseek4-ffn.ts';
import type { Deepseek4Model } from './deepseek4-forward.ts';
import { ROLLBACK_ROWS } from './deepseek4-marks.ts';
import { rmsNorm } from './deepseek4-math.ts';
import type { MtpRow } from './deepseek4-mtp-window.ts';
import { emptyLayerState, type Deepseek4LayerState, type Deepseek4State } from './deepseek4-state.ts';

/** Throws the typed error when the model has no MTP block llama.cpp's graph_mtp would run. */
export function checkMtp(model: Deepseek4Model): void {
  const c = model.cfg;
  if (c.nMtp !== 1) throw new EngineError('KVT_ERR_ENGINE_UNSUPPORTED_MODEL', `this deepseek4 file has no MTP block (nextn_predict_layers ${c.nMtp}); MTP drafting needs one: use another KVTIER_SPECULATIVE mode`);
  if (c.ratios[c.nLayer] !== 0) throw new EngineError('KVT_ERR_ENGINE_UNSUPPORTED_MODEL', `the MTP block's compress ratio is ${c.ratios[c.nLayer]}; llama.cpp's MTP graph attends through a plain SWA cache (ratio 0)`);
  if (c.nLayer < c.hashLayers) throw new EngineError('KVT_ERR_ENGINE_UNSUPPORTED_MODEL', 'the MTP block is hash-routed; llama.cpp does not support hash-routed MTP blocks');
}

/** eh_proj over [enorm(embd(token)) ; hnorm(h stream)] for T rows: [T][hc·n_embd]. */
function mtpInput(model: Deepseek4Model, tokens: readonly number[], hPrev: (t: number) => Float32Array | null): Float32Array {
  const c = model.cfg;
  const w = model.weights;
  const d = c.nEmbd;
  const hc = c.hc;
  const P = `blk.${c.nLayer}.nextn.`;
  const embd = w.has(P + 'embed_tokens.weight') ? w.get(P + 'embed_tokens.weight') : w.get('token_embd.weight');
  const enorm = w.get(P + 'enorm.weight');
  const hnorm = w.get(P + 'hnorm.weight');
  const T = tokens.length;
  const cat = new Float32Array(T * hc * 2 * d);
  const e = new Float32Array(d);
  for (let t = 0; t < T; t++) {
    rmsNorm(embd.subarray(tokens[t]! * d, (tokens[t]! + 1) * d), c.rmsEps, enorm, e);
    const h = hPrev(t);
    for (let s = 0; s < hc; s++) {
      const o = (t * hc + s) * 2 * d;
      cat.set(e, o);
      if (h) rmsNorm(h.subarray(s * d, (s + 1) * d), c.rmsEps, hnorm, cat.subarray(o + d, o + 2 * d));
    }
  }
  return w.mm(P + 'eh_proj.weight', 2 * d, d, cat, T * hc);
}

/**
 * Records the rows just fed to the trunk (H: their hidden states,
 * [T][hc·n_embd]) in the MTP window and sets st.hLast. Rows of a forward of at
 * most ROLLBACK_ROWS rows (a decode step, a verification) stay unkeyed: a step
 * that drafts nothing costs a few copies. A longer forward (a prefill chunk)
 * keys its window at once, where one batch over its rows is cheap; otherwise the
 * first draft after a prefill would key the whole window at decode time.
 */
export function mtpCatchUp(model: Deepseek4Model, st: Deepseek4State, tokens: readonly number[], H: Float32Array): void {
  const n = model.cfg.hc * model.cfg.nEmbd;
  const T = tokens.length;
  // rows a window can reach once at most ROLLBACK_ROWS rows are undone
  const from = Math.max(0, T - model.cfg.nSwa - ROLLBACK_ROWS);
  const h = (t: number) => (t < 0 ? st.hLast : H.slice(t * n, (t + 1) * n));
  let hPrev = h(from - 1);
  const rows: MtpRow[] = [];
  for (let t = from; t < T; t++) {
    const ht = h(t);
    rows.push({ token: tokens[t]!, hPrev, key: null });
    hPrev = ht;
  }
  st.mtp!.push(rows, from);
  st.hLast = hPrev;
  // a prefill chunk keys its window now, in one batch (~1 % of the chunk); a decode step or a verification stays lazy
  if (T > ROLLBACK_ROWS) mtpKeys(model, st);
}

/**
 * Computes the keys of the MTP window's rows a draft attends to that are not
 * keyed yet, in one pass (up to the key: no attention, FFN or head).
 */
export function mtpKeys(model: Deepseek4Model, st: Deepseek4State): void {
  const c = model.cfg;
  const win = st.mtp!;
  const all = win.windowRows();
  const p0 = win.end - all.length;
  const todo = all.map((r, i) => ({ r, pos: p0 + i })).filter((x) => x.r.key === null);
  const m = todo.length;
  if (m === 0) return;
  const il = c.nLayer;
  const Hin = mtpInput(model, todo.map((x) => x.r.token), (i) => todo[i]!.r.hPrev);
  const X = new Float32Array(m * c.nEmbd);
  model.collapseRows(Hin, m, model.mix(Hin, m, `blk.${il}.hc_attn`, (2 + c.hc) * c.hc, true).pre, X);
  model.normRows(X, m, `blk.${il}.attn_norm.weight`);
  const D = c.headDim;
  // one KV projection over the rows, each roped at its own position: runs of consecutive positions share a call
  for (let i = 0; i < m; ) {
    let j = i + 1;
    while (j < m && todo[j]!.pos === todo[j - 1]!.pos + 1) j++;
    const kv = attentionKv(c, model.weights, il, X.subarray(i * c.nEmbd, j * c.nEmbd), j - i, todo[i]!.pos);
    for (let k = i; k < j; k++) todo[k]!.r.key = kv.slice((k - i) * D, (k - i + 1) * D);
    i = j;
  }
}

/**
 * Drafts from a sequence's state: step(token) feeds the next token (first the
 * one sampled after the state's last, then each draft) and returns the MTP
 * block's logits for the token after it. Works on its own copy of the window.
 */
export class MtpDrafter {
  private readonly window: Deepseek4LayerState;
  private h: Float32Array | null;
  private pos: number;
  private readonly stats: Deepseek4Stats = { compressedAttended: 0, compressedAvailable: 0, expertsComputed: 0 };

  constructor(
    private readonly model: Deepseek4Model,
    st: Deepseek4State,
  ) {
    if (!st.mtp) throw new EngineError('KVT_ERR_ENGINE_SEQUENCE_STATE', 'this sequence was not fed with MTP drafting on (load the engine with mtp: true)');
    mtpKeys(model, st);
    this.window = { ...emptyLayerState(), ...st.mtp.keyed() };
    this.h = st.hLast;
    this.pos = st.pos;
  }

  step(token: number): Float32Array {
    const model = this.model;
    const c = model.cfg;
    const w = model.weights;
    const il = c.nLayer;
    const P = `blk.${il}.`;
    const h = this.h;
    let H = mtpInput(model, [token], () => h);
    const p = this.pos;
    H = model.hcBlock(H, 1, P + 'hc_attn', (X) => deepseek4Attention(c, w, il, model.normRows(X, 1, P + 'attn_norm.weight'), 1, p, this.window, model.ablation, this.stats));
    H = model.hcBlock(H, 1, P + 'hc_ffn', (X) => deepseek4Ffn(c, w, il, model.normRows(X, 1, P + 'ffn_norm.weight'), 1, [token], this.stats));
    this.h = H;
    this.pos++;
    const norm = w.has(P + 'nextn.shared_head_norm.weight') ? P + 'nextn.shared_head_norm.weight' : 'output_norm.weight';
    const out = w.has(P + 'nextn.shared_head_head.weight') ? P + 'nextn.shared_head_head.weight' : 'output.weight';
    return model.head(H, [0], norm, out)[0]!;
  }
}
