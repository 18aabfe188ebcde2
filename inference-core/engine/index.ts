export { Engine, DEFAULT_MAX_BATCH, DEFAULT_PREFILL_CHUNK, type StepItem } from './engine.ts';
export { Sequence } from './sequence.ts';
export { EngineError, type EngineErrorCode } from './engine-errors.ts';
export { loadEngine, resolveModelPath, DEFAULT_POOL_BYTES, type LoadEngineOptions, type LoadedEngine } from './load-model.ts';
export { LlamaGraph, type GraphConfig, type LlamaArchitecture } from './llama-graph.ts';
