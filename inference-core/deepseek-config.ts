/**
 * DeepSeek-V2/V3 (GGUF architecture `deepseek2`) hyper-parameters and tensor
 * names as node-llama-cpp 3.21.1's llama.cpp loads them
 * (llama_model_deepseek2::load_arch_hparams / load_arch_tensors):
 *
 *   attention (MLA)  q: attn_q [d → heads·kDim]  or, with q LoRA (attention.q_lora_rank > 0),
 *                       attn_q_a [d → qLora] + attn_q_a_norm + attn_q_b [qLora → heads·kDim]
 *                    attn_kv_a_mqa [d → kvLora + rope], attn_kv_a_norm [kvLora]
 *                    'split' files (attention.key_length_mla / value_length_mla present, what
 *                    current converters write): attn_k_b [nope][kvLora][heads] (W_UK, transposed),
 *                    attn_v_b [kvLora][vDim][heads] (W_UV); key_length = kvLora + rope,
 *                    value_length = kvLora (the MQA cache head), head_count_kv 1
 *                    'fused' (legacy) files: attn_kv_b [kvLora → heads·(nope + vDim)],
 *                    key_length = nope + rope, value_length = vDim
 *                    kDim = nope + rope; rope on the last `rope.dimension_count` dims, mode normal
 *   FFN              the first `leading_dense_block_count` layers: ffn_{gate,up,down} [feed_forward_length]
 *                    the rest: ffn_gate_inp [d → experts] (router), exp_probs_b.bias [experts]
 *                    (optional selection bias), ffn_{gate,up,down}_exps 3-D [.., .., experts]
 *                    of expert_feed_forward_length, ffn_{gate,up,down}_shexp of
 *                    expert_feed_forward_length · expert_shared_count
 *   routing          expert_gating_func 1 softmax / 2 sigmoid (absent: softmax), top
 *                    expert_used_count of the (biased) probabilities, limited to the best
 *                    expert_group_used_count of expert_group_count groups (group score = sum of
 *                    its top 2) when groups > 1; weights = unbiased probabilities, normalised
 *                    when expert_weights_norm, times expert_weights_scale when ≠ 0 and ≠ 1
 *   rope scaling     as llama/qwen (model-config.ts) plus rope.scaling.yarn_log_multiplier,
 *                    which the converter writes as 0.1 · mscale_all_dim (llama.cpp divides by 0.1)
 *
 * q_lora_rank: llama.cpp reads it only for non-"lite" layer counts (27/26 layers mean
 * V2-Lite-style, no q LoRA); absent or 0 means no q LoRA here.
 */
import { GgufError, type GgufFile } from './gguf/index.ts';
import { expectTensorShape, readRopeScaling, type RopeScalingConfig } from './model-config.ts';

export type ExpertGating = 'softmax' | 'sigmoid';

export interface DeepseekConfig {
  arch: 'deepseek2';
  nLayers: number;
  dModel: number;
  nHeads: number;
  vocabSize: number;
  ctxLen: number;
  rmsEps: number;
  ropeTheta: number;
  /** 0 = no q LoRA (attn_q); else attn_q_a / attn_q_a_norm / attn_q_b. */
  qLoraRank: number;
  kvLoraRank: number;
  /** Per-head q/k dims without rope (nope) and with rope (the last `qkRopeDim` of kDim). */
  qkNopeDim: number;
  qkRopeDim: number;
  vHeadDim: number;
  /** 'split': attn_k_b + attn_v_b; 'fused': legacy attn_kv_b. */
  kvB: 'split' | 'fused';
  leadingDense: number;
  ffnDim: number;
  expertFfnDim: number;
  expertCount: number;
  expertUsed: number;
  expertShared: number;
  /** 0 = no scaling (llama.cpp scales only when ≠ 0 and ≠ 1). */
  expertWeightsScale: number;
  expertWeightsNorm: boolean;
  gating: ExpertGating;
  /** 0 or 1 = no group-limited routing. */
  expertGroups: number;
  expertGroupsUsed: number;
  ropeScaling: RopeScalingConfig;
  /** mscale_all_dim (rope.scaling.yarn_log_multiplier / 0.1); 0 when absent. */
  yarnLogMul: number;
  tiedEmbeddings: boolean;
}

export interface DeepseekLayerNames {
  attnNorm: string;
  q?: string;
  qA?: string;
  qANorm?: string;
  qB?: string;
  kvAMqa: string;
  kvANorm: string;
  kB?: string;
  vB?: string;
  kvB?: string;
  attnOutput: string;
  ffnNorm: string;
  /** dense layers */
  ffnGate?: string;
  ffnUp?: string;
  ffnDown?: string;
  /** MoE layers */
  gateInp?: string;
  expProbsB?: string;
  gateExps?: string;
  upExps?: string;
  downExps?: string;
  gateShexp?: string;
  upShexp?: string;
  downShexp?: string;
}

export interface DeepseekTensorNames {
  tokenEmbd: string;
  outputNorm: string;
  output: string;
  layers: DeepseekLayerNames[];
}

const A = 'deepseek2';

