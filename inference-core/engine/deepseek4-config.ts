/**
 * DeepSeek V4 (`deepseek4`) hyper-parameters, read from GGUF metadata the way
 * llama.cpp's llama_model_deepseek4::load_arch_hparams (and the generic
 * llama_model_base::load_hparams before it) reads them, with the same
 * rejections: hc == 4, ratios in {0, 4, 128}, sqrtsoftplus gating, one MTP block.
 *
 * Rope, as the deepseek4 graph sets it per layer: layers with compress ratio 0
 * use rope.freq_base with no scaling; compressed layers, their compressed keys
 * and the indexer use attention.compress_rope_freq_base with the file's rope
 * scaling (YaRN: ext_factor 1, attn_factor 1/(1 + 0.1·ln(1/freq_scale)) so the
 * kernel's mscale cancels, beta 32/1, n_ctx_orig = original_context_length).
 */
import type { RopeScaling } from '../../native/index.ts';
import type { GgufFile } from '../gguf/index.ts';
import { EngineError } from './engine-errors.ts';

/** The backend's rope scaling (YaRN terms) with the layer's base frequency. */
export interface Deepseek4Rope extends RopeScaling {
  freqBase: number;
}

export interface Deepseek4Config {
  nEmbd: number;
  nVocab: number;
  /** trunk layers; the MTP blocks follow at nLayer.. */
  nLayer: number;
  nMtp: number;
  nHead: number;
  headDim: number;
  nRot: number;
  qLoraRank: number;
  oGroups: number;
  oLoraRank: number;
  nSwa: number;
  ratios: number[];
  indexerHeads: number;
  indexerDim: number;
  indexerTopK: number;
  nExpert: number;
  nExpertUsed: number;
  nExpertShared: number;
  expertFfn: number;
  hashLayers: number;
  weightsScale: number;
  weightsNorm: boolean;
  clampExp: number[];
  clampShexp: number[];
  hc: number;
  sinkhornIters: number;
  hcEps: number;
  rmsEps: number;
  /** rope of ratio-0 layers */
  ropePlain: Deepseek4Rope;
  /** rope of compressed layers, compressed keys and the indexer */
  ropeCompress: Deepseek4Rope;
}

const f = Math.fround;

function bad(field: string, why: string): EngineError {
  return new EngineError('KVT_ERR_ENGINE_UNSUPPORTED_MODEL', `deepseek4 ${field}: ${why}`);
}

function intArray(g: GgufFile, key: string): number[] {
  const v = g.metadata.get(key);
  if (v === undefined) throw bad(key, 'key missing');
  if (v.type !== 'array' || (v.itemType !== 'u32' && v.itemType !== 'i32')) throw bad(key, 'must be an array of u32/i32');
  return Array.from(v.value as Uint32Array | Int32Array);
}

