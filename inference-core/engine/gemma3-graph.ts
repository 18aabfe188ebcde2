/**
 * The Gemma 3 forward pass (`gemma3`), as llama.cpp's src/models/gemma3.cpp
 * computes it, over the native Backend's ops:
 *
 *   x = embed(tokens) · √dim                                   [n][dim]
 *   per layer l (sliding when swaLayers[l]):
 *     h = rmsNorm(x)·attn_norm
 *     q,k,v = h·Wqᵀ, h·Wkᵀ, h·Wvᵀ
 *     q = rmsNorm(q per head)·q_norm;  k = rmsNorm(k per head)·k_norm
 *     rope(q), rope(k)  NEOX; sliding: freq_base_swa, no scaling; global: freq_base + rope scaling
 *     q ·= attentionScale                                       (ggml_scale before the kq product)
 *     kvWrite(k, v); a = windowAttention(q, scale 1, window = sliding ? n_swa : 0)
 *     a = rmsNorm(a·Woᵀ)·attn_post_norm;  s = a + x
 *     h = rmsNorm(s)·ffn_norm
 *     f = rmsNorm((gelu(h·Wgateᵀ) ⊙ h·Wupᵀ)·Wdownᵀ)·ffn_post_norm  (GELU via ggml's f16 table)
 *     x = f + s
 *   logits = rmsNorm(x[row])·output_norm · Woutᵀ,  then c·tanh(logits/c) when final_logit_softcapping c > 0
 *
 * KV: every layer keeps K/V of every position in the engine's one paged pool
 * (the same page layout as llama: page[layer][K|V][kvHead][64][headDim]); a
 * sliding layer only reads the last n_swa keys of it. What a continuation
 * from position p needs is therefore the global layers' K/V of [0, p) and the
 * sliding layers' K/V of [p − n_swa, p) — see unit-state.ts.
 */
import type { AttentionSegment, Backend, KvPoolHandle, RopeScaling, TensorHandle, WeightHandle } from '../../native/index.ts';
import type { Gemma3Config } from '../gemma3-config.ts';
import { EngineError, forwardRows } from './engine-errors.ts';
import { graphDims, type GraphDims } from './llama-graph.ts';
import { allocScratch, firstRows, type RowWidths } from './graph-scratch.ts';
import { layerWindow, neoxWindowPattern, projectQkv, rowLogits, segmentRowOffsets, writeSegmentKv, type RowSegment, type WindowPattern } from './graph-rows.ts';

export interface Gemma3GraphConfig extends GraphDims, WindowPattern {
  architecture: 'gemma3';
  attentionScale: number;
  embedScale: number;
  finalLogitSoftcap: number;
}

export interface Gemma3LayerWeights {
  attnNorm: WeightHandle;
  wq: WeightHandle;
  wk: WeightHandle;
  wv: WeightHandle;
  qNorm: WeightHandle;
  kNorm: WeightHandle;
  wo: WeightHandle;
  attnPostNorm: WeightHandle;
  ffnNorm: WeightHandle;
  wGate: WeightHandle;
  wUp: WeightHandle;
  wDown: WeightHandle;
  ffnPostNorm: WeightHandle;
}

export interface Gemma3Weights {
  tokenEmbd: WeightHandle;
  layers: Gemma3LayerWeights[];
  outputNorm: WeightHandle;
  output: WeightHandle;
}

export function gemma3GraphConfig(c: Gemma3Config, globalScaling: RopeScaling | undefined): Gemma3GraphConfig {
  const swaScaling: RopeScaling | undefined = globalScaling ? { ...globalScaling, freqScale: 1 } : undefined;
  return {
    architecture: 'gemma3',
    ...graphDims(c),
    ...neoxWindowPattern(c, { rotDims: c.ropeDims, scaling: globalScaling }, { rotDims: c.ropeDimsSwa, scaling: swaScaling && !isPlain(swaScaling) ? swaScaling : undefined }),
    attentionScale: c.attentionScale,
    embedScale: Math.fround(Math.sqrt(c.dModel)),
    finalLogitSoftcap: c.finalLogitSoftcap,
  };
}

function isPlain(s: RopeScaling): boolean {
  return s.freqScale === 1 && s.extFactor === 0 && s.attnFactor === 1;
}

type Ops = Required<Pick<Backend, 'windowAttention' | 'geglu' | 'scale'>>;

