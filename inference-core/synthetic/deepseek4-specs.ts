/**
 * Shapes of the synthetic DeepSeek V4 (GGUF `deepseek4`) models: V4-Flash's
 * structure with its widths scaled down.
 *
 * What llama.cpp (node-llama-cpp 3.21.1's llama.cpp, src/models/deepseek4.cpp)
 * fixes and the specs therefore keep: 4 hyper-connection streams (it asserts
 * hc == 4), compression ratios drawn from {0, 4, 128} only (4 = CSA with the
 * lightning indexer, 128 = HCA; the loader rejects any other), one MTP block at
 * most (its MTP graph asserts n_layer_nextn == 1), rope on the last `ropeDim`
 * dims of each head, one KV head shared by all query heads (head_count_kv 1),
 * key and value of one head the same vector (key_length == value_length), and
 * an indexer key length that is a multiple of 64: llama.cpp always rotates the
 * indexer cache by a Hadamard matrix of the largest power-of-two size ≥ 64 that
 * divides it (and the main cache too when head and indexer lengths are equal).
 *
 * Tiny: windows and top-k well under the test prompts (1, 65, 300, 1000+ tokens)
 * so they cross the SWA window (16), many CSA groups (4 tokens) and several HCA
 * groups (128 tokens), with the indexer choosing 8 of up to 250 CSA entries.
 */
export type Deepseek4SyntheticSize = 'deepseek4-tiny' | 'deepseek4-small';

export interface Deepseek4SyntheticSpec {
  dModel: number;
  /** trunk layers (block_count = nLayers + nMtp) */
  nLayers: number;
  nMtp: 0 | 1;
  hcMult: 4;
  sinkhornIters: number;
  hcEps: number;
  nHeads: number;
  headDim: number;
  ropeDim: number;
  qLoraRank: number;
  oGroups: number;
  oLoraRank: number;
  nSwa: number;
  /** per block (trunk then MTP); each 0, 4 or 128 */
  compressRatios: number[];
  compressRopeBase: number;
  indexerHeads: number;
  indexerDim: number;
  indexerTopK: number;
  expertCount: number;
  expertUsed: number;
  expertShared: number;
  expertFfnDim: number;
  /** the first hashLayers trunk layers route by token id (ffn_gate_tid2eid) */
  hashLayers: number;
  weightsScale: number;
  weightsNorm: boolean;
  /** SwiGLU limit of routed and shared experts */
  swigluClamp: number;
  vocabSize: number;
  ctxLen: number;
  ropeTheta: number;
  rmsEps: number;
  /** YaRN of the compressed layers (llama.cpp applies rope scaling only where the ratio is not 0) */
  yarn: { factor: number; original: number; betaFast: number; betaSlow: number } | null;
}

export const DEEPSEEK4_SYNTHETIC_SPECS: Record<Deepseek4SyntheticSize, Deepseek4SyntheticSpec> = {
  'deepseek4-tiny': {
    dModel: 64,
    nLayers: 5,
    nMtp: 1,
    hcMult: 4,
    sinkhornIters: 20,
    hcEps: 1e-6,
    nHeads: 4,
    headDim: 32,
    ropeDim: 16,
    qLoraRank: 32,
    oGroups: 2,
    oLoraRank: 16,
    nSwa: 16,
    compressRatios: [0, 4, 128, 4, 128, 0],
    compressRopeBase: 160000,
    indexerHeads: 2,
    indexerDim: 64,
    indexerTopK: 8,
    expertCount: 8,
    expertUsed: 2,
    expertShared: 1,
    expertFfnDim: 32,
    hashLayers: 2,
    weightsScale: 1.5,
    weightsNorm: true,
    swigluClamp: 1.5,
    vocabSize: 512,
    ctxLen: 4096,
    ropeTheta: 10000,
    rmsEps: 1e-6,
    yarn: { factor: 4, original: 512, betaFast: 32, betaSlow: 1 },
  },
  'deepseek4-small': {
    dModel: 512,
    nLayers: 8,
    nMtp: 1,
    hcMult: 4,
    sinkhornIters: 20,
    hcEps: 1e-6,
    nHeads: 8,
    headDim: 128,
    ropeDim: 32,
    qLoraRank: 256,
    oGroups: 4,
    oLoraRank: 64,
    nSwa: 128,
    compressRatios: [0, 0, 4, 128, 4, 128, 4, 128, 0],
    compressRopeBase: 160000,
    indexerHeads: 4,
    indexerDim: 64,
    indexerTopK: 64,
    expertCount: 32,
    expertUsed: 4,
    expertShared: 1,
    expertFfnDim: 256,
    hashLayers: 2,
    weightsScale: 1.5,
    weightsNorm: true,
    swigluClamp: 1.5,
    vocabSize: 8192,
    ctxLen: 65536,
    ropeTheta: 10000,
    rmsEps: 1e-6,
    yarn: { factor: 4, original: 8192, betaFast: 32, betaSlow: 1 },
  },
};
