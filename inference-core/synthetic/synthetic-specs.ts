/**
 * Dimensions of the synthetic demo models. KV bytes/token at f16 =
 * 2 × layers × kvHeads × headDim × 2: tiny 1 KiB, small 24 KiB, 1b 64 KiB.
 */
export type SyntheticName = 'tiny' | 'small' | '1b';
export type SyntheticArch = 'llama' | 'qwen2';
/** Matrix weight types; the quantized mixes follow llama-quantize's recipes (quant-mix.ts). */
export type SyntheticWeightType = 'f32' | 'f16' | 'bf16' | 'q8_0' | 'q4_0' | 'q4_k_m' | 'q5_k_m' | 'q6_k';
export type SyntheticTokenizerKind = 'bpe' | 'spm';

export interface SyntheticSpec {
  name: SyntheticName;
  dModel: number;
  nLayers: number;
  nHeads: number;
  nKvHeads: number;
  ffnDim: number;
  /** Vocabulary size the tokenizer is trained to (specials included); capped by what the corpus supports. */
  vocabSize: number;
  ctxLen: number;
  ropeTheta: number;
  rmsEps: number;
  tiedEmbeddings: boolean;
}

export const SYNTHETIC_SPECS: Record<SyntheticName, SyntheticSpec> = {
  tiny: { name: 'tiny', dModel: 64, nLayers: 2, nHeads: 4, nKvHeads: 2, ffnDim: 128, vocabSize: 512, ctxLen: 2048, ropeTheta: 10000, rmsEps: 1e-5, tiedEmbeddings: false },
  small: { name: 'small', dModel: 768, nLayers: 12, nHeads: 12, nKvHeads: 4, ffnDim: 2048, vocabSize: 8192, ctxLen: 8192, ropeTheta: 1e6, rmsEps: 1e-6, tiedEmbeddings: true },
  '1b': { name: '1b', dModel: 2048, nLayers: 16, nHeads: 32, nKvHeads: 8, ffnDim: 5632, vocabSize: 8192, ctxLen: 8192, ropeTheta: 1e6, rmsEps: 1e-6, tiedEmbeddings: false },
};
