/**
 * Model hyper-parameters and tensor names from GGUF metadata, with
 * llama.cpp's semantics: `<arch>.*` keys, head_dim = n_embd / n_head unless
 * `<arch>.attention.key_length` says otherwise, rope "normal" (adjacent
 * pairs) for llama and "neox" (halves) for qwen2 / qwen3, an absent
 * output.weight meaning the head is tied to token_embd.
 *
 * Rope scaling as llama.cpp's loader reads it: `rope.scaling.type` (default
 * "linear"), `rope.scaling.factor` (or the old `rope.scale_linear`; absent or
 * 0 = no scaling), `rope.scaling.original_context_length` (default
 * context_length), `rope.scaling.attn_factor` (default 1). Llama 3.1+ files
 * carry no scaling keys: their scaling is the `rope_freqs.weight` tensor.
 *
 * `<arch>.attention.sliding_window` is recorded but not applied: llama.cpp
 * (node-llama-cpp 3.21.1) reads it only for architectures built with SWA
 * (gemma2/3, cohere2, phi3, ...), never for llama, qwen2 or qwen3, so a
 * Mistral-style llama file runs with full causal attention there too.
 */
import { GgufError, type GgufFile, type GgufTensor } from './gguf/index.ts';

export type ModelArch = 'llama' | 'qwen2' | 'qwen3';

/** Rope scaling metadata, as written (see the file comment for defaults). */
export interface RopeScalingConfig {
  /** 'none' | 'linear' | 'yarn' are computed; anything else (e.g. 'longrope') is refused by the engine. */
  type: string;
  /** The context-extension factor; 1 when absent or 0. */
  factor: number;
  /** YaRN's original training context. */
  originalContext: number;
  /** Extra cos/sin magnitude factor (llama.cpp applies it for every type). */
  attnFactor: number;
}

/** `<arch>.rope.scaling.*` as llama.cpp's loader reads them (defaults in the file comment). */
export function readRopeScaling(g: GgufFile, a: string, ctxLen: number): RopeScalingConfig {
  const factor = g.optF32(`${a}.rope.scaling.factor`) ?? g.optF32(`${a}.rope.scale_linear`) ?? 0;
  return {
    type: g.optString(`${a}.rope.scaling.type`) ?? 'linear',
    factor: factor === 0 ? 1 : factor,
    originalContext: g.optU32(`${a}.rope.scaling.original_context_length`) ?? ctxLen,
    attnFactor: g.optF32(`${a}.rope.scaling.attn_factor`) ?? 1,
  };
}

/** The transformer dimensions every architecture's config (and synthetic spec) shares: llama family, gemma3, lfm2. */
export interface TransformerDims {
  nLayers: number;
  dModel: number;
  nHeads: number;
  nKvHeads: number;
  headDim: number;
  ffnDim: number;
  vocabSize: number;
  ctxLen: number;
  ropeTheta: number;
  rmsEps: number;
}

export type HeadDims = Pick<TransformerDims, 'dModel' | 'nHeads' | 'nKvHeads' | 'headDim'>;

/**
 * The attention widths as every architecture's loader reads them: head_count_kv defaults to
 * head_count and key_length to embedding_length / head_count (a fraction the caller refuses, with
 * its own message, as the checks differ by architecture).
 */
export function readHeadDims(g: GgufFile, a: string): HeadDims {
  const dModel = g.getU32(`${a}.embedding_length`);
  const nHeads = g.getU32(`${a}.attention.head_count`);
  return { dModel, nHeads, nKvHeads: g.optU32(`${a}.attention.head_count_kv`) ?? nHeads, headDim: g.optU32(`${a}.attention.key_length`) ?? dModel / nHeads };
}

export interface ModelConfig extends TransformerDims {
  arch: ModelArch;
  ropeType: 'normal' | 'neox';
  ropeDims: number;
  qkvBias: boolean;
  tiedEmbeddings: boolean;
  /** qwen3: per-head RMSNorm of q and k (blk.N.attn_{q,k}_norm.weight, [headDim]) before rope. */
  qkNorm: boolean;
  ropeScaling: RopeScalingConfig;
  /** Llama 3.1+: rope_freqs.weight, [ropeDims/2] theta divisors. */
  ropeFreqFactors: boolean;
  /** `<arch>.attention.sliding_window` if the file declares one (not applied, as in llama.cpp). */
  slidingWindow: number | null;
}

export interface LayerTensorNames {
  attnNorm: string;
  q: string;
  k: string;
  v: string;
  qBias?: string;
  kBias?: string;
  vBias?: string;
  qNorm?: string;
  kNorm?: string;
  attnOutput: string;
  ffnNorm: string;
  ffnGate: string;
  ffnUp: string;
  ffnDown: string;
}

export interface ModelTensorNames {
  tokenEmbd: string;
  outputNorm: string;
  /** token_embd.weight when the embeddings are tied. */
  output: string;
  /** rope_freqs.weight when the model has per-dimension rope frequency factors. */
  ropeFreqs?: string;
  layers: LayerTensorNames[];
}

const SUPPORTED: readonly ModelArch[] = ['llama', 'qwen2', 'qwen3'];

