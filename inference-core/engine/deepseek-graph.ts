/**
 * The DeepSeek-V2/V3 forward pass (GGUF `deepseek2`): Multi-head Latent
 * Attention over a latent KV pool, then a dense FFN (leading layers) or a
 * routed mixture of experts plus shared experts, as llama.cpp's
 * llm_build_deepseek2 with MLA (absorbed form):
 *
 *   x = embed(tokens)                                                [n][d]
 *   per layer:
 *     h   = rmsNorm(x)·attn_norm
 *     q   = h·Wqᵀ  |  rmsNorm(h·Wq_aᵀ)·q_a_norm · Wq_bᵀ               [n][H][nope+rope]
 *     kva = h·Wkv_aᵀ = [c_kv | k_pe]                                  [n][kvLora + rope]
 *     c_kv = rmsNorm(c_kv)·kv_a_norm;  rope(k_pe), rope(q_pe)          (YaRN, mode normal)
 *     latent row [c_kv | k_pe] → the pool (one row per token and layer)
 *     q_abs_h = W_UK_h · q_nope_h  (attn_k_b)                           [n][H][kvLora]
 *     o_lat = MQA attention of [q_abs | q_pe] over the latent rows, V = c_kv
 *     o_h = W_UV_h · o_lat_h  (attn_v_b);  x += o·Woᵀ
 *     h = rmsNorm(x)·ffn_norm
 *     dense: x += swiglu FFN(h)
 *     MoE:   route (deepseek-routing.ts); per picked expert, its rows as one GEMM:
 *            y_e = swiglu FFN_e(h[rows]);  moe = Σ_slot w·y (slot order); x += moe + shared FFN(h)
 *   logits = rmsNorm(x[row])·output_norm · Woutᵀ
 *
 * kq scale = mscale² / √(nope+rope) with llama.cpp's YaRN pre-scaling:
 * mscale = attn_factor·(1 + 0.1·ln(1/freq_scale)) · (1 + 0.1·mscale_all_dim·ln(1/freq_scale)).
 *
 * Rows move between the backend's ops through small host staging copies
 * (per-head gathers, the latent concat, expert row groups); every step is a
 * function of its own row only, so the result of a row never depends on the
 * other rows of the call (cache equivalence holds bit for bit).
 */
import type { AttentionSegment, Backend, KvPoolHandle, RopeOptions, RopeScaling, TensorHandle } from '../../native/index.ts';
import type { DeepseekConfig } from '../deepseek-config.ts';
import { EngineError, forwardRows } from './engine-errors.ts';
import type { DeepseekWeights } from './deepseek-weights.ts';
import { DeepseekFfn } from './deepseek-ffn.ts';
import { ropeScalingFrom } from './rope-scaling.ts';

/** What the engine sees of a deepseek2 model (GraphConfig's counterpart). */
export interface DeepseekGraphConfig {
  architecture: 'deepseek2';
  vocabSize: number;
  model: DeepseekConfig;
  /** Latent row width: kvLoraRank + rope dims. */
  latentDim: number;
  kqScale: number;
  rope: RopeOptions;
}

const f = Math.fround;

/** Rope and kq scale of a deepseek2 model, with llama.cpp's deepseek2 YaRN handling. */
export function deepseekGraphConfig(c: DeepseekConfig, where: string): DeepseekGraphConfig {
  let scaling: RopeScaling | undefined = ropeScalingFrom(c.ropeScaling, where);
  // llama.cpp: with yarn_log_multiplier set, deepseek2's yarn_attn_factor is 1 before the
  // 1/(1 + 0.1·ln factor) cancellation (mscale == mscale_all_dim), whatever the multiplier
  if (scaling && scaling.extFactor !== 0 && c.yarnLogMul !== 0) {
    const factor = f(1 / scaling.freqScale);
    scaling = { ...scaling, attnFactor: f(f(1 / f(1 + f(f(0.1) * f(Math.log(factor))))) * f(c.ropeScaling.attnFactor)) };
  }
  const fs = scaling?.freqScale ?? 1;
  const af = scaling?.attnFactor ?? 1;
  const lnInv = f(Math.log(f(1 / fs)));
  const attnOrg = f(af * f(1 + f(f(0.1) * lnInv)));
  const mscale = f(attnOrg * f(1 + f(f(f(0.1) * c.yarnLogMul) * lnInv)));
  const kqScale = f(f(mscale * mscale) / f(Math.sqrt(c.qkNopeDim + c.qkRopeDim)));
  return {
    architecture: 'deepseek2',
    vocabSize: c.vocabSize,
    model: c,
    latentDim: c.kvLoraRank + c.qkRopeDim,
    kqScale,
    rope: { mode: 'normal', freqBase: c.ropeTheta, rotDims: c.qkRopeDim, ...(scaling ? { scaling } : {}) },
  };
}

/** One sequence's rows in a forward call. */
export interface DeepseekRowSegment extends AttentionSegment {
  blockTable: Int32Array;
}

