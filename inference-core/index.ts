// Model files: GGUF, tokenizers, chat templates, synthetic models, config, fingerprint.
export * from './gguf/index.ts';
export * from './tokenizer/index.ts';
export { ChatTemplate, ChatTemplateError, CHATML_TEMPLATE, CHATML_END_OF_TURN, type ChatMessage, type ToolCall, type ToolSpec, type RenderOptions } from './chat-template.ts';
export { type SegmentedRender } from './chat-template-segments.ts';
export * from './synthetic/index.ts';
export { modelConfigFromGguf, modelTensorNames, type ModelConfig, type ModelArch, type ModelTensorNames, type LayerTensorNames } from './model-config.ts';
export { inspectModel, inspectModelFile, DEEPSEEK4_UNITS_DETAIL, type ModelReport, type QuantMixRow } from './model-report.ts';
export { modelFingerprint, FingerprintError, weightsHash, fingerprintSidecarPath, FINGERPRINT_VERSION, type FingerprintOptions, type FingerprintKvDtype } from './fingerprint.ts';

// Runtime: engine, sequences, paged KV pool, sampler.
export {
  loadEngine,
  resolveModelPath,
  Engine,
  Sequence,
  EngineError,
  DEFAULT_POOL_BYTES,
  DEFAULT_PREFILL_CHUNK,
  DEFAULT_MAX_BATCH,
  type LoadEngineOptions,
  type LoadedEngine,
  type EngineErrorCode,
  type GraphConfig,
  exportUnitBlocks,
  exportUnitTail,
  importUnit,
  unitsCoverState,
  unitServingOf,
} from './engine/index.ts';
export { KvPool, PageAllocator, kvLayoutOf, TOKENS_PER_BLOCK, type KvLayout } from './kv/index.ts';
export { Sampler, Prng, argmax, adjustsLogits, type SamplingOptions } from './sampling/index.ts';
/** Constrained decoding (JSON schema, regex, grammar) and speculative decoding, through the package's door. */
export { constrainedDecoder, GrammarError, grammarOf, masksOf, minReplyTokens, vocabOf, type ConstraintSpec, type ToolCallFormat } from './grammar/index.ts';
export { GrammarCursor, planSpeculativeBatch, SpeculativeSession, type SpeculativeMode } from './speculative/index.ts';