function bad(g: GgufFile, key: string, msg: string): never {
  throw new GgufError('KVT_ERR_GGUF_METADATA_TYPE', g.path, key, msg);
}

export function deepseekConfigFromGguf(g: GgufFile): DeepseekConfig {
  const arch = g.getString('general.architecture');
  if (arch !== A) bad(g, 'general.architecture', `architecture "${arch}" is not deepseek2`);
  const dModel = g.getU32(`${A}.embedding_length`);
  const nHeads = g.getU32(`${A}.attention.head_count`);
  const nLayers = g.getU32(`${A}.block_count`);
  const ctxLen = g.getU32(`${A}.context_length`);
  const embd = g.tensor('token_embd.weight');
  const vocabSize = g.optU32(`${A}.vocab_size`) ?? g.optStringArray('tokenizer.ggml.tokens')?.length ?? embd.dims[1];
  const kvLoraRank = g.getU32(`${A}.attention.kv_lora_rank`);
  const qLoraRank = g.optU32(`${A}.attention.q_lora_rank`) ?? 0;
  const keyMla = g.optU32(`${A}.attention.key_length_mla`);
  const valueMla = g.optU32(`${A}.attention.value_length_mla`);
  if ((keyMla === undefined) !== (valueMla === undefined)) {
    bad(g, `${A}.attention.key_length_mla`, 'key_length_mla and value_length_mla must both be present or both absent');
  }
  const split = keyMla !== undefined && keyMla !== 0;
  const kDim = split ? keyMla : g.optU32(`${A}.attention.key_length`) ?? dModel / nHeads;
  const vHeadDim = split ? valueMla! : g.optU32(`${A}.attention.value_length`) ?? dModel / nHeads;
  const qkRopeDim = g.optU32(`${A}.rope.dimension_count`) ?? kDim;
  const qkNopeDim = kDim - qkRopeDim;
  if (!Number.isInteger(kDim) || qkNopeDim < 1) bad(g, `${A}.rope.dimension_count`, `rope dims ${qkRopeDim} leave no non-rope part of the ${kDim}-dim q/k heads`);
  const gatingId = g.optU32(`${A}.expert_gating_func`) ?? 0;
  if (gatingId > 2) bad(g, `${A}.expert_gating_func`, `expert gating function ${gatingId} is not supported (1 softmax, 2 sigmoid)`);
  const leadingDense = g.optU32(`${A}.leading_dense_block_count`) ?? 0;
  const expertCount = g.optU32(`${A}.expert_count`) ?? 0;
  const expertUsed = g.optU32(`${A}.expert_used_count`) ?? 0;
  if (leadingDense < nLayers && (expertCount === 0 || expertUsed === 0 || expertUsed > expertCount)) {
    bad(g, `${A}.expert_count`, `MoE layers need expert_count > 0 and 0 < expert_used_count <= expert_count (got ${expertCount}, ${expertUsed})`);
  }
  const expertGroups = g.optU32(`${A}.expert_group_count`) ?? 0;
  const expertGroupsUsed = g.optU32(`${A}.expert_group_used_count`) ?? 0;
  if (expertGroups > 1 && (expertCount % expertGroups !== 0 || expertGroupsUsed < 1 || expertGroupsUsed >= expertGroups)) {
    bad(g, `${A}.expert_group_count`, `${expertCount} experts in ${expertGroups} groups with ${expertGroupsUsed} used: groups must divide the experts and 0 < used < groups`);
  }
  const logMul = g.optF32(`${A}.rope.scaling.yarn_log_multiplier`);
  const cfg: DeepseekConfig = {
    arch: A,
    nLayers,
    dModel,
    nHeads,
    vocabSize,
    ctxLen,
    rmsEps: g.getF32(`${A}.attention.layer_norm_rms_epsilon`),
    ropeTheta: g.optF32(`${A}.rope.freq_base`) ?? 10000,
    qLoraRank,
    kvLoraRank,
    qkNopeDim,
    qkRopeDim,
    vHeadDim,
    kvB: split ? 'split' : 'fused',
    leadingDense: Math.min(leadingDense, nLayers),
    ffnDim: g.optU32(`${A}.feed_forward_length`) ?? 0,
    expertFfnDim: expertFfnLength(g),
    expertCount,
    expertUsed,
    expertShared: g.optU32(`${A}.expert_shared_count`) ?? 0,
    expertWeightsScale: g.optF32(`${A}.expert_weights_scale`) ?? 0,
    expertWeightsNorm: g.optBool(`${A}.expert_weights_norm`) ?? false,
    gating: gatingId === 2 ? 'sigmoid' : 'softmax',
    expertGroups,
    expertGroupsUsed,
    ropeScaling: readRopeScaling(g, A, ctxLen),
    yarnLogMul: logMul === undefined ? 0 : Math.fround(logMul / 0.1),
    tiedEmbeddings: !g.tensors.has('output.weight'),
  };
  validateShapes(g, cfg);
  return cfg;
}

