/** The synthetic DeepSeek (V3 / V2-Lite MLA + MoE) sizes and shapes (deepseek-synthetic.ts generates them). */

export type DeepseekSyntheticSize = 'deepseek-tiny' | 'deepseek-small';
export type DeepseekShape = 'v3' | 'v2-lite';
export type DeepseekWeightType = 'f32' | 'f16' | 'q8_0' | 'q4_k_m' | 'q5_k_m' | 'q6_k';
export const DEEPSEEK_WEIGHT_TYPES: readonly DeepseekWeightType[] = ['f32', 'f16', 'q8_0', 'q4_k_m', 'q5_k_m', 'q6_k'];

export interface DeepseekSyntheticSpec {
  dModel: number;
  nLayers: number;
  leadingDense: number;
  nHeads: number;
  qLoraRank: number;
  kvLoraRank: number;
  qkNopeDim: number;
  qkRopeDim: number;
  vHeadDim: number;
  ffnDim: number;
  expertFfnDim: number;
  expertCount: number;
  expertUsed: number;
  expertShared: number;
  gating: 1 | 2;
  expertGroups: number;
  expertGroupsUsed: number;
  weightsNorm: boolean;
  weightsScale: number;
  expProbsB: boolean;
  vocabSize: number;
  ctxLen: number;
  ropeTheta: number;
  rmsEps: number;
  yarn: { factor: number; original: number; mscaleAllDim: number } | null;
}

const TINY = { dModel: 64, nLayers: 3, leadingDense: 1, nHeads: 4, kvLoraRank: 64, qkNopeDim: 32, qkRopeDim: 16, vHeadDim: 32, ffnDim: 96, expertFfnDim: 32, vocabSize: 512, ctxLen: 2048, ropeTheta: 10000, rmsEps: 1e-6 };
const SMALL = { dModel: 512, nLayers: 6, leadingDense: 1, nHeads: 8, kvLoraRank: 128, qkNopeDim: 64, qkRopeDim: 32, vHeadDim: 64, ffnDim: 1536, expertFfnDim: 256, vocabSize: 8192, ctxLen: 8192, ropeTheta: 10000, rmsEps: 1e-6 };

const V3 = { gating: 2 as const, weightsNorm: true, weightsScale: 2.5, expProbsB: true, expertShared: 1 };
const V2LITE = { qLoraRank: 0, gating: 1 as const, weightsNorm: false, weightsScale: 1, expProbsB: false, expertGroups: 0, expertGroupsUsed: 0 };

export const DEEPSEEK_SYNTHETIC_SPECS: Record<DeepseekSyntheticSize, Record<DeepseekShape, DeepseekSyntheticSpec>> = {
  'deepseek-tiny': {
    v3: { ...TINY, ...V3, qLoraRank: 32, expertCount: 16, expertUsed: 4, expertGroups: 4, expertGroupsUsed: 2, yarn: { factor: 4, original: 256, mscaleAllDim: 1 } },
    'v2-lite': { ...TINY, ...V2LITE, expertCount: 8, expertUsed: 2, expertShared: 2, yarn: { factor: 4, original: 256, mscaleAllDim: 0.707 } },
  },
  'deepseek-small': {
    v3: { ...SMALL, ...V3, qLoraRank: 256, expertCount: 32, expertUsed: 4, expertGroups: 4, expertGroupsUsed: 2, yarn: { factor: 4, original: 2048, mscaleAllDim: 1 } },
    'v2-lite': { ...SMALL, ...V2LITE, expertCount: 32, expertUsed: 4, expertShared: 2, yarn: { factor: 4, original: 2048, mscaleAllDim: 0.707 } },
  },
};
