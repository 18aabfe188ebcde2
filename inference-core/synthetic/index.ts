export { ensureSyntheticModel, syntheticModelPath, SyntheticModelError, SYNTHETIC_GENERATOR_VERSION, type SyntheticOptions } from './synthetic-model.ts';
export { SYNTHETIC_SPECS, type SyntheticSpec, type SyntheticName, type SyntheticArch, type SyntheticWeightType, type SyntheticTokenizerKind } from './synthetic-specs.ts';
export { loadCorpus, CHATML_SPECIALS, CORPUS_DIR } from './synthetic-vocab.ts';
export { Xoshiro128, seedFromString } from './prng.ts';
export { SYNTHETIC_WEIGHT_TYPES, SYNTHETIC_FILE_TYPE, syntheticTensorTypes, useMoreBits } from './quant-mix.ts';
export { ensureDeepseek4Model, deepseek4ModelPath, DEEPSEEK4_WEIGHT_TYPES, GATING_SQRT_SOFTPLUS, type Deepseek4WeightType, type Deepseek4SyntheticOptions } from './deepseek4-synthetic.ts';
export { DEEPSEEK4_SYNTHETIC_SPECS, type Deepseek4SyntheticSize, type Deepseek4SyntheticSpec } from './deepseek4-specs.ts';
