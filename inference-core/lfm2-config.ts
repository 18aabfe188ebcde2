/**
 * LFM2 (`general.architecture` = lfm2) hyper-parameters, with llama.cpp's
 * semantics (src/models/lfm2.cpp of the release node-llama-cpp 3.21.1
 * bundles): `lfm2.attention.head_count_kv` is per layer — 0 marks a
 * short-convolution layer, anything else an attention layer (GQA, q/k
 * RMSNorm, NEOX rope, 1/√head_dim); `lfm2.shortconv.l_cache` = L taps of the
 * causal depthwise convolution (state: the last L − 1 inputs per channel);
 * every layer's FFN is SwiGLU; the final norm is stored as
 * `token_embd_norm.weight`; output.weight absent → tied head. No sliding
 * window (a file declaring one is refused), no MoE (lfm2moe is another arch).
 */
import { GgufError, type GgufFile } from './gguf/index.ts';
import type { TransformerDims } from './model-config.ts';

export interface Lfm2Config extends TransformerDims {
  arch: 'lfm2';
  /** Per layer; 0 = short-convolution layer. */
  kvHeadsPerLayer: number[];
  /** L: convolution taps (state = L − 1 rows of dModel per conv layer). */
  convL: number;
  tiedEmbeddings: boolean;
}

export function lfm2ConfigFromGguf(g: GgufFile): Lfm2Config {
  const a = 'lfm2';
  const bad = (key: string, why: string): never => {
    throw new GgufError('KVT_ERR_GGUF_METADATA_TYPE', g.path, key, why);
  };
  if (g.getString('general.architecture') !== a) bad('general.architecture', 'not an lfm2 file');
  const nLayers = g.getU32(`${a}.block_count`);
  const dModel = g.getU32(`${a}.embedding_length`);
  const nHeads = g.getU32(`${a}.attention.head_count`);
  const kvKey = `${a}.attention.head_count_kv`;
  const kv = g.metadata.get(kvKey);
  let kvHeadsPerLayer: number[];
  if (kv?.type === 'array' && (kv.itemType === 'u32' || kv.itemType === 'i32')) kvHeadsPerLayer = Array.from(kv.value as Uint32Array | Int32Array);
  else if (kv?.type === 'u32' || kv?.type === 'i32') kvHeadsPerLayer = Array(nLayers).fill(kv.value);
  else kvHeadsPerLayer = bad(kvKey, 'lfm2 needs head_count_kv per layer (0 marks a convolution layer)');
  if (kvHeadsPerLayer.length !== nLayers) bad(kvKey, `${kvHeadsPerLayer.length} entries for ${nLayers} layers`);
  const attn = kvHeadsPerLayer.filter((h) => h > 0);
  const nKvHeads = attn[0] ?? 1;
  if (attn.some((h) => h !== nKvHeads || nHeads % h !== 0)) bad(kvKey, 'attention layers must share one kv head count dividing head_count');
  if ((g.optU32(`${a}.attention.sliding_window`) ?? 0) > 0) bad(`${a}.attention.sliding_window`, 'sliding-window lfm2 files are not supported');
  const headDim = dModel / nHeads;
  if (!Number.isInteger(headDim)) bad(`${a}.attention.head_count`, `embedding_length ${dModel} is not divisible by ${nHeads} heads`);
  const convL = g.getU32(`${a}.shortconv.l_cache`);
  if (convL < 2) bad(`${a}.shortconv.l_cache`, 'must be at least 2');
  return {
    arch: a,
    nLayers,
    dModel,
    nHeads,
    kvHeadsPerLayer,
    nKvHeads,
    headDim,
    ffnDim: g.getU32(`${a}.feed_forward_length`),
    vocabSize: g.tensor('token_embd.weight').dims[1],
    ctxLen: g.getU32(`${a}.context_length`),
    rmsEps: g.getF32(`${a}.attention.layer_norm_rms_epsilon`),
    ropeTheta: g.optF32(`${a}.rope.freq_base`) ?? 10000,
    convL,
    tiedEmbeddings: !g.tensors.has('output.weight'),
  };
}
