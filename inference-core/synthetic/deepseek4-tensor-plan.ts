/**
 * The tensors of a synthetic deepseek4 file, in the converter's order (order
 * is part of the bytes): names, dims, F32 type before llama-quantize's rules,
 * and each one's init (deepseek4-synthetic.ts says why those inits).
 */
import { GgmlType } from '../gguf/index.ts';
import type { Xoshiro128 } from './prng.ts';
import type { Deepseek4SyntheticSpec } from './deepseek4-specs.ts';

export type Init =
  | { kind: 'normal'; mean?: number; std: number }
  | { kind: 'norm' }
  | { kind: 'hash'; nExpert: number; nUsed: number };
export interface Planned {
  name: string;
  dims: number[];
  type: GgmlType;
  init: Init;
}

/** Every tensor of the trunk, the head and the MTP block, matrices as `matType`. */
export function planTensors(s: Deepseek4SyntheticSpec, nVocab: number, matType: GgmlType): Planned[] {
  const plan: Planned[] = [];
  const d = s.dModel;
  const hc = s.hcMult;
  const hcDim = hc * d;
  const mixDim = (2 + hc) * hc;
  const mat = (name: string, dims: number[], std = 1 / Math.sqrt(dims[0]!), type = matType) => plan.push({ name, dims, type, init: { kind: 'normal', std } });
  const f32 = (name: string, dims: number[], init: Init) => plan.push({ name, dims, type: GgmlType.F32, init });
  mat('token_embd.weight', [d, nVocab], 1 / Math.sqrt(d));
  f32('output_norm.weight', [d], { kind: 'norm' });
  mat('output.weight', [d, nVocab], 1 / Math.sqrt(d));
  f32('output_hc_fn.weight', [hcDim, hc], { kind: 'normal', std: 1 / Math.sqrt(hcDim) });
  f32('output_hc_base.weight', [hc], { kind: 'normal', std: 0.5 });
  f32('output_hc_scale.weight', [1], { kind: 'normal', mean: 1, std: 0.1 });
  const expertStd = 1.5 / Math.sqrt(d);
  for (let l = 0; l < s.nLayers + s.nMtp; l++) {
    const p = `blk.${l}.`;
    f32(p + 'attn_norm.weight', [d], { kind: 'norm' });
    f32(p + 'attn_sinks.weight', [s.nHeads], { kind: 'normal', std: 1 });
    mat(p + 'attn_q_a.weight', [d, s.qLoraRank]);
    f32(p + 'attn_q_a_norm.weight', [s.qLoraRank], { kind: 'norm' });
    mat(p + 'attn_q_b.weight', [s.qLoraRank, s.nHeads * s.headDim]);
    mat(p + 'attn_kv.weight', [d, s.headDim]);
    f32(p + 'attn_kv_a_norm.weight', [s.headDim], { kind: 'norm' });
    // the file holds wo_a as [n_head·head_dim / groups, o_lora_rank·groups]; llama.cpp reshapes it
    mat(p + 'attn_output_a.weight', [(s.nHeads * s.headDim) / s.oGroups, s.oLoraRank * s.oGroups]);
    mat(p + 'attn_output_b.weight', [s.oGroups * s.oLoraRank, d]);
    for (const which of ['attn', 'ffn']) {
      f32(`${p}hc_${which}_fn.weight`, [hcDim, mixDim], { kind: 'normal', std: 1 / Math.sqrt(hcDim) });
      f32(`${p}hc_${which}_base.weight`, [mixDim], { kind: 'normal', std: 0.5 });
      f32(`${p}hc_${which}_scale.weight`, [3], { kind: 'normal', mean: 1, std: 0.1 });
    }
    const ratio = s.compressRatios[l]!;
    if (ratio !== 0) {
      const coff = ratio === 4 ? 2 : 1;
      mat(p + 'attn_compressor_kv.weight', [d, coff * s.headDim]);
      mat(p + 'attn_compressor_gate.weight', [d, coff * s.headDim]);
      f32(p + 'attn_compressor_ape.weight', [coff * s.headDim, ratio], { kind: 'normal', std: 0.5 });
      f32(p + 'attn_compressor_norm.weight', [s.headDim], { kind: 'norm' });
      if (ratio === 4) {
        mat(p + 'indexer.proj.weight', [d, s.indexerHeads]);
        mat(p + 'indexer.attn_q_b.weight', [s.qLoraRank, s.indexerHeads * s.indexerDim]);
        mat(p + 'indexer_compressor_kv.weight', [d, 2 * s.indexerDim]);
        mat(p + 'indexer_compressor_gate.weight', [d, 2 * s.indexerDim]);
        f32(p + 'indexer_compressor_ape.weight', [2 * s.indexerDim, ratio], { kind: 'normal', std: 0.5 });
        f32(p + 'indexer_compressor_norm.weight', [s.indexerDim], { kind: 'norm' });
      }
    }
    // llama-quantize keeps the router F32
    f32(p + 'ffn_gate_inp.weight', [d, s.expertCount], { kind: 'normal', std: 1 / Math.sqrt(d) });
    if (l < s.hashLayers) {
      plan.push({ name: p + 'ffn_gate_tid2eid.weight', dims: [s.expertUsed, nVocab], type: GgmlType.I32, init: { kind: 'hash', nExpert: s.expertCount, nUsed: s.expertUsed } });
    } else f32(p + 'exp_probs_b.bias', [s.expertCount], { kind: 'normal', std: 0.1 });
    f32(p + 'ffn_norm.weight', [d], { kind: 'norm' });
    mat(p + 'ffn_gate_exps.weight', [d, s.expertFfnDim, s.expertCount], expertStd);
    mat(p + 'ffn_down_exps.weight', [s.expertFfnDim, d, s.expertCount]);
    mat(p + 'ffn_up_exps.weight', [d, s.expertFfnDim, s.expertCount], expertStd);
    const sh = s.expertFfnDim * s.expertShared;
    mat(p + 'ffn_gate_shexp.weight', [d, sh], expertStd);
    mat(p + 'ffn_down_shexp.weight', [sh, d]);
    mat(p + 'ffn_up_shexp.weight', [d, sh], expertStd);
    if (l >= s.nLayers) {
      mat(p + 'nextn.eh_proj.weight', [2 * d, d]);
      f32(p + 'nextn.enorm.weight', [d], { kind: 'norm' });
      f32(p + 'nextn.hnorm.weight', [d], { kind: 'norm' });
      f32(p + 'nextn.shared_head_norm.weight', [d], { kind: 'norm' });
    }
  }
  return plan;
}

/** Each token's `nUsed` distinct experts, drawn without replacement. */
export function hashTable(rng: Xoshiro128, nVocab: number, nExpert: number, nUsed: number): Int32Array {
  const out = new Int32Array(nVocab * nUsed);
  const pool = new Int32Array(nExpert);
  for (let t = 0; t < nVocab; t++) {
    for (let e = 0; e < nExpert; e++) pool[e] = e;
    for (let k = 0; k < nUsed; k++) {
      const j = k + (rng.nextU32() % (nExpert - k));
      const x = pool[j]!;
      pool[j] = pool[k]!;
      pool[k] = x;
      out[t * nUsed + k] = x;
    }
  }
  return out;
}