export function modelConfigFromGguf(gguf: GgufFile): ModelConfig {
  const arch = gguf.getString('general.architecture');
  if (!(SUPPORTED as readonly string[]).includes(arch)) {
    throw new GgufError('KVT_ERR_GGUF_METADATA_TYPE', gguf.path, 'general.architecture', `architecture "${arch}" is not supported (llama, qwen2, qwen3 are)`);
  }
  const a = arch as ModelArch;
  const heads = readHeadDims(gguf, a);
  const { dModel, nHeads, nKvHeads, headDim } = heads;
  if (!Number.isInteger(headDim)) {
    throw new GgufError('KVT_ERR_GGUF_METADATA_TYPE', gguf.path, `${a}.attention.head_count`, `embedding_length ${dModel} is not divisible by ${nHeads} heads`);
  }
  if (nHeads % nKvHeads !== 0) {
    throw new GgufError('KVT_ERR_GGUF_METADATA_TYPE', gguf.path, `${a}.attention.head_count_kv`, `${nHeads} heads are not a multiple of ${nKvHeads} kv heads`);
  }
  const embd = gguf.tensor('token_embd.weight');
  const vocabSize = gguf.optU32(`${a}.vocab_size`) ?? gguf.optStringArray('tokenizer.ggml.tokens')?.length ?? embd.dims[1];
  const nLayers = gguf.getU32(`${a}.block_count`);
  const ctxLen = gguf.getU32(`${a}.context_length`);
  const cfg: ModelConfig = {
    arch: a,
    nLayers,
    ...heads,
    ffnDim: gguf.getU32(`${a}.feed_forward_length`),
    vocabSize,
    ctxLen,
    ropeTheta: gguf.optF32(`${a}.rope.freq_base`) ?? 10000,
    ropeType: a === 'llama' ? 'normal' : 'neox',
    ropeDims: gguf.optU32(`${a}.rope.dimension_count`) ?? headDim,
    rmsEps: gguf.getF32(`${a}.attention.layer_norm_rms_epsilon`),
    qkvBias: gguf.tensors.has('blk.0.attn_q.bias'),
    tiedEmbeddings: !gguf.tensors.has('output.weight'),
    qkNorm: a === 'qwen3',
    ropeScaling: readRopeScaling(gguf, a, ctxLen),
    ropeFreqFactors: gguf.tensors.has('rope_freqs.weight'),
    slidingWindow: gguf.optU32(`${a}.attention.sliding_window`) ?? null,
  };
  if (a === 'qwen2' && !cfg.qkvBias) gguf.tensor('blk.0.attn_q.bias');
  validateShapes(gguf, cfg);
  return cfg;
}

export function modelTensorNames(cfg: ModelConfig): ModelTensorNames {
  const layers: LayerTensorNames[] = [];
  for (let l = 0; l < cfg.nLayers; l++) {
    const p = `blk.${l}.`;
    layers.push({
      attnNorm: p + 'attn_norm.weight',
      q: p + 'attn_q.weight',
      k: p + 'attn_k.weight',
      v: p + 'attn_v.weight',
      ...(cfg.qkvBias ? { qBias: p + 'attn_q.bias', kBias: p + 'attn_k.bias', vBias: p + 'attn_v.bias' } : {}),
      ...(cfg.qkNorm ? { qNorm: p + 'attn_q_norm.weight', kNorm: p + 'attn_k_norm.weight' } : {}),
      attnOutput: p + 'attn_output.weight',
      ffnNorm: p + 'ffn_norm.weight',
      ffnGate: p + 'ffn_gate.weight',
      ffnUp: p + 'ffn_up.weight',
      ffnDown: p + 'ffn_down.weight',
    });
  }
  return {
    tokenEmbd: 'token_embd.weight',
    outputNorm: 'output_norm.weight',
    output: cfg.tiedEmbeddings ? 'token_embd.weight' : 'output.weight',
    ...(cfg.ropeFreqFactors ? { ropeFreqs: 'rope_freqs.weight' } : {}),
    layers,
  };
}

/** Tensor `name` exists in `gguf` with shape `dims` (ne0 first); a typed KVT_ERR_GGUF_BAD_TENSOR otherwise. */
export function expectTensorShape(gguf: GgufFile, name: string, dims: number[]): void {
  const t: GgufTensor = gguf.tensor(name);
  if (t.dims.length !== dims.length || t.dims.some((x, i) => x !== dims[i])) {
    throw new GgufError('KVT_ERR_GGUF_BAD_TENSOR', gguf.path, `tensor ${name}`, `shape [${t.dims.join(', ')}] does not match the metadata, expected [${dims.join(', ')}]`);
  }
}

/** Checks every tensor the graph needs exists with the shape the config implies (ne0 first). */
function validateShapes(gguf: GgufFile, cfg: ModelConfig): void {
  const names = modelTensorNames(cfg);
  const q = cfg.nHeads * cfg.headDim;
  const kv = cfg.nKvHeads * cfg.headDim;
  const expect = (name: string, dims: number[]) => expectTensorShape(gguf, name, dims);
  expect(names.tokenEmbd, [cfg.dModel, cfg.vocabSize]);
  expect(names.outputNorm, [cfg.dModel]);
  if (!cfg.tiedEmbeddings) expect(names.output, [cfg.dModel, cfg.vocabSize]);
  if (names.ropeFreqs) expect(names.ropeFreqs, [cfg.ropeDims / 2]);
  for (const l of names.layers) {
    expect(l.attnNorm, [cfg.dModel]);
    expect(l.q, [cfg.dModel, q]);
    expect(l.k, [cfg.dModel, kv]);
    expect(l.v, [cfg.dModel, kv]);
    if (l.qBias) {
      expect(l.qBias, [q]);
      expect(l.kBias!, [kv]);
      expect(l.vBias!, [kv]);
    }
    if (l.qNorm) {
      expect(l.qNorm, [cfg.headDim]);
      expect(l.kNorm!, [cfg.headDim]);
    }
    expect(l.attnOutput, [q, cfg.dModel]);
    expect(l.ffnNorm, [cfg.dModel]);
    expect(l.ffnGate, [cfg.dModel, cfg.ffnDim]);
    expect(l.ffnUp, [cfg.dModel, cfg.ffnDim]);
    expect(l.ffnDown, [cfg.ffnDim, cfg.dModel]);
  }
}
