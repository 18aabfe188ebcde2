/**
 * Gemma 3 (`general.architecture` = gemma3) hyper-parameters from GGUF
 * metadata, with llama.cpp's semantics (src/models/gemma3.cpp and the common
 * loader in llama-model.cpp of the release node-llama-cpp 3.21.1 bundles):
 *
 *   - `gemma3.attention.sliding_window` = n_swa. Present and > 0: interleaved
 *     SWA, layer il is a sliding-window layer when il % P < P − 1, with
 *     P = `gemma3.attention.sliding_window_pattern` (default 6: five local
 *     layers, then one global). Absent or 0: every layer is global.
 *   - A sliding layer's query at position p sees keys p − n_swa < j ≤ p
 *     (LLAMA_SWA_TYPE_STANDARD).
 *   - rope NEOX; global layers: `rope.freq_base` (default 10000) and the
 *     rope.scaling.* keys; sliding layers: `rope.freq_base_swa` (default
 *     10000) and no frequency scaling (rope_freq_scale_train_swa = 1).
 *   - head_dim = `attention.key_length` (default n_embd / n_head); queries are
 *     scaled by 1/√head_dim before attention, except the 62-layer (27B) shape,
 *     which uses 1/√(n_embd / n_head).
 *   - `final_logit_softcapping` (optional, 0 = off): logits = c·tanh(logits/c).
 *   - embeddings are multiplied by √n_embd; norm gains are used as stored
 *     (the converter already added Gemma's +1).
 *   - output.weight absent: the head is tied to token_embd.
 */
import { GgufError, type GgufFile } from './gguf/index.ts';
import { readHeadDims, readRopeScaling, type RopeScalingConfig, type TransformerDims } from './model-config.ts';

export interface Gemma3Config extends TransformerDims {
  arch: 'gemma3';
  ropeThetaSwa: number;
  ropeDims: number;
  ropeDimsSwa: number;
  ropeScaling: RopeScalingConfig;
  /** n_swa; 0 = no sliding window (every layer global). */
  slidingWindow: number;
  /** Per layer: true for a sliding-window layer. */
  swaLayers: boolean[];
  /** The scale queries are multiplied by before attention. */
  attentionScale: number;
  /** 0 = none. */
  finalLogitSoftcap: number;
  tiedEmbeddings: boolean;
}

export function gemma3ConfigFromGguf(g: GgufFile): Gemma3Config {
  const a = 'gemma3';
  if (g.getString('general.architecture') !== a) {
    throw new GgufError('KVT_ERR_GGUF_METADATA_TYPE', g.path, 'general.architecture', 'not a gemma3 file');
  }
  const heads = readHeadDims(g, a);
  const { dModel, nHeads, nKvHeads, headDim } = heads;
  const valueDim = g.optU32(`${a}.attention.value_length`) ?? dModel / nHeads;
  if (!Number.isInteger(headDim) || valueDim !== headDim) {
    throw new GgufError('KVT_ERR_GGUF_METADATA_TYPE', g.path, `${a}.attention.key_length`, `key/value head dims ${headDim}/${valueDim} must be equal integers`);
  }
  if (nHeads % nKvHeads !== 0) {
    throw new GgufError('KVT_ERR_GGUF_METADATA_TYPE', g.path, `${a}.attention.head_count_kv`, `${nHeads} heads are not a multiple of ${nKvHeads} kv heads`);
  }
  const nLayers = g.getU32(`${a}.block_count`);
  const ctxLen = g.getU32(`${a}.context_length`);
  const slidingWindow = g.optU32(`${a}.attention.sliding_window`) ?? 0;
  const pattern = slidingWindow > 0 ? (g.optU32(`${a}.attention.sliding_window_pattern`) ?? 6) : 0;
  const swaLayers = Array.from({ length: nLayers }, (_, il) => slidingWindow > 0 && (pattern === 0 || il % pattern < pattern - 1));
  const ropeDims = g.optU32(`${a}.rope.dimension_count`) ?? headDim;
  const embd = g.tensor('token_embd.weight');
  return {
    arch: a,
    nLayers,
    ...heads,
    ffnDim: g.getU32(`${a}.feed_forward_length`),
    vocabSize: embd.dims[1],
    ctxLen,
    rmsEps: g.getF32(`${a}.attention.layer_norm_rms_epsilon`),
    ropeTheta: g.optF32(`${a}.rope.freq_base`) ?? 10000,
    ropeThetaSwa: slidingWindow > 0 ? (g.optF32(`${a}.rope.freq_base_swa`) ?? 10000) : 10000,
    ropeDims,
    ropeDimsSwa: g.optU32(`${a}.rope.dimension_count_swa`) ?? ropeDims,
    ropeScaling: readRopeScaling(g, a, ctxLen),
    slidingWindow,
    swaLayers,
    attentionScale: Math.fround(1 / Math.fround(Math.sqrt(nLayers === 62 ? Math.floor(dModel / nHeads) : headDim))),
    finalLogitSoftcap: g.optF32(`${a}.final_logit_softcapping`) ?? 0,
    tiedEmbeddings: !g.tensors.has('output.weight'),
  };
}
