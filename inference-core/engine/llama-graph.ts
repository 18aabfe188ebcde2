/**
 * The llama-family forward pass (architectures `llama` — Llama 2/3/3.1+,
 * Mistral —, `qwen2` — QKV bias, NeoX rope — and `qwen3` — per-head q/k
 * RMSNorm, NeoX rope) over the native Backend's ops.
 *
 * One call runs a set of rows (tokens) through every layer:
 *
 *   x = embed(tokens)                                         [n][dim]
 *   per layer:
 *     h = rmsNorm(x)·attn_norm
 *     q,k,v = h·Wqᵀ (+bq), h·Wkᵀ (+bk), h·Wvᵀ (+bv)            batched GEMMs over all n rows
 *     q,k = rmsNorm(q)·q_norm, rmsNorm(k)·k_norm per head      qwen3 only
 *     rope(q), rope(k) at each row's position                  (+ frequency factors, linear/YaRN scaling)
 *     kvWrite(k, v) into each sequence's pages
 *     a = paged causal GQA attention(q) per segment
 *     x += a·Woᵀ
 *     h = rmsNorm(x)·ffn_norm
 *     x += (silu(h·Wgateᵀ) ⊙ h·Wupᵀ)·Wdownᵀ
 *   logits = rmsNorm(x[row])·output_norm · Woutᵀ   only for the rows asked for
 *
 * Rows are grouped into segments (one per sequence: a prefill chunk is one
 * segment of many rows, a batched decode step is one segment of one row per
 * sequence), so a decode batch is one GEMM over all sequences' rows.
 *
 * Scratch activations are allocated once for `maxRows` rows and reused by
 * every call; the graph holds no per-call allocations besides small host
 * metadata and the returned logits.
 */
import type { Backend, KvPoolHandle, RopeMode, RopeOptions, RopeScaling, TensorHandle, WeightHandle } from '../../native/index.ts';
import type { TransformerDims } from '../model-config.ts';
import { checkForwardRows, EngineError } from './engine-errors.ts';
import { addTiledBias, projectQkv, segmentRowOffsets, writeSegmentKv, type RowSegment } from './graph-rows.ts';

export type LlamaArchitecture = 'llama' | 'qwen2' | 'qwen3';

/** The hyper-parameters every graph's config shares (llama family, gemma3, lfm2). */
export interface GraphDims {
  vocabSize: number;
  dim: number;
  layers: number;
  heads: number;
  kvHeads: number;
  headDim: number;
  ffDim: number;
  rmsEps: number;
}

/** A model config's dimensions as a graph names them. */
export function graphDims(c: TransformerDims): GraphDims {
  return {
    vocabSize: c.vocabSize,
    dim: c.dModel,
    layers: c.nLayers,
    heads: c.nHeads,
    kvHeads: c.nKvHeads,
    headDim: c.headDim,
    ffDim: c.ffnDim,
    rmsEps: c.rmsEps,
  };
}

/** What the graph needs to know about the model (derived from the GGUF's config). */
export interface GraphConfig extends GraphDims {
  architecture: LlamaArchitecture;
  ropeFreqBase: number;
  ropeMode: RopeMode;
  ropeDims: number;
  /** qwen3: RMSNorm of each q and k head (LayerWeights.qNorm/kNorm) before rope. */
  qkNorm?: boolean;
  /** Linear / YaRN scaling (absent: none). */
  ropeScaling?: RopeScaling;
}

export interface LayerWeights {
  attnNorm: WeightHandle;
  wq: WeightHandle;
  wk: WeightHandle;
  wv: WeightHandle;
  /** qwen2: biases tiled BIAS_TILE_ROWS times, so one add covers a tile of rows. */
  bq?: TensorHandle;
  bk?: TensorHandle;
  bv?: TensorHandle;
  /** qwen3: per-head norm gains, f32 [1][headDim]. */
  qNorm?: WeightHandle;
  kNorm?: WeightHandle;
  wo: WeightHandle;
  ffnNorm: WeightHandle;
  wGate: WeightHandle;
  wUp: WeightHandle;
  wDown: WeightHandle;
}

export interface ModelWeights {
  tokenEmbd: WeightHandle;
  layers: LayerWeights[];
  outputNorm: WeightHandle;
  /** The LM head; the embedding table itself when the model ties them. */
  output: WeightHandle;
  /** Llama 3.1+ rope_freqs: [ropeDims/2] theta divisors (host; every layer shares them). */
  ropeFreqs?: Float32Array;
}

interface Scratch {
  rows: number;
  x: TensorHandle;
  h: TensorHandle;
  q: TensorHandle;
  k: TensorHandle;
  v: TensorHandle;
  attn: TensorHandle;
  proj: TensorHandle;
  gate: TensorHandle;
  up: TensorHandle;
  normLast: TensorHandle;
  logits: TensorHandle;
}

export class LlamaGraph {
  private readonly scratch: Scratch;
  private readonly scale: number;
  private readonly qDim: number;
  private readonly kvDim: number;

