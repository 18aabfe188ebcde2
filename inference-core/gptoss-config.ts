/**
 * gpt-oss (`general.architecture` = gpt-oss, llama.cpp's LLM_ARCH_OPENAI_MOE)
 * hyper-parameters from GGUF metadata, with llama.cpp's semantics
 * (src/models/openai-moe.cpp and the common loader in llama-model.cpp of the
 * release node-llama-cpp 3.21.1 bundles):
 *
 *   - `gpt-oss.attention.sliding_window` = n_swa (required). Layers alternate:
 *     il is a sliding-window layer when il % P < P − 1, P =
 *     `attention.sliding_window_pattern` (default 2: even layers slide, odd
 *     layers are full attention). A sliding layer's query at p sees keys
 *     p − n_swa < j ≤ p (LLAMA_SWA_TYPE_STANDARD).
 *   - rope NEOX over n_rot = `rope.dimension_count` (default head_dim) dims;
 *     every layer uses `rope.freq_base` (sliding layers `rope.freq_base_swa`
 *     when present) and the same rope scaling (YaRN in the released models):
 *     unlike gemma3, rope_freq_scale_train_swa = rope_freq_scale_train.
 *   - q/k/v/o projections with biases, attention sinks `blk.N.attn_sinks`
 *     ([n_head] f32), kq scale 1/√n_rot.
 *   - MoE FFN on every layer: router `ffn_gate_inp` + bias, the top
 *     `expert_used_count` of `expert_count` experts by the biased logits,
 *     weights = softmax over the chosen logits (SOFTMAX_WEIGHT gating), no
 *     weight norm or scale; experts' gate/up/down with biases and the
 *     clamped SwiGLU (swiglu_oai, alpha 1.702, limit 7, constants in
 *     llama-graph.cpp), expert width `expert_feed_forward_length`.
 *   - post-attention RMSNorm before the FFN; output.weight is required (not tied).
 */
import { GgufError, type GgufFile } from './gguf/index.ts';
import { readHeadDims, readRopeScaling, type RopeScalingConfig, type TransformerDims } from './model-config.ts';

export interface GptOssConfig extends TransformerDims {
  arch: 'gpt-oss';
  ropeThetaSwa: number;
  ropeDims: number;
  ropeScaling: RopeScalingConfig;
  slidingWindow: number;
  /** Per layer: true for a sliding-window layer. */
  swaLayers: boolean[];
  expertCount: number;
  expertUsed: number;
  /** expert_feed_forward_length: one expert's hidden width. */
  expertFfnDim: number;
  /** swiglu_oai's constants (llama.cpp hard-codes them for LLM_FFN_SWIGLU_OAI_MOE). */
  swigluAlpha: number;
  swigluLimit: number;
}

export function gptOssConfigFromGguf(g: GgufFile): GptOssConfig {
  const a = 'gpt-oss';
  const bad = (key: string, msg: string): never => {
    throw new GgufError('KVT_ERR_GGUF_METADATA_TYPE', g.path, key, msg);
  };
  if (g.getString('general.architecture') !== a) bad('general.architecture', 'not a gpt-oss file');
  const heads = readHeadDims(g, a);
  const { dModel, nHeads, nKvHeads, headDim } = heads;
  const valueDim = g.optU32(`${a}.attention.value_length`) ?? dModel / nHeads;
  const ropeDims = g.optU32(`${a}.rope.dimension_count`) ?? headDim;
  // llama.cpp sizes q/k/v by n_rot: the projections are n_head·n_rot wide
  if (!Number.isInteger(headDim) || valueDim !== headDim || ropeDims !== headDim) {
    bad(`${a}.attention.key_length`, `key/value/rope dims ${headDim}/${valueDim}/${ropeDims} must be one integer`);
  }
  if (nHeads % nKvHeads !== 0) bad(`${a}.attention.head_count_kv`, `${nHeads} heads are not a multiple of ${nKvHeads} kv heads`);
  const nLayers = g.getU32(`${a}.block_count`);
  const ctxLen = g.getU32(`${a}.context_length`);
  const slidingWindow = g.getU32(`${a}.attention.sliding_window`);
  const pattern = g.optU32(`${a}.attention.sliding_window_pattern`) ?? 2;
  const swaLayers = Array.from({ length: nLayers }, (_, il) => pattern === 0 || il % pattern < pattern - 1);
  const expertCount = g.getU32(`${a}.expert_count`);
  const expertUsed = g.getU32(`${a}.expert_used_count`);
  if (!(expertUsed > 0 && expertUsed <= expertCount)) bad(`${a}.expert_used_count`, `${expertUsed} of ${expertCount} experts`);
  const ropeTheta = g.optF32(`${a}.rope.freq_base`) ?? 10000;
  return {
    arch: a,
    nLayers,
    ...heads,
    ffnDim: g.optU32(`${a}.feed_forward_length`) ?? 0,
    vocabSize: g.tensor('token_embd.weight').dims[1],
    ctxLen,
    rmsEps: g.getF32(`${a}.attention.layer_norm_rms_epsilon`),
    ropeTheta,
    ropeThetaSwa: g.optF32(`${a}.rope.freq_base_swa`) ?? ropeTheta,
    ropeDims,
    ropeScaling: readRopeScaling(g, a, ctxLen),
    slidingWindow,
    swaLayers,
    expertCount,
    expertUsed,
    expertFfnDim: g.getU32(`${a}.expert_feed_forward_length`),
    swigluAlpha: 1.702,
    swigluLimit: 7,
  };
}