export class DeepseekGraph {
  private readonly t: Record<string, TensorHandle> = {};
  private readonly host: Record<string, Float32Array> = {};
  private readonly ffnBlock: DeepseekFfn;

  constructor(
    private readonly backend: Backend,
    readonly config: DeepseekGraphConfig,
    private readonly weights: DeepseekWeights,
    readonly maxRows: number,
    readonly maxLogitRows: number,
  ) {
    if (!backend.createMlaKvPool || !backend.mlaKvWrite || !backend.mlaAttention) {
      throw new EngineError('KVT_ERR_ENGINE_UNSUPPORTED_MODEL', `the ${backend.name} backend has no MLA ops; run deepseek2 models on the cpu backend (KVTIER_DEVICE=cpu)`);
    }
    const c = config.model;
    const H = c.nHeads;
    const W = config.latentDim;
    const kDim = c.qkNopeDim + c.qkRopeDim;
    this.ffnBlock = new DeepseekFfn(backend, c, maxRows);
    const R = maxRows;
    const sizes: Record<string, number> = {
      x: R * c.dModel,
      h: R * c.dModel,
      proj: R * c.dModel,
      qa: R * Math.max(1, c.qLoraRank),
      q: R * H * kDim,
      kva: R * W,
      ckv: R * c.kvLoraRank,
      kpe: R * c.qkRopeDim,
      qpe: R * H * c.qkRopeDim,
      qn: R * c.qkNopeDim,
      qabs: R * c.kvLoraRank,
      qm: R * H * W,
      lat: R * W,
      olat: R * H * c.kvLoraRank,
      lh: R * c.kvLoraRank,
      vh: R * c.vHeadDim,
      attnV: R * H * c.vHeadDim,
      normLast: maxLogitRows * c.dModel,
      logits: maxLogitRows * c.vocabSize,
    };
    for (const [k, n] of Object.entries(sizes)) this.t[k] = backend.alloc(n);
    for (const k of ['q', 'kva', 'kpe', 'qpe', 'qn', 'qabs', 'qm', 'lat', 'olat', 'lh', 'vh', 'attnV']) this.host[k] = new Float32Array(sizes[k]);
  }

  forward(pool: KvPoolHandle, tokens: Int32Array, positions: Int32Array, segments: DeepseekRowSegment[], logitRows: Int32Array): Float32Array {
    const b = this.backend;
    const cfg = this.config;
    const c = cfg.model;
    const n = forwardRows(this, tokens, positions, logitRows);
    let rowsCovered = 0;
    for (const s of segments) rowsCovered += s.queries;
    if (rowsCovered !== n) throw new EngineError('KVT_ERR_ENGINE_BAD_ARGUMENT', `segments cover ${rowsCovered} rows, the call has ${n}`);
    const t = this.t;
    const v = (name: string, len: number, off = 0) => b.view(t[name], off, len);
    const d = c.dModel;
    b.embed(v('x', n * d), this.weights.tokenEmbd, tokens);
    for (let l = 0; l < c.nLayers; l++) {
      const w = this.weights.layers[l];
      b.rmsNorm(v('h', n * d), v('x', n * d), w.attnNorm, n, d, c.rmsEps);
      this.attention(pool, l, n, positions, segments);
      b.add(v('x', n * d), v('x', n * d), v('proj', n * d), n * d);
      b.rmsNorm(v('h', n * d), v('x', n * d), w.ffnNorm, n, d, c.rmsEps);
      if (w.dense) this.ffnBlock.ffn(v('proj', n * d), v('h', n * d), w.dense.gate, w.dense.up, w.dense.down, n);
      else this.ffnBlock.moe(v('proj', n * d), v('h', n * d), w.moe!, n);
      b.add(v('x', n * d), v('x', n * d), v('proj', n * d), n * d);
    }
    const m = logitRows.length;
    if (m === 0) return new Float32Array(0);
    for (let i = 0; i < m; i++) {
      const r = logitRows[i];
      if (r < 0 || r >= n) throw new EngineError('KVT_ERR_ENGINE_BAD_ARGUMENT', `logit row ${r} outside 0..${n - 1}`);
      b.rmsNorm(v('normLast', d, i * d), v('x', d, r * d), this.weights.outputNorm, 1, d, c.rmsEps);
    }
    const logits = v('logits', m * c.vocabSize);
    b.matmul(logits, v('normLast', m * d), this.weights.output, m);
    return b.read(logits);
  }

