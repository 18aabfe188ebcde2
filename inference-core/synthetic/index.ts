export { ensureSyntheticModel, syntheticModelPath, SyntheticModelError, SYNTHETIC_GENERATOR_VERSION, type SyntheticOptions } from './synthetic-model.ts';
export { SYNTHETIC_SPECS, type SyntheticSpec, type SyntheticName, type SyntheticArch, type SyntheticWeightType, type SyntheticTokenizerKind } from './synthetic-specs.ts';
export { loadCorpus, CHATML_SPECIALS, CORPUS_DIR } from './synthetic-vocab.ts';
export { Xoshiro128, seedFromString } from './prng.ts';
export { SYNTHETIC_WEIGHT_TYPES, SYNTHETIC_FILE_TYPE, syntheticTensorTypes, useMoreBits } from './quant-mix.ts';
