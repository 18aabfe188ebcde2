/**
 * The tensors of a llama-family GGUF (llama, qwen2, qwen3, mistral) in the
 * order convert_hf_to_gguf.py writes them, with each one's initial values:
 * one list for the demo models (synthetic-model.ts) and the architecture
 * variants (arch-variants.ts). The order is the files' tensor order, so a
 * change here changes both generators' files.
 */

export type TensorInit = { kind: 'normal'; std: number } | { kind: 'norm' } | { kind: 'values'; values: Float32Array };

export interface PlannedTensor {
  name: string;
  dims: number[];
  /** 2-D, quantized by the mix; the 1-D ones (norms, biases, rope factors) stay F32. */
  matrix: boolean;
  init: TensorInit;
}

export interface LlamaTensorShape {
  dModel: number;
  nVocab: number;
  nLayers: number;
  /** nHeads · headDim */
  qDim: number;
  /** nKvHeads · headDim */
  kvDim: number;
  headDim: number;
  ffnDim: number;
  /** std of attn_q/attn_k (the other matrices: 0.02) */
  qkStd: number;
  qkvBias: boolean;
  qkNorm: boolean;
  tiedEmbeddings: boolean;
  /** rope_freqs.weight (llama3 rope scaling), after the token embedding */
  ropeFactors?: Float32Array;
}

export function llamaTensorPlan(s: LlamaTensorShape): PlannedTensor[] {
  const d = s.dModel;
  const plan: PlannedTensor[] = [];
  const mat = (name: string, cols: number, rows: number, std = 0.02) => plan.push({ name, dims: [cols, rows], matrix: true, init: { kind: 'normal', std } });
  const vec = (name: string, n: number, init: TensorInit) => plan.push({ name, dims: [n], matrix: false, init });
  mat('token_embd.weight', d, s.nVocab, 1 / Math.sqrt(d));
  if (s.ropeFactors) vec('rope_freqs.weight', s.ropeFactors.length, { kind: 'values', values: s.ropeFactors });
  for (let l = 0; l < s.nLayers; l++) {
    const p = `blk.${l}.`;
    vec(p + 'attn_norm.weight', d, { kind: 'norm' });
    mat(p + 'attn_q.weight', d, s.qDim, s.qkStd);
    mat(p + 'attn_k.weight', d, s.kvDim, s.qkStd);
    mat(p + 'attn_v.weight', d, s.kvDim);
    if (s.qkvBias) {
      vec(p + 'attn_q.bias', s.qDim, { kind: 'normal', std: 0.02 });
      vec(p + 'attn_k.bias', s.kvDim, { kind: 'normal', std: 0.02 });
      vec(p + 'attn_v.bias', s.kvDim, { kind: 'normal', std: 0.02 });
    }
    if (s.qkNorm) {
      vec(p + 'attn_q_norm.weight', s.headDim, { kind: 'norm' });
      vec(p + 'attn_k_norm.weight', s.headDim, { kind: 'norm' });
    }
    mat(p + 'attn_output.weight', s.qDim, d);
    vec(p + 'ffn_norm.weight', d, { kind: 'norm' });
    mat(p + 'ffn_gate.weight', d, s.ffnDim);
    mat(p + 'ffn_up.weight', d, s.ffnDim);
    mat(p + 'ffn_down.weight', s.ffnDim, d);
  }
  vec('output_norm.weight', d, { kind: 'norm' });
  if (!s.tiedEmbeddings) mat('output.weight', d, s.nVocab, 1 / Math.sqrt(d));
  return plan;
}
