/**
 * The FFN half of a deepseek2 layer (deepseek-graph.ts): the dense SwiGLU FFN
 * of the leading layers, and the MoE of the rest —
 *
 *   route every row (deepseek-routing.ts: gating, bias, groups, top-k, weights)
 *   per picked expert: its rows gathered into one block, y = FFN_e(rows) as one GEMM each
 *   moe[row] = Σ_slot weight·y, summed in slot order (best expert first, as ggml adds them)
 *   out = moe + shared-expert FFN(h)
 *
 * Only the picked experts run; a decode batch groups the rows of all its
 * sequences by expert. Every value of a row depends on that row alone
 * (matmul's numerics are independent of how many rows share a call), so the
 * result never depends on the rest of the batch.
 */
import type { Backend, TensorHandle, WeightHandle } from '../../native/index.ts';
import type { DeepseekConfig } from '../deepseek-config.ts';
import { groupByExpert, routeTokens, type RoutingConfig } from './deepseek-routing.ts';
import type { DeepseekMoeWeights } from './deepseek-weights.ts';

const f = Math.fround;

export class DeepseekFfn {
  private readonly routing: RoutingConfig;
  private readonly t: { router: TensorHandle; gate: TensorHandle; up: TensorHandle; xe: TensorHandle; ye: TensorHandle };
  private readonly host: { h: Float32Array; xe: Float32Array; ye: Float32Array; moe: Float32Array };

  constructor(
    private readonly backend: Backend,
    private readonly c: DeepseekConfig,
    maxRows: number,
  ) {
    this.routing = {
      experts: c.expertCount,
      used: c.expertUsed,
      gating: c.gating,
      groups: c.expertGroups,
      groupsUsed: c.expertGroupsUsed,
      norm: c.expertWeightsNorm,
      scale: c.expertWeightsScale,
    };
    const ffMax = Math.max(c.ffnDim, c.expertFfnDim * Math.max(1, c.expertShared));
    const rd = maxRows * c.dModel;
    this.t = {
      router: backend.alloc(maxRows * Math.max(1, c.expertCount)),
      gate: backend.alloc(maxRows * ffMax),
      up: backend.alloc(maxRows * ffMax),
      xe: backend.alloc(rd),
      ye: backend.alloc(rd),
    };
    this.host = { h: new Float32Array(rd), xe: new Float32Array(rd), ye: new Float32Array(rd), moe: new Float32Array(rd) };
  }

  /** out[m][d] = (silu(x·Wgᵀ) ⊙ x·Wuᵀ)·Wdᵀ over m rows of x. */
  ffn(out: TensorHandle, x: TensorHandle, gate: WeightHandle, up: WeightHandle, down: WeightHandle, m: number): void {
    const b = this.backend;
    const ff = gate.rows;
    const g = b.view(this.t.gate, 0, m * ff);
    const u = b.view(this.t.up, 0, m * ff);
    b.matmul(g, x, gate, m);
    b.matmul(u, x, up, m);
    b.swiglu(g, g, u, m * ff);
    b.matmul(out, g, down, m);
  }

  /** out[n][d] = routed experts + shared experts of h[n][d]. */
  moe(out: TensorHandle, hT: TensorHandle, w: DeepseekMoeWeights, n: number): void {
    const b = this.backend;
    const { t, host: hs } = this;
    const d = this.c.dModel;
    const E = this.c.expertCount;
    const K = this.c.expertUsed;
    const router = b.view(t.router, 0, n * E);
    b.matmul(router, hT, w.router, n);
    const routes = routeTokens(b.read(router), n, this.routing, w.probsBias);
    const h = b.read(hT, hs.h.subarray(0, n * d));
    // ys[row][slot][d] = weight · FFN_expert(h[row])
    const ys = new Float32Array(n * K * d);
    for (const grp of groupByExpert(routes, n, K, E)) {
      const m = grp.rows.length;
      for (let i = 0; i < m; i++) hs.xe.set(h.subarray(grp.rows[i] * d, (grp.rows[i] + 1) * d), i * d);
      b.write(t.xe, hs.xe.subarray(0, m * d));
      const ye = b.view(t.ye, 0, m * d);
      this.ffn(ye, b.view(t.xe, 0, m * d), w.gate[grp.expert], w.up[grp.expert], w.down[grp.expert], m);
      const y = b.read(ye, hs.ye.subarray(0, m * d));
      for (let i = 0; i < m; i++) {
        const wt = routes.weights[grp.rows[i] * K + grp.slots[i]];
        const dst = (grp.rows[i] * K + grp.slots[i]) * d;
        for (let j = 0; j < d; j++) ys[dst + j] = f(y[i * d + j] * wt);
      }
    }
    const moe = hs.moe;
    for (let r = 0; r < n; r++)
      for (let j = 0; j < d; j++) {
        let s = ys[r * K * d + j];
        for (let k = 1; k < K; k++) s = f(s + ys[(r * K + k) * d + j]);
        moe[r * d + j] = s;
      }
    if (w.shGate) {
      this.ffn(out, hT, w.shGate, w.shUp!, w.shDown!, n);
      const routed = b.view(t.ye, 0, n * d);
      b.write(routed, moe.subarray(0, n * d));
      b.add(out, routed, out, n * d);
    } else b.write(out, moe.subarray(0, n * d));
  }

  destroy(): void {
    for (const h of Object.values(this.t)) this.backend.free(h);
  }
}
