export { Engine, DEFAULT_MAX_BATCH, DEFAULT_PREFILL_CHUNK, type StepItem } from './engine.ts';
export { Sequence } from './sequence.ts';
export { EngineError, type EngineErrorCode } from './engine-errors.ts';
export { loadEngine, resolveModelPath, DEFAULT_POOL_BYTES, type LoadEngineOptions, type LoadedEngine } from './load-model.ts';
export { LlamaGraph, type GraphConfig, type LlamaArchitecture } from './llama-graph.ts';
export { Deepseek4Model } from './deepseek4-forward.ts';
export { Deepseek4State } from './deepseek4-state.ts';
export { readDeepseek4Config, type Deepseek4Config } from './deepseek4-config.ts';
export type { Deepseek4Ablation, Deepseek4Stats } from './deepseek4-attention.ts';