  constructor(
    private readonly backend: Backend,
    readonly config: GraphConfig,
    private readonly weights: ModelWeights,
    /** Largest number of rows one forward call may carry (prefill chunk, decode batch). */
    readonly maxRows: number,
    /** Largest number of rows whose logits one call may return. */
    readonly maxLogitRows: number,
  ) {
    const c = config;
    this.qDim = c.heads * c.headDim;
    this.kvDim = c.kvHeads * c.headDim;
    this.scale = 1 / Math.sqrt(c.headDim);
    const b = backend;
    this.scratch = {
      rows: maxRows,
      x: b.alloc(maxRows * c.dim),
      h: b.alloc(maxRows * c.dim),
      q: b.alloc(maxRows * this.qDim),
      k: b.alloc(maxRows * this.kvDim),
      v: b.alloc(maxRows * this.kvDim),
      attn: b.alloc(maxRows * this.qDim),
      proj: b.alloc(maxRows * c.dim),
      gate: b.alloc(maxRows * c.ffDim),
      up: b.alloc(maxRows * c.ffDim),
      normLast: b.alloc(maxLogitRows * c.dim),
      logits: b.alloc(maxLogitRows * c.vocabSize),
    };
  }

  /**
   * Runs `tokens` (rows in segment order) through the model, writing their K/V
   * into the pages of `pool`, and returns logits for `logitRows` (row indices,
   * ascending) as one Float32Array [logitRows.length][vocab].
   */
  forward(
    pool: KvPoolHandle,
    tokens: Int32Array,
    positions: Int32Array,
    segments: RowSegment[],
    logitRows: Int32Array,
  ): Float32Array {
    const b = this.backend;
    const c = this.config;
    const s = this.scratch;
    const n = tokens.length;
    checkForwardRows(n, positions.length, s.rows, logitRows.length, this.maxLogitRows);
    const v = (t: TensorHandle, rows: number, width: number) => b.view(t, 0, rows * width);
    const x = v(s.x, n, c.dim);
    const h = v(s.h, n, c.dim);
    const q = v(s.q, n, this.qDim);
    const k = v(s.k, n, this.kvDim);
    const vv = v(s.v, n, this.kvDim);
    const attn = v(s.attn, n, this.qDim);
    const proj = v(s.proj, n, c.dim);
    const gate = v(s.gate, n, c.ffDim);
    const up = v(s.up, n, c.ffDim);
    const rope: RopeOptions = {
      mode: c.ropeMode,
      freqBase: c.ropeFreqBase,
      rotDims: c.ropeDims,
      ...(this.weights.ropeFreqs ? { freqFactors: this.weights.ropeFreqs } : {}),
      ...(c.ropeScaling ? { scaling: c.ropeScaling } : {}),
    };
    const segRow0 = segmentRowOffsets(segments, n);

    b.embed(x, this.weights.tokenEmbd, tokens);
    for (let l = 0; l < c.layers; l++) {
      const w = this.weights.layers[l];
      b.rmsNorm(h, x, w.attnNorm, n, c.dim, c.rmsEps);
      projectQkv(b, h, w, n, q, k, vv);
      if (w.bq) addTiledBias(b, q, w.bq, n, this.qDim);
      if (w.bk) addTiledBias(b, k, w.bk, n, this.kvDim);
      if (w.bv) addTiledBias(b, vv, w.bv, n, this.kvDim);
      if (w.qNorm) b.rmsNorm(q, q, w.qNorm, n * c.heads, c.headDim, c.rmsEps);
      if (w.kNorm) b.rmsNorm(k, k, w.kNorm, n * c.kvHeads, c.headDim, c.rmsEps);
      b.rope(q, positions, n, c.heads, c.headDim, rope);
      b.rope(k, positions, n, c.kvHeads, c.headDim, rope);
      writeSegmentKv(b, pool, l, segments, segRow0, this.kvDim, s.k, s.v);
      b.attention(attn, q, pool, l, c.heads, this.scale, segments);
      b.matmul(proj, attn, w.wo, n);
      b.add(x, x, proj, n * c.dim);
      b.rmsNorm(h, x, w.ffnNorm, n, c.dim, c.rmsEps);
      b.matmul(gate, h, w.wGate, n);
      b.matmul(up, h, w.wUp, n);
      b.swiglu(gate, gate, up, n * c.ffDim);
      b.matmul(proj, gate, w.wDown, n);
      b.add(x, x, proj, n * c.dim);
    }

    const m = logitRows.length;
    if (m === 0) return new Float32Array(0);
    const normed = b.view(s.normLast, 0, m * c.dim);
    const logits = b.view(s.logits, 0, m * c.vocabSize);
    if (isRange(logitRows, n)) {
      const first = logitRows[0];
      b.rmsNorm(normed, b.view(s.x, first * c.dim, m * c.dim), this.weights.outputNorm, m, c.dim, c.rmsEps);
    } else {
      for (let i = 0; i < m; i++) {
        const r = logitRows[i];
        if (r < 0 || r >= n) throw new EngineError('KVT_ERR_ENGINE_BAD_ARGUMENT', `logit row ${r} outside 0..${n - 1}`);
        b.rmsNorm(b.view(s.normLast, i * c.dim, c.dim), b.view(s.x, r * c.dim, c.dim), this.weights.outputNorm, 1, c.dim, c.rmsEps);
      }
    }
    b.matmul(logits, normed, this.weights.output, m);
    return b.read(logits);
  }

  /** Frees the scratch activations (weights and pool belong to the engine). */
  destroy(): void {
    const s = this.scratch;
    for (const t of [s.x, s.h, s.q, s.k, s.v, s.attn, s.proj, s.gate, s.up, s.normLast, s.logits]) this.backend.free(t);
  }
}

/** True when rows are first, first+1, …, a contiguous ascending run inside [0, n). */
function isRange(rows: Int32Array, n: number): boolean {
  const first = rows[0];
  if (first < 0 || first + rows.length > n) return false;
  for (let i = 1; i < rows.length; i++) if (rows[i] !== first + i) return false;
  return true;
}