/** expert_feed_forward_length: a scalar, or a per-layer array whose MoE entries must agree. */
function expertFfnLength(g: GgufFile): number {
  const key = `${A}.expert_feed_forward_length`;
  const v = g.metadata.get(key);
  if (v === undefined) return 0;
  if (v.type === 'array') {
    const vals = Array.from(v.value as ArrayLike<unknown>, Number).filter((x) => x > 0);
    if (vals.length === 0) return 0;
    if (vals.some((x) => x !== vals[0])) bad(g, key, 'per-layer expert feed-forward lengths that differ are not supported');
    return vals[0];
  }
  return g.getU32(key);
}

export function deepseekTensorNames(cfg: DeepseekConfig): DeepseekTensorNames {
  const layers: DeepseekLayerNames[] = [];
  for (let l = 0; l < cfg.nLayers; l++) {
    const p = `blk.${l}.`;
    const moe = l >= cfg.leadingDense;
    layers.push({
      attnNorm: p + 'attn_norm.weight',
      ...(cfg.qLoraRank > 0
        ? { qA: p + 'attn_q_a.weight', qANorm: p + 'attn_q_a_norm.weight', qB: p + 'attn_q_b.weight' }
        : { q: p + 'attn_q.weight' }),
      kvAMqa: p + 'attn_kv_a_mqa.weight',
      kvANorm: p + 'attn_kv_a_norm.weight',
      ...(cfg.kvB === 'split' ? { kB: p + 'attn_k_b.weight', vB: p + 'attn_v_b.weight' } : { kvB: p + 'attn_kv_b.weight' }),
      attnOutput: p + 'attn_output.weight',
      ffnNorm: p + 'ffn_norm.weight',
      ...(moe
        ? {
            gateInp: p + 'ffn_gate_inp.weight',
            expProbsB: p + 'exp_probs_b.bias',
            gateExps: p + 'ffn_gate_exps.weight',
            upExps: p + 'ffn_up_exps.weight',
            downExps: p + 'ffn_down_exps.weight',
            ...(cfg.expertShared > 0
              ? { gateShexp: p + 'ffn_gate_shexp.weight', upShexp: p + 'ffn_up_shexp.weight', downShexp: p + 'ffn_down_shexp.weight' }
              : {}),
          }
        : { ffnGate: p + 'ffn_gate.weight', ffnUp: p + 'ffn_up.weight', ffnDown: p + 'ffn_down.weight' }),
    });
  }
  return { tokenEmbd: 'token_embd.weight', outputNorm: 'output_norm.weight', output: cfg.tiedEmbeddings ? 'token_embd.weight' : 'output.weight', layers };
}

/** Every tensor the graph needs, with the shape the metadata implies (ne0 first). exp_probs_b is optional. */
function validateShapes(g: GgufFile, c: DeepseekConfig): void {
  const n = deepseekTensorNames(c);
  const kDim = c.qkNopeDim + c.qkRopeDim;
  const sh = c.expertFfnDim * c.expertShared;
  const expect = (name: string, dims: number[]) => expectTensorShape(g, name, dims);
  expect(n.tokenEmbd, [c.dModel, c.vocabSize]);
  expect(n.outputNorm, [c.dModel]);
  if (!c.tiedEmbeddings) expect(n.output, [c.dModel, c.vocabSize]);
  for (const l of n.layers) {
    expect(l.attnNorm, [c.dModel]);
    if (l.q) expect(l.q, [c.dModel, c.nHeads * kDim]);
    else {
      expect(l.qA!, [c.dModel, c.qLoraRank]);
      expect(l.qANorm!, [c.qLoraRank]);
      expect(l.qB!, [c.qLoraRank, c.nHeads * kDim]);
    }
    expect(l.kvAMqa, [c.dModel, c.kvLoraRank + c.qkRopeDim]);
    expect(l.kvANorm, [c.kvLoraRank]);
    if (l.kB) {
      expect(l.kB, [c.qkNopeDim, c.kvLoraRank, c.nHeads]);
      expect(l.vB!, [c.kvLoraRank, c.vHeadDim, c.nHeads]);
    } else expect(l.kvB!, [c.kvLoraRank, c.nHeads * (c.qkNopeDim + c.vHeadDim)]);
    expect(l.attnOutput, [c.nHeads * c.vHeadDim, c.dModel]);
    expect(l.ffnNorm, [c.dModel]);
    if (l.ffnGate) {
      expect(l.ffnGate, [c.dModel, c.ffnDim]);
      expect(l.ffnUp!, [c.dModel, c.ffnDim]);
      expect(l.ffnDown!, [c.ffnDim, c.dModel]);
    } else {
      expect(l.gateInp!, [c.dModel, c.expertCount]);
      if (g.tensors.has(l.expProbsB!)) expect(l.expProbsB!, [c.expertCount]);
      expect(l.gateExps!, [c.dModel, c.expertFfnDim, c.expertCount]);
      expect(l.upExps!, [c.dModel, c.expertFfnDim, c.expertCount]);
      expect(l.downExps!, [c.expertFfnDim, c.dModel, c.expertCount]);
      if (l.gateShexp) {
        expect(l.gateShexp, [c.dModel, sh]);
        expect(l.upShexp!, [c.dModel, sh]);
        expect(l.downShexp!, [sh, c.dModel]);
      }
    }
  }
}