export function readDeepseek4Config(g: GgufFile): Deepseek4Config {
  const a = 'deepseek4';
  const u = (k: string, d?: number): number => {
    const v = g.optU32(`${a}.${k}`);
    if (v === undefined) {
      if (d === undefined) throw bad(k, 'key missing');
      return d;
    }
    return v;
  };
  const fl = (k: string, d?: number): number => {
    const v = g.optF32(`${a}.${k}`);
    if (v === undefined) {
      if (d === undefined) throw bad(k, 'key missing');
      return d;
    }
    return v;
  };
  const blocks = u('block_count');
  let nMtp = u('nextn_predict_layers', 0);
  if (nMtp > 0 && !g.tensors.has(`blk.${blocks - nMtp}.nextn.eh_proj.weight`)) nMtp = 0;
  if (nMtp > 1) throw bad('nextn_predict_layers', `${nMtp}: llama.cpp's deepseek4 MTP graph takes one block`);
  const hc = u('hyper_connection.count');
  if (hc !== 4) throw bad('hyper_connection.count', `${hc}: llama.cpp's deepseek4 graph asserts 4`);
  const gating = u('expert_gating_func');
  if (gating !== 4) throw bad('expert_gating_func', `${gating}: llama.cpp's deepseek4 loader expects sqrtsoftplus (4)`);
  const ratios = intArray(g, `${a}.attention.compress_ratios`);
  if (ratios.length < blocks) throw bad('attention.compress_ratios', `${ratios.length} entries for ${blocks} blocks`);
  for (const r of ratios) if (r !== 0 && r !== 4 && r !== 128) throw bad('attention.compress_ratios', `ratio ${r}: only 0, 4 and 128`);
  const perLayer = (k: string): number[] => {
    const v = g.metadata.get(`${a}.${k}`);
    if (v?.type === 'array' && v.itemType === 'f32') return Array.from(v.value);
    const one = g.optF32(`${a}.${k}`);
    return new Array<number>(blocks).fill(one ?? 0);
  };
  const clampExp = perLayer('swiglu_clamp_exp');
  // llama.cpp: without swiglu_clamp_shexp the shared expert takes the routed experts' limits
  const clampShexp = g.has(`${a}.swiglu_clamp_shexp`) ? perLayer('swiglu_clamp_shexp') : clampExp;
  const nHead = u('attention.head_count');
  const nEmbd = u('embedding_length');
  const headDim = u('attention.key_length', nEmbd / nHead);
  if (u('attention.value_length', headDim) !== headDim) throw bad('attention.value_length', 'must equal key_length (V is K)');
  const scalingType = g.optString(`${a}.rope.scaling.type`) ?? 'linear';
  const factor = fl('rope.scaling.factor', 0);
  const freqScale = factor === 0 ? 1 : f(1 / factor);
  const extFactor = scalingType === 'yarn' ? 1 : 0;
  const ctxTrain = u('context_length');
  const ropeBase = fl('rope.freq_base', 10000);
  const compressBase = fl('attention.compress_rope_freq_base');
  const tokens = g.optStringArray('tokenizer.ggml.tokens');
  const nVocab = g.tensors.get('token_embd.weight')?.dims[1] ?? tokens?.length ?? 0;
  return {
    nEmbd,
    nVocab,
    nLayer: blocks - nMtp,
    nMtp,
    nHead,
    headDim,
    nRot: u('rope.dimension_count', headDim),
    qLoraRank: u('attention.q_lora_rank'),
    oGroups: u('attention.output_group_count'),
    oLoraRank: u('attention.output_lora_rank'),
    nSwa: u('attention.sliding_window'),
    ratios: ratios.slice(0, blocks),
    indexerHeads: u('attention.indexer.head_count'),
    indexerDim: u('attention.indexer.key_length'),
    indexerTopK: u('attention.indexer.top_k'),
    nExpert: u('expert_count'),
    nExpertUsed: u('expert_used_count'),
    nExpertShared: u('expert_shared_count'),
    expertFfn: u('expert_feed_forward_length'),
    hashLayers: u('hash_layer_count'),
    weightsScale: fl('expert_weights_scale'),
    weightsNorm: g.optBool(`${a}.expert_weights_norm`) ?? false,
    clampExp,
    clampShexp,
    hc,
    sinkhornIters: u('hyper_connection.sinkhorn_iterations'),
    hcEps: fl('hyper_connection.epsilon'),
    rmsEps: fl('attention.layer_norm_rms_epsilon'),
    ropePlain: { freqBase: ropeBase, freqScale: 1, extFactor: 0, attnFactor: 1, betaFast: 0, betaSlow: 0, nCtxOrig: 0 },
    ropeCompress: {
      freqBase: compressBase,
      freqScale,
      extFactor,
      attnFactor: extFactor === 0 ? 1 : f(1 / f(1 + f(f(0.1) * f(Math.log(f(1 / freqScale)))))),
      betaFast: 32,
      betaSlow: 1,
      nCtxOrig: u('rope.scaling.original_context_length', ctxTrain),
    },
  };
}
