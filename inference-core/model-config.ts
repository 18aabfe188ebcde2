/**
 * Model hyper-parameters and tensor names from GGUF metadata, with
 * llama.cpp's semantics: `<arch>.*` keys, head_dim = n_embd / n_head unless
 * `<arch>.attention.key_length` says otherwise, rope "normal" (adjacent
 * pairs) for llama and "neox" (halves) for qwen2, an absent output.weight
 * meaning the head is tied to token_embd.
 */
import { GgufError, type GgufFile, type GgufTensor } from './gguf/index.ts';

export type ModelArch = 'llama' | 'qwen2';

export interface ModelConfig {
  arch: ModelArch;
  nLayers: number;
  dModel: number;
  nHeads: number;
  nKvHeads: number;
  headDim: number;
  ffnDim: number;
  vocabSize: number;
  ctxLen: number;
  ropeTheta: number;
  ropeType: 'normal' | 'neox';
  ropeDims: number;
  rmsEps: number;
  qkvBias: boolean;
  tiedEmbeddings: boolean;
}

export interface LayerTensorNames {
  attnNorm: string;
  q: string;
  k: string;
  v: string;
  qBias?: string;
  kBias?: string;
  vBias?: string;
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
  layers: LayerTensorNames[];
}

const SUPPORTED: readonly ModelArch[] = ['llama', 'qwen2'];

export function modelConfigFromGguf(gguf: GgufFile): ModelConfig {
  const arch = gguf.getString('general.architecture');
  if (!(SUPPORTED as readonly string[]).includes(arch)) {
    throw new GgufError('KVT_ERR_GGUF_METADATA_TYPE', gguf.path, 'general.architecture', `architecture "${arch}" is not supported (llama, qwen2 are)`);
  }
  const a = arch as ModelArch;
  const dModel = gguf.getU32(`${a}.embedding_length`);
  const nHeads = gguf.getU32(`${a}.attention.head_count`);
  const nKvHeads = gguf.optU32(`${a}.attention.head_count_kv`) ?? nHeads;
  const headDim = gguf.optU32(`${a}.attention.key_length`) ?? dModel / nHeads;
  if (!Number.isInteger(headDim)) {
    throw new GgufError('KVT_ERR_GGUF_METADATA_TYPE', gguf.path, `${a}.attention.head_count`, `embedding_length ${dModel} is not divisible by ${nHeads} heads`);
  }
  if (nHeads % nKvHeads !== 0) {
    throw new GgufError('KVT_ERR_GGUF_METADATA_TYPE', gguf.path, `${a}.attention.head_count_kv`, `${nHeads} heads are not a multiple of ${nKvHeads} kv heads`);
  }
  const embd = gguf.tensor('token_embd.weight');
  const vocabSize = gguf.optU32(`${a}.vocab_size`) ?? gguf.optStringArray('tokenizer.ggml.tokens')?.length ?? embd.dims[1];
  const nLayers = gguf.getU32(`${a}.block_count`);
  const cfg: ModelConfig = {
    arch: a,
    nLayers,
    dModel,
    nHeads,
    nKvHeads,
    headDim,
    ffnDim: gguf.getU32(`${a}.feed_forward_length`),
    vocabSize,
    ctxLen: gguf.getU32(`${a}.context_length`),
    ropeTheta: gguf.optF32(`${a}.rope.freq_base`) ?? 10000,
    ropeType: a === 'qwen2' ? 'neox' : 'normal',
    ropeDims: gguf.optU32(`${a}.rope.dimension_count`) ?? headDim,
    rmsEps: gguf.getF32(`${a}.attention.layer_norm_rms_epsilon`),
    qkvBias: gguf.tensors.has('blk.0.attn_q.bias'),
    tiedEmbeddings: !gguf.tensors.has('output.weight'),
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
      attnOutput: p + 'attn_output.weight',
      ffnNorm: p + 'ffn_norm.weight',
      ffnGate: p + 'ffn_gate.weight',
      ffnUp: p + 'ffn_up.weight',
      ffnDown: p + 'ffn_down.weight',
    });
  }
  return { tokenEmbd: 'token_embd.weight', outputNorm: 'output_norm.weight', output: cfg.tiedEmbeddings ? 'token_embd.weight' : 'output.weight', layers };
}

/** Checks every tensor the graph needs exists with the shape the config implies (ne0 first). */
function validateShapes(gguf: GgufFile, cfg: ModelConfig): void {
  const names = modelTensorNames(cfg);
  const q = cfg.nHeads * cfg.headDim;
  const kv = cfg.nKvHeads * cfg.headDim;
  const expect = (name: string, dims: number[]) => {
    const t: GgufTensor = gguf.tensor(name);
    if (t.dims.length !== dims.length || t.dims.some((x, i) => x !== dims[i])) {
      throw new GgufError('KVT_ERR_GGUF_BAD_TENSOR', gguf.path, `tensor ${name}`, `shape [${t.dims.join(', ')}] does not match the metadata, expected [${dims.join(', ')}]`);
    }
  };
  expect(names.tokenEmbd, [cfg.dModel, cfg.vocabSize]);
  expect(names.outputNorm, [cfg.dModel]);
  if (!cfg.tiedEmbeddings) expect(names.output, [cfg.dModel, cfg.vocabSize]);
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
    expect(l.attnOutput, [q, cfg.dModel]);
    expect(l.ffnNorm, [cfg.dModel]);
    expect(l.ffnGate, [cfg.dModel, cfg.ffnDim]);
    expect(l.ffnUp, [cfg.dModel, cfg.ffnDim]);
    expect(l.ffnDown, [cfg.ffnDim, cfg.dModel]);
  }
}
