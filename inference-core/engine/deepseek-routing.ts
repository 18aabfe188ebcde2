/**
 * DeepSeek MoE routing on the host, as llama.cpp's build_moe_ffn computes it
 * (f32 values):
 *
 *   probs     = softmax(logits) | sigmoid(logits)                     per row, [experts]
 *   selection = probs + exp_probs_b                                   (bias only picks experts)
 *   groups    (groups > 1): group score = sum of its 2 best selection values; all but the
 *             best `groupsUsed` groups are masked to −∞
 *   experts   = the `used` best selection values, best first
 *   weights   = probs of those experts; / max(Σ, 2^-14) when `norm`; × scale when ≠ 0 and ≠ 1
 *
 * The result is a pure function of one row's logits, so a token routes the
 * same whatever else is in the batch.
 */
import type { ExpertGating } from '../deepseek-config.ts';

export interface RoutingConfig {
  experts: number;
  used: number;
  gating: ExpertGating;
  groups: number;
  groupsUsed: number;
  norm: boolean;
  scale: number;
}

export interface Routes {
  /** [rows][used] expert ids, best first. */
  experts: Int32Array;
  /** [rows][used] mixing weights. */
  weights: Float32Array;
}

const f = Math.fround;
/** Smallest normal f16: llama.cpp clamps the weight sum to it before dividing. */
const MIN_WEIGHT_SUM = 6.103515625e-5;

/** Indices of the `k` largest values of `v`, largest first (ties: lower index first). */
function topK(v: Float32Array, k: number): number[] {
  const idx = Array.from(v.keys());
  idx.sort((a, b) => (v[b] > v[a] ? 1 : v[b] < v[a] ? -1 : a - b));
  return idx.slice(0, k);
}

export function routeTokens(logits: Float32Array, rows: number, c: RoutingConfig, probsBias?: Float32Array): Routes {
  const E = c.experts;
  const K = c.used;
  const experts = new Int32Array(rows * K);
  const weights = new Float32Array(rows * K);
  const probs = new Float32Array(E);
  const sel = new Float32Array(E);
  for (let r = 0; r < rows; r++) {
    const row = logits.subarray(r * E, (r + 1) * E);
    if (c.gating === 'softmax') {
      let max = -Infinity;
      for (let e = 0; e < E; e++) max = Math.max(max, row[e]);
      let sum = 0;
      for (let e = 0; e < E; e++) {
        probs[e] = f(Math.exp(row[e] - max));
        sum += probs[e];
      }
      const inv = f(1 / sum);
      for (let e = 0; e < E; e++) probs[e] = f(probs[e] * inv);
    } else {
      for (let e = 0; e < E; e++) probs[e] = f(1 / (1 + Math.exp(-row[e])));
    }
    for (let e = 0; e < E; e++) sel[e] = probsBias ? f(probs[e] + probsBias[e]) : probs[e];
    if (c.groups > 1) {
      const per = E / c.groups;
      const score = new Float32Array(c.groups);
      for (let g = 0; g < c.groups; g++) {
        const best = topK(sel.subarray(g * per, (g + 1) * per), Math.min(2, per));
        score[g] = best.reduce((s, i) => f(s + sel[g * per + i]), 0);
      }
      const keep = new Set(topK(score, c.groupsUsed));
      for (let g = 0; g < c.groups; g++) if (!keep.has(g)) sel.fill(-Infinity, g * per, (g + 1) * per);
    }
    const chosen = topK(sel, K);
    let sum = 0;
    for (let k = 0; k < K; k++) {
      experts[r * K + k] = chosen[k];
      weights[r * K + k] = probs[chosen[k]];
      sum = f(sum + probs[chosen[k]]);
    }
    if (c.norm) {
      const denom = Math.max(sum, MIN_WEIGHT_SUM);
      for (let k = 0; k < K; k++) weights[r * K + k] = f(weights[r * K + k] / denom);
    }
    if (c.scale !== 0 && c.scale !== 1) for (let k = 0; k < K; k++) weights[r * K + k] = f(weights[r * K + k] * c.scale);
  }
  return { experts, weights };
}

/**
 * Rows grouped by expert: for each expert that any row picked, its rows
 * (ascending) and the slot (0..used) each row picked it in, so an expert's
 * FFN runs once over all its rows as one GEMM.
 */
export function groupByExpert(routes: Routes, rows: number, used: number, experts: number): Array<{ expert: number; rows: Int32Array; slots: Int32Array }> {
  const count = new Int32Array(experts);
  for (let i = 0; i < rows * used; i++) count[routes.experts[i]]++;
  const out: Array<{ expert: number; rows: Int32Array; slots: Int32Array }> = [];
  const at = new Map<number, { expert: number; rows: Int32Array; slots: Int32Array; n: number }>();
  for (let e = 0; e < experts; e++) {
    if (count[e] === 0) continue;
    const g = { expert: e, rows: new Int32Array(count[e]), slots: new Int32Array(count[e]), n: 0 };
    at.set(e, g);
  }
  for (let r = 0; r < rows; r++)
    for (let k = 0; k < used; k++) {
      const g = at.get(routes.experts[r * used + k])!;
      g.rows[g.n] = r;
      g.slots[g.n++] = k;
    }
  for (const g of at.values()) out.push({ expert: g.expert, rows: g.rows, slots: g.slots });
  return out;
}
