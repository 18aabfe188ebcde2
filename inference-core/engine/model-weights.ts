/**
 * GGUF → GraphConfig and backend weight handles for the llama family.
 *
 * Tensor names are llama.cpp's: token_embd, blk.N.{attn_norm, attn_q, attn_k,
 * attn_v, attn_output, ffn_norm, ffn_gate, ffn_up, ffn_down}, output_norm,
 * output (absent when the LM head is tied to token_embd), for qwen2 the
 * blk.N.attn_{q,k,v}.bias vectors, for qwen3 the per-head norms
 * blk.N.attn_{q,k}_norm, and for Llama 3.1+ rope_freqs (per-pair theta divisors).
 * GGUF dims are ne0-first: a matrix
 * [ne0 = cols][ne1 = rows] is row-major [rows][cols], the layout matmul takes.
 */
import type { Backend, TensorHandle, WeightDType, WeightHandle } from '../../native/index.ts';
import type { GgufFile, GgufTensor } from '../gguf/index.ts';
import { GgmlType, f16ToF32, bf16ToF32, ggmlTypeName } from '../gguf/index.ts';
import { unsupportedModel } from './engine-errors.ts';
import type { ModelConfig } from '../model-config.ts';
import type { GraphConfig, GraphDims, LayerWeights, ModelWeights } from './llama-graph.ts';
import { uploadTiledBias } from './graph-rows.ts';
import { ropeScalingFrom } from './rope-scaling.ts';

/**
 * The graph's hyper-parameters from the model config, after the checks for
 * what the graph does not compute (rope scaling types other than linear and
 * YaRN, frequency factors outside llama, value dims unlike key dims).
 */
export function graphConfigFrom(g: GgufFile, cfg: ModelConfig): GraphConfig {
  const a = cfg.arch;
  const valueDim = g.optU32(`${a}.attention.value_length`) ?? cfg.headDim;
  if (valueDim !== cfg.headDim) unsupportedModel(`${g.path}: value head dim ${valueDim} differs from key head dim ${cfg.headDim}; not supported`);
  // llama.cpp's qwen2/qwen3 graphs pass no frequency factors, and its loader
  // refuses a file with a tensor the graph does not use.
  if (cfg.ropeFreqFactors && a !== 'llama') unsupportedModel(`${g.path}: rope_freqs.weight in a ${a} model; llama.cpp does not load such a file either`);
  const ropeScaling = ropeScalingFrom(cfg.ropeScaling, g.path);
  return {
    architecture: a,
    vocabSize: g.tensor('token_embd.weight').dims[1],
    dim: cfg.dModel,
    layers: cfg.nLayers,
    heads: cfg.nHeads,
    kvHeads: cfg.nKvHeads,
    headDim: cfg.headDim,
    ffDim: cfg.ffnDim,
    rmsEps: cfg.rmsEps,
    ropeFreqBase: cfg.ropeTheta,
    ropeMode: cfg.ropeType,
    ropeDims: cfg.ropeDims,
    qkNorm: cfg.qkNorm,
    ...(ropeScaling ? { ropeScaling } : {}),
  };
}

const WEIGHT_DTYPE: Partial<Record<GgmlType, WeightDType>> = {
  [GgmlType.F32]: 'f32',
  [GgmlType.F16]: 'f16',
  [GgmlType.BF16]: 'bf16',
  [GgmlType.Q8_0]: 'q8_0',
  [GgmlType.Q2_K]: 'q2_k',
  [GgmlType.Q3_K]: 'q3_k',
  [GgmlType.Q4_K]: 'q4_k',
  [GgmlType.Q5_K]: 'q5_k',
  [GgmlType.Q6_K]: 'q6_k',
  [GgmlType.Q4_0]: 'q4_0',
  [GgmlType.Q4_1]: 'q4_1',
  [GgmlType.Q5_0]: 'q5_0',
  [GgmlType.Q5_1]: 'q5_1',
  [GgmlType.IQ4_NL]: 'iq4_nl',
  [GgmlType.IQ4_XS]: 'iq4_xs',
};

/** The backend weight dtype a GGUF tensor type is computed as, or undefined when the engine has no kernel for it. */
export function engineWeightDType(type: GgmlType): WeightDType | undefined {
  return WEIGHT_DTYPE[type];
}

/** Uploads GGUF matrix `t` ([cols, rows], dims already checked) in its own type; refuses a type the engine has no kernel for. */
export function uploadEngineMatrix(backend: Backend, t: GgufTensor, cols: number, rows: number): WeightHandle {
  const dtype = engineWeightDType(t.type);
  if (!dtype) unsupportedModel(`tensor ${t.name} has GGML type ${ggmlTypeName(t.type)}, which the engine does not compute`);
  return backend.uploadWeight(dtype, rows, cols, t.data);
}

/** Block `p`'s q, k and v projections (llama.cpp's names), uploaded in this order through the loader's matrix. */
export function qkvProjections(
  p: string,
  c: GraphDims,
  matrix: (name: string, cols: number, rows: number) => WeightHandle,
): { wq: WeightHandle; wk: WeightHandle; wv: WeightHandle } {
  const qDim = c.heads * c.headDim;
  const kvDim = c.kvHeads * c.headDim;
  return {
    wq: matrix(p + 'attn_q.weight', c.dim, qDim),
    wk: matrix(p + 'attn_k.weight', c.dim, kvDim),
    wv: matrix(p + 'attn_v.weight', c.dim, kvDim),
  };
}

