/**
 * The MoE FFN of a gpt-oss layer, as llama.cpp's build_moe_ffn computes it
 * for LLM_ARCH_OPENAI_MOE (LLM_FFN_SWIGLU_OAI_MOE, SOFTMAX_WEIGHT gating):
 *
 *   logits  = h·Wrouterᵀ + b_router                          [n][E]
 *   experts = the K largest logits, best first (ggml_argsort_top_k)
 *   w       = softmax over those K logits                    (ggml_soft_max: Σ in double, ·1/Σ)
 *   per picked expert e, over the rows that picked it (one GEMM each):
 *     g = h·Wgate_eᵀ + bgate_e;  u = h·Wup_eᵀ + bup_e
 *     a = swiglu_oai(g, u) = min(g, L) / (1 + exp(−α·min(g, L))) · (clamp(u, −L, L) + 1)
 *     y = a·Wdown_eᵀ + bdown_e
 *   out[row] = Σ_slot w·y, added in slot order (as ggml adds the expert views)
 *
 * Routing and the elementwise steps run on the host in f32; the expert
 * matrices are the backend's matmuls (MXFP4 experts repacked as Q8_0 at load,
 * gptoss-load.ts). Every value of a row depends on that row alone, so the
 * result never depends on the rest of the batch.
 */
import type { Backend, TensorHandle, WeightHandle } from '../../native/index.ts';
import { groupByExpert } from './deepseek-routing.ts';

const f = Math.fround;

export interface GptOssMoeWeights {
  router: WeightHandle;
  /** [E] */
  routerBias: Float32Array;
  gate: WeightHandle[];
  up: WeightHandle[];
  down: WeightHandle[];
  /** [E][ff] */
  gateBias: Float32Array;
  upBias: Float32Array;
  /** [E][d] */
  downBias: Float32Array;
}

export interface GptOssMoeDims {
  dim: number;
  expertCount: number;
  expertUsed: number;
  expertFfnDim: number;
  swigluAlpha: number;
  swigluLimit: number;
}

/** Top-K experts by logit (best first; ties: lower index) and their softmax weights, per row. */
export function routeSoftmaxWeight(logits: Float32Array, rows: number, E: number, K: number): { experts: Int32Array; weights: Float32Array } {
  const experts = new Int32Array(rows * K);
  const weights = new Float32Array(rows * K);
  const idx = Array.from({ length: E }, (_, i) => i);
  for (let r = 0; r < rows; r++) {
    const row = logits.subarray(r * E, (r + 1) * E);
    const order = idx.slice().sort((a, b) => (row[b] > row[a] ? 1 : row[b] < row[a] ? -1 : a - b));
    let max = -Infinity;
    for (let k = 0; k < K; k++) max = Math.max(max, row[order[k]]);
    let sum = 0; // ggml_float (double)
    for (let k = 0; k < K; k++) {
      experts[r * K + k] = order[k];
      const e = f(Math.exp(f(row[order[k]] - max)));
      weights[r * K + k] = e;
      sum += e;
    }
    const inv = f(1 / sum);
    for (let k = 0; k < K; k++) weights[r * K + k] = f(weights[r * K + k] * inv);
  }
  return { experts, weights };
}

export class GptOssMoe {
  private readonly t: { router: TensorHandle; xe: TensorHandle; g: TensorHandle; u: TensorHandle; ye: TensorHandle };
  private readonly alpha: number;
  private readonly limit: number;

  constructor(
    private readonly b: Backend,
    private readonly c: GptOssMoeDims,
    maxRows: number,
  ) {
    this.t = {
      router: b.alloc(maxRows * c.expertCount),
      xe: b.alloc(maxRows * c.dim),
      g: b.alloc(maxRows * c.expertFfnDim),
      u: b.alloc(maxRows * c.expertFfnDim),
      ye: b.alloc(maxRows * c.dim),
    };
    this.alpha = f(c.swigluAlpha);
    this.limit = f(c.swigluLimit);
  }

  /** out[n][d] = the MoE FFN of h[n][d]. */
  forward(out: TensorHandle, hT: TensorHandle, w: GptOssMoeWeights, n: number): void {
    const { b, c, t } = this;
    const d = c.dim;
    const E = c.expertCount;
    const K = c.expertUsed;
    const ff = c.expertFfnDim;
    const router = b.view(t.router, 0, n * E);
    b.matmul(router, hT, w.router, n);
    const logits = b.read(router);
    for (let r = 0; r < n; r++) for (let e = 0; e < E; e++) logits[r * E + e] = f(logits[r * E + e] + w.routerBias[e]);
    const routes = routeSoftmaxWeight(logits, n, E, K);
    const h = b.read(hT);
    const ys = new Float32Array(n * K * d);
    for (const grp of groupByExpert(routes, n, K, E)) {
      const m = grp.rows.length;
      const e = grp.expert;
      const xe = new Float32Array(m * d);
      for (let i = 0; i < m; i++) xe.set(h.subarray(grp.rows[i] * d, (grp.rows[i] + 1) * d), i * d);
      const xv = b.view(t.xe, 0, m * d);
      b.write(xv, xe);
      const gv = b.view(t.g, 0, m * ff);
      const uv = b.view(t.u, 0, m * ff);
      b.matmul(gv, xv, w.gate[e], m);
      b.matmul(uv, xv, w.up[e], m);
      const g = b.read(gv);
      const u = b.read(uv);
      for (let i = 0; i < m; i++)
        for (let j = 0; j < ff; j++) {
          const k = i * ff + j;
          const x = Math.min(f(g[k] + w.gateBias[e * ff + j]), this.limit);
          const y = Math.min(Math.max(f(u[k] + w.upBias[e * ff + j]), -this.limit), this.limit);
          const glu = f(x / f(1 + f(Math.exp(f(this.alpha * -x)))));
          g[k] = f(glu * f(y + 1));
        }
      b.write(gv, g);
      const yv = b.view(t.ye, 0, m * d);
      b.matmul(yv, gv, w.down[e], m);
      const y = b.read(yv);
      for (let i = 0; i < m; i++) {
        const wt = routes.weights[grp.rows[i] * K + grp.slots[i]];
        const dst = (grp.rows[i] * K + grp.slots[i]) * d;
        for (let j = 0; j < d; j++) ys[dst + j] = f(f(y[i * d + j] + w.downBias[e * d + j]) * wt);
      }
    }
    const moe = new Float32Array(n * d);
    for (let r = 0; r < n; r++)
      for (let j = 0; j < d; j++) {
        let s = ys[r * K * d + j];
        for (let k = 1; k < K; k++) s = f(s + ys[(r * K + k) * d + j]);
        moe[r * d + j] = s;
      }
    b.write(out, moe);
  }

  destroy(): void {
    for (const h of Object.values(this.t)) this.b.free(h);
  }
}