  /** MLA for rows [0, n): writes their latent rows into the pool and leaves o·Woᵀ in `proj`. */
  private attention(pool: KvPoolHandle, l: number, n: number, positions: Int32Array, segments: DeepseekRowSegment[]): void {
    const b = this.backend;
    const cfg = this.config;
    const c = cfg.model;
    const w = this.weights.layers[l];
    const t = this.t;
    const hs = this.host;
    const v = (name: string, len: number, off = 0) => b.view(t[name], off, len);
    const H = c.nHeads;
    const R = c.kvLoraRank;
    const P = c.qkRopeDim;
    const N = c.qkNopeDim;
    const kDim = N + P;
    const W = cfg.latentDim;
    const d = c.dModel;

    if (w.wq) b.matmul(v('q', n * H * kDim), v('h', n * d), w.wq, n);
    else {
      b.matmul(v('qa', n * c.qLoraRank), v('h', n * d), w.wqA!, n);
      b.rmsNorm(v('qa', n * c.qLoraRank), v('qa', n * c.qLoraRank), w.qANorm!, n, c.qLoraRank, c.rmsEps);
      b.matmul(v('q', n * H * kDim), v('qa', n * c.qLoraRank), w.wqB!, n);
    }
    b.matmul(v('kva', n * W), v('h', n * d), w.wkvA, n);
    const q = b.read(v('q', n * H * kDim), hs.q.subarray(0, n * H * kDim));
    const kva = b.read(v('kva', n * W), hs.kva.subarray(0, n * W));

    // c_kv: rows [n][R] normed; k_pe: rows [n][P] roped
    const ckvHost = hs.lat; // staging, overwritten below by the concat
    const kpeHost = hs.kpe;
    for (let r = 0; r < n; r++) {
      ckvHost.set(kva.subarray(r * W, r * W + R), r * R);
      kpeHost.set(kva.subarray(r * W + R, (r + 1) * W), r * P);
    }
    b.write(t.ckv, ckvHost.subarray(0, n * R));
    b.write(t.kpe, kpeHost.subarray(0, n * P));
    b.rmsNorm(v('ckv', n * R), v('ckv', n * R), w.kvANorm, n, R, c.rmsEps);
    b.rope(v('kpe', n * P), positions, n, 1, P, cfg.rope);
    // q_pe: [n][H][P] roped
    const qpe = hs.qpe;
    for (let r = 0; r < n; r++) for (let h = 0; h < H; h++) qpe.set(q.subarray((r * H + h) * kDim + N, (r * H + h + 1) * kDim), (r * H + h) * P);
    b.write(t.qpe, qpe.subarray(0, n * H * P));
    b.rope(v('qpe', n * H * P), positions, n, H, P, cfg.rope);
    b.read(v('qpe', n * H * P), qpe.subarray(0, n * H * P));

    // latent rows [c_kv | k_pe] → pool
    const ckv = b.read(v('ckv', n * R));
    const kpe = b.read(v('kpe', n * P));
    const lat = hs.lat;
    for (let r = 0; r < n; r++) {
      lat.set(ckv.subarray(r * R, (r + 1) * R), r * W);
      lat.set(kpe.subarray(r * P, (r + 1) * P), r * W + R);
    }
    b.write(t.lat, lat.subarray(0, n * W));
    let row0 = 0;
    for (const seg of segments) {
      b.mlaKvWrite!(pool, l, seg.blockTable, seg.pos0, seg.queries, v('lat', seg.queries * W, row0 * W));
      row0 += seg.queries;
    }

    // absorbed query [n][H][q_abs (R) | q_pe (P)]
    const qm = hs.qm;
    const qn = hs.qn;
    const qabs = hs.qabs;
    for (let h = 0; h < H; h++) {
      for (let r = 0; r < n; r++) qn.set(q.subarray((r * H + h) * kDim, (r * H + h) * kDim + N), r * N);
      b.write(t.qn, qn.subarray(0, n * N));
      b.matmul(v('qabs', n * R), v('qn', n * N), w.wkB[h], n);
      b.read(v('qabs', n * R), qabs.subarray(0, n * R));
      for (let r = 0; r < n; r++) {
        qm.set(qabs.subarray(r * R, (r + 1) * R), (r * H + h) * W);
        qm.set(qpe.subarray((r * H + h) * P, (r * H + h + 1) * P), (r * H + h) * W + R);
      }
    }
    b.write(t.qm, qm.subarray(0, n * H * W));
    b.mlaAttention!(v('olat', n * H * R), v('qm', n * H * W), pool, l, H, R, cfg.kqScale, segments);

    // per head: v_h = W_UV_h · o_lat_h, then o·Woᵀ
    const olat = b.read(v('olat', n * H * R), hs.olat.subarray(0, n * H * R));
    const lh = hs.lh;
    const vh = hs.vh;
    const attnV = hs.attnV;
    const V = c.vHeadDim;
    for (let h = 0; h < H; h++) {
      for (let r = 0; r < n; r++) lh.set(olat.subarray((r * H + h) * R, (r * H + h + 1) * R), r * R);
      b.write(t.lh, lh.subarray(0, n * R));
      b.matmul(v('vh', n * V), v('lh', n * R), w.wvB[h], n);
      b.read(v('vh', n * V), vh.subarray(0, n * V));
      for (let r = 0; r < n; r++) attnV.set(vh.subarray(r * V, (r + 1) * V), (r * H + h) * V);
    }
    b.write(t.attnV, attnV.subarray(0, n * H * V));
    b.matmul(v('proj', n * d), v('attnV', n * H * V), w.wo, n);
  }

  destroy(): void {
    for (const h of Object.values(this.t)) this.backend.free(h);
    this.ffnBlock.destroy();
  }
}
