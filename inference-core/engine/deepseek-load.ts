/**
 * The deepseek2 parts of an Engine: config, latent KV layout, weights and the
 * graph factory (load-model.ts picks this by general.architecture).
 */
import type { Backend, KvDType, WeightHandle } from '../../native/index.ts';
import type { GgufFile } from '../gguf/index.ts';
import { deepseekConfigFromGguf, type DeepseekConfig } from '../deepseek-config.ts';
import { mlaKvLayoutOf, type KvLayout } from '../kv/kv-pool.ts';
import type { ForwardGraph } from './engine-parts.ts';
import { EngineError } from './engine-errors.ts';
import { DeepseekGraph, deepseekGraphConfig, type DeepseekGraphConfig } from './deepseek-graph.ts';
import { deepseekHandles, uploadDeepseekWeights } from './deepseek-weights.ts';
import type { ModelWeights } from './llama-graph.ts';

export interface DeepseekEngineParts {
  config: DeepseekConfig;
  graphConfig: DeepseekGraphConfig;
  kvLayout: KvLayout;
  /** The handles the engine's destroy() frees through ModelWeights (embedding, head, final norm). */
  weights: ModelWeights;
  ownedTensors: WeightHandle[];
  graph: (maxRows: number, maxLogitRows: number) => ForwardGraph;
}

export function deepseekEngineParts(backend: Backend, gguf: GgufFile, kvDtype: KvDType): DeepseekEngineParts {
  if (!backend.createMlaKvPool || !backend.mlaKvWrite || !backend.mlaAttention) {
    // refuse before uploading any weight
    throw new EngineError('KVT_ERR_ENGINE_UNSUPPORTED_MODEL', `${gguf.path}: the ${backend.name} backend has no MLA ops for deepseek2 models; run it on the cpu backend (KVTIER_DEVICE=cpu)`);
  }
  const config = deepseekConfigFromGguf(gguf);
  const graphConfig = deepseekGraphConfig(config, gguf.path);
  const kvLayout = mlaKvLayoutOf(config.nLayers, graphConfig.latentDim, kvDtype);
  const w = uploadDeepseekWeights(backend, gguf, config);
  return {
    config,
    graphConfig,
    kvLayout,
    weights: { tokenEmbd: w.tokenEmbd, output: w.output, outputNorm: w.outputNorm, layers: [] },
    ownedTensors: deepseekHandles(w),
    graph: (maxRows, maxLogitRows) => new DeepseekGraph(backend, graphConfig, w, maxRows, maxLogitRows),
  };
}