/** Block `p`'s attention projections with per-head q/k norms (gemma3, lfm2), uploaded in this order through the loader's matrix/gain. */
export function qkNormAttentionWeights(
  p: string,
  c: GraphDims,
  matrix: (name: string, cols: number, rows: number) => WeightHandle,
  gain: (name: string, n: number) => WeightHandle,
): { wq: WeightHandle; wk: WeightHandle; wv: WeightHandle; qNorm: WeightHandle; kNorm: WeightHandle; wo: WeightHandle } {
  const qDim = c.heads * c.headDim;
  return {
    ...qkvProjections(p, c, matrix),
    qNorm: gain(p + 'attn_q_norm.weight', c.headDim),
    kNorm: gain(p + 'attn_k_norm.weight', c.headDim),
    wo: matrix(p + 'attn_output.weight', qDim, c.dim),
  };
}

function expectDims(t: GgufTensor, dims: number[]): void {
  if (t.dims.length !== dims.length || t.dims.some((d, i) => d !== dims[i])) {
    unsupportedModel(`tensor ${t.name} has dims [${t.dims}] but the config implies [${dims}]; the GGUF is inconsistent`);
  }
}

/** A 1-D tensor as f32 values (norm gains and biases are usually f32 already). */
function vectorF32(t: GgufTensor): Float32Array {
  const n = t.elements;
  if (t.type === GgmlType.F32) {
    return new Float32Array(t.data.buffer, t.data.byteOffset, n).slice();
  }
  if (t.type === GgmlType.F16) return f16ToF32(new Uint16Array(t.data.buffer.slice(t.data.byteOffset, t.data.byteOffset + n * 2)));
  if (t.type === GgmlType.BF16) return bf16ToF32(new Uint16Array(t.data.buffer.slice(t.data.byteOffset, t.data.byteOffset + n * 2)));
  return unsupportedModel(`vector tensor ${t.name} has type ${t.type}; expected f32, f16 or bf16`);
}

export interface UploadedWeights {
  weights: ModelWeights;
  /** Bias tensors (to free with the engine). */
  tensors: TensorHandle[];
}

/** Uploads every tensor the graph uses; the GGUF file may be closed afterwards. */
export function uploadModelWeights(backend: Backend, g: GgufFile, c: GraphConfig): UploadedWeights {
  const qDim = c.heads * c.headDim;
  const kvDim = c.kvHeads * c.headDim;
  const tensors: TensorHandle[] = [];
  const matrix = (name: string, cols: number, rows: number): WeightHandle => {
    const t = g.tensor(name);
    expectDims(t, [cols, rows]);
    const dtype = engineWeightDType(t.type);
    if (!dtype) unsupportedModel(`tensor ${name} has GGML type ${ggmlTypeName(t.type)}; the engine computes ${Object.values(WEIGHT_DTYPE).join(', ')} weights`);
    return backend.uploadWeight(dtype, rows, cols, t.data);
  };
  const gain = (name: string, n: number): WeightHandle => {
    const t = g.tensor(name);
    expectDims(t, [n]);
    const v = vectorF32(t);
    return backend.uploadWeight('f32', 1, n, new Uint8Array(v.buffer, v.byteOffset, v.byteLength));
  };
  const bias = (name: string, n: number): TensorHandle | undefined => {
    const t = g.tensors.get(name);
    if (!t) return undefined;
    expectDims(t, [n]);
    const h = uploadTiledBias(backend, vectorF32(t));
    tensors.push(h);
    return h;
  };

  const tokenEmbd = matrix('token_embd.weight', c.dim, c.vocabSize);
  const layers: LayerWeights[] = [];
  for (let l = 0; l < c.layers; l++) {
    const p = `blk.${l}.`;
    layers.push({
      attnNorm: gain(p + 'attn_norm.weight', c.dim),
      ...qkvProjections(p, c, matrix),
      bq: bias(p + 'attn_q.bias', qDim),
      bk: bias(p + 'attn_k.bias', kvDim),
      bv: bias(p + 'attn_v.bias', kvDim),
      ...(c.qkNorm ? { qNorm: gain(p + 'attn_q_norm.weight', c.headDim), kNorm: gain(p + 'attn_k_norm.weight', c.headDim) } : {}),
      wo: matrix(p + 'attn_output.weight', qDim, c.dim),
      ffnNorm: gain(p + 'ffn_norm.weight', c.dim),
      wGate: matrix(p + 'ffn_gate.weight', c.dim, c.ffDim),
      wUp: matrix(p + 'ffn_up.weight', c.dim, c.ffDim),
      wDown: matrix(p + 'ffn_down.weight', c.ffDim, c.dim),
    });
  }
  const outputNorm = gain('output_norm.weight', c.dim);
  const output = g.tensors.has('output.weight') ? matrix('output.weight', c.dim, c.vocabSize) : tokenEmbd;
  const ropeFreqs = g.tensors.get('rope_freqs.weight');
  if (ropeFreqs) expectDims(ropeFreqs, [c.ropeDims / 2]);
  return { weights: { tokenEmbd, layers, outputNorm, output, ...(ropeFreqs ? { ropeFreqs: vectorF32(ropeFreqs) } : {}) }, tensors };
}
