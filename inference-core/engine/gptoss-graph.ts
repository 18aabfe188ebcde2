/**
 * The gpt-oss forward pass (`gpt-oss`), as llama.cpp's
 * src/models/openai-moe.cpp computes it, over the native Backend's ops:
 *
 *   x = embed(tokens)                                          [n][dim]
 *   per layer l (sliding when swaLayers[l]):
 *     h = rmsNorm(x)·attn_norm
 *     q,k,v = h·Wqᵀ + bq, h·Wkᵀ + bk, h·Wvᵀ + bv
 *     rope(q), rope(k)  NEOX, YaRN scaling on every layer
 *     kvWrite(k, v); a = windowAttention(q, 1/√headDim, window = sliding ? n_swa : 0, sinks[l])
 *     x = x + a·Woᵀ + bo
 *     x = x + moe(rmsNorm(x)·post_attention_norm)                gptoss-moe.ts
 *   logits = rmsNorm(x[row])·output_norm · Woutᵀ
 *
 * KV: as gemma3, every layer keeps K/V of every position in the one paged
 * pool; a sliding layer reads only the last n_swa keys. A continuation from p
 * needs the full layers' K/V of [0, p) and the sliding layers' of
 * [p − n_swa, p) (unit-state.ts).
 */
import type { AttentionSegment, Backend, KvPoolHandle, RopeScaling, TensorHandle, WeightHandle } from '../../native/index.ts';
import type { GptOssConfig } from '../gptoss-config.ts';
import { EngineError, forwardRows } from './engine-errors.ts';
import { graphDims, type GraphDims } from './llama-graph.ts';
import { allocScratch, firstRows, type RowWidths } from './graph-scratch.ts';
import { addTiledBias, layerWindow, neoxWindowPattern, projectQkv, rowLogits, segmentRowOffsets, writeSegmentKv, type RowSegment, type WindowPattern } from './graph-rows.ts';
import { GptOssMoe, type GptOssMoeWeights } from './gptoss-moe.ts';

export interface GptOssGraphConfig extends GraphDims, WindowPattern {
  architecture: 'gpt-oss';
  attentionScale: number;
  expertCount: number;
  expertUsed: number;
  expertFfnDim: number;
  swigluAlpha: number;
  swigluLimit: number;
}

export interface GptOssLayerWeights {
  attnNorm: WeightHandle;
  wq: WeightHandle;
  wk: WeightHandle;
  wv: WeightHandle;
  /** Biases tiled BIAS_TILE_ROWS times (the backend has no broadcast add). */
  bq: TensorHandle;
  bk: TensorHandle;
  bv: TensorHandle;
  wo: WeightHandle;
  bo: TensorHandle;
  /** [heads] f32 */
  sinks: Float32Array;
  postNorm: WeightHandle;
  moe: GptOssMoeWeights;
}

export interface GptOssWeights {
  tokenEmbd: WeightHandle;
  layers: GptOssLayerWeights[];
  outputNorm: WeightHandle;
  output: WeightHandle;
}

export function gptOssGraphConfig(c: GptOssConfig, scaling: RopeScaling | undefined): GptOssGraphConfig {
  const rope = { rotDims: c.ropeDims, scaling };
  return {
    architecture: 'gpt-oss',
    ...graphDims(c),
    ffDim: c.expertFfnDim,
    ...neoxWindowPattern(c, rope, rope),
    attentionScale: Math.fround(1 / Math.fround(Math.sqrt(c.ropeDims))),
    expertCount: c.expertCount,
    expertUsed: c.expertUsed,
    expertFfnDim: c.expertFfnDim,
    swigluAlpha: c.swigluAlpha,
    swigluLimit: c.swigluLimit,
  };
}

export class GptOssGraph {
  private readonly b: Backend & Required<Pick<Backend, 'windowAttention'>>;
  private readonly rowWidths: RowWidths<'x' | 'h' | 'q' | 'k' | 'v' | 'attn' | 'proj'>;
  private readonly s: Record<'x' | 'h' | 'q' | 'k' | 'v' | 'attn' | 'proj' | 'normLast' | 'logits', TensorHandle>;
  private readonly moe: GptOssMoe;
  private readonly qDim: number;
  private readonly kvDim: number;

  constructor(
    backend: Backend,
    readonly config: GptOssGraphConfig,
    private readonly weights: GptOssWeights,
    readonly maxRows: number,
    readonly maxLogitRows: number,
  ) {
    if (!backend.windowAttention) {
      throw new EngineError('KVT_ERR_ENGINE_UNSUPPORTED_MODEL', `the ${backend.name} backend has no sliding-window attention with sinks for gpt-oss; run it on the cpu backend (KVTIER_DEVICE=cpu)`);
    }
    this.b = backend as Backend & Required<Pick<Backend, 'windowAttention'>>;
    const c = config;
    this.qDim = c.heads * c.headDim;
    this.kvDim = c.kvHeads * c.headDim;
    this.rowWidths = { x: c.dim, h: c.dim, q: this.qDim, k: this.kvDim, v: this.kvDim, attn: this.qDim, proj: c.dim };
    this.s = allocScratch(backend, this.rowWidths, maxRows, { normLast: c.dim, logits: c.vocabSize }, maxLogitRows);
    this.moe = new GptOssMoe(backend, c, maxRows);
  }

  forward(pool: KvPoolHandle, tokens: Int32Array, positions: Int32Array, segments: RowSegment[], logitRows: Int32Array): Float32Array {
    const b = this.b;
    const c = this.config;
    const s = this.s;
    const n = forwardRows(this, tokens, positions, logitRows);
    const { x, h, q, k, v: vv, attn, proj } = firstRows(b, s, this.rowWidths, n);
    const segRow0 = segmentRowOffsets(segments, n);
    const attnSegments: AttentionSegment[] = segments;

    b.embed(x, this.weights.tokenEmbd, tokens);
    for (let l = 0; l < c.layers; l++) {
      const w = this.weights.layers[l];
      const { rope, window } = layerWindow(c, l);
      b.rmsNorm(h, x, w.attnNorm, n, c.dim, c.rmsEps);
      projectQkv(b, h, w, n, q, k, vv);
      addTiledBias(b, q, w.bq, n, this.qDim);
      addTiledBias(b, k, w.bk, n, this.kvDim);
      addTiledBias(b, vv, w.bv, n, this.kvDim);
      b.rope(q, positions, n, c.heads, c.headDim, rope);
      b.rope(k, positions, n, c.kvHeads, c.headDim, rope);
      writeSegmentKv(b, pool, l, segments, segRow0, this.kvDim, s.k, s.v);
      b.windowAttention(attn, q, pool, l, c.heads, c.attentionScale, window, attnSegments, w.sinks);
      b.matmul(proj, attn, w.wo, n);
      addTiledBias(b, proj, w.bo, n, c.dim);
      b.add(x, x, proj, n * c.dim); // ffn_inp
      b.rmsNorm(h, x, w.postNorm, n, c.dim, c.rmsEps);
      this.moe.forward(proj, h, w.moe, n);
      b.add(x, x, proj, n * c.dim);
    }
    return rowLogits(b, s, this.weights, c, n, logitRows);
  }

  destroy(): void {
    for (const t of Object.values(this.s)) this.b.free(t);
    this.moe.destroy();
  }
}