export class Gemma3Graph {
  private readonly b: Backend & Ops;
  private readonly rowWidths: RowWidths<'x' | 'h' | 'q' | 'k' | 'v' | 'attn' | 'proj' | 'gate' | 'up'>;
  private readonly s: Record<'x' | 'h' | 'q' | 'k' | 'v' | 'attn' | 'proj' | 'gate' | 'up' | 'normLast' | 'logits', TensorHandle>;
  private readonly qDim: number;
  private readonly kvDim: number;

  constructor(
    backend: Backend,
    readonly config: Gemma3GraphConfig,
    private readonly weights: Gemma3Weights,
    readonly maxRows: number,
    readonly maxLogitRows: number,
  ) {
    if (!backend.windowAttention || !backend.geglu || !backend.scale) {
      throw new EngineError('KVT_ERR_ENGINE_UNSUPPORTED_MODEL', `the ${backend.name} backend has no sliding-window attention / geglu ops for gemma3; run it on the cpu backend (KVTIER_DEVICE=cpu)`);
    }
    this.b = backend as Backend & Ops;
    const c = config;
    this.qDim = c.heads * c.headDim;
    this.kvDim = c.kvHeads * c.headDim;
    this.rowWidths = { x: c.dim, h: c.dim, q: this.qDim, k: this.kvDim, v: this.kvDim, attn: this.qDim, proj: c.dim, gate: c.ffDim, up: c.ffDim };
    this.s = allocScratch(backend, this.rowWidths, maxRows, { normLast: c.dim, logits: c.vocabSize }, maxLogitRows);
  }

  forward(pool: KvPoolHandle, tokens: Int32Array, positions: Int32Array, segments: RowSegment[], logitRows: Int32Array): Float32Array {
    const b = this.b;
    const c = this.config;
    const s = this.s;
    const n = forwardRows(this, tokens, positions, logitRows);
    const { x, h, q, k, v: vv, attn, proj, gate, up } = firstRows(b, s, this.rowWidths, n);
    const segRow0 = segmentRowOffsets(segments, n);
    const attnSegments: AttentionSegment[] = segments;

    b.embed(x, this.weights.tokenEmbd, tokens);
    b.scale(x, x, c.embedScale, n * c.dim);
    for (let l = 0; l < c.layers; l++) {
      const w = this.weights.layers[l];
      const { rope, window } = layerWindow(c, l);
      b.rmsNorm(h, x, w.attnNorm, n, c.dim, c.rmsEps);
      projectQkv(b, h, w, n, q, k, vv);
      b.rmsNorm(q, q, w.qNorm, n * c.heads, c.headDim, c.rmsEps);
      b.rope(q, positions, n, c.heads, c.headDim, rope);
      b.rmsNorm(k, k, w.kNorm, n * c.kvHeads, c.headDim, c.rmsEps);
      b.rope(k, positions, n, c.kvHeads, c.headDim, rope);
      b.scale(q, q, c.attentionScale, n * this.qDim);
      writeSegmentKv(b, pool, l, segments, segRow0, this.kvDim, s.k, s.v);
      b.windowAttention(attn, q, pool, l, c.heads, 1, window, attnSegments);
      b.matmul(proj, attn, w.wo, n);
      b.rmsNorm(proj, proj, w.attnPostNorm, n, c.dim, c.rmsEps);
      b.add(x, x, proj, n * c.dim); // x is now sa_out
      b.rmsNorm(h, x, w.ffnNorm, n, c.dim, c.rmsEps);
      b.matmul(gate, h, w.wGate, n);
      b.matmul(up, h, w.wUp, n);
      b.geglu(gate, gate, up, n * c.ffDim);
      b.matmul(proj, gate, w.wDown, n);
      b.rmsNorm(proj, proj, w.ffnPostNorm, n, c.dim, c.rmsEps);
      b.add(x, x, proj, n * c.dim);
    }

    const out = rowLogits(b, s, this.weights, c, n, logitRows);
    const cap = c.finalLogitSoftcap;
    if (cap > 0) {
      // ggml_scale(1/cap), ggml_tanh, ggml_scale(cap), each in f32
      const inv = Math.fround(1 / cap);
      for (let i = 0; i < out.length; i++) out[i] = Math.fround(Math.fround(Math.tanh(Math.fround(out[i] * inv))) * cap);
    }
    return out;
  }

  destroy(): void {
    for (const t of Object.values(this.s)) this.b.free(t);
  }
}
