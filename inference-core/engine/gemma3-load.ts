/**
 * The gemma3 parts of an Engine: config, K|V page layout (every layer, as
 * llama), weights and the graph factory (load-model.ts picks this by
 * general.architecture).
 */
import type { Backend, KvDType, WeightHandle } from '../../native/index.ts';
import type { GgufFile } from '../gguf/index.ts';
import { GgmlType, ggmlTypeName } from '../gguf/index.ts';
import { gemma3ConfigFromGguf, type Gemma3Config } from '../gemma3-config.ts';
import { kvLayoutOf } from '../kv/kv-pool.ts';
import type { ArchEngineParts } from './engine-parts.ts';
import { unsupportedModel } from './engine-errors.ts';
import { Gemma3Graph, gemma3GraphConfig, type Gemma3GraphConfig, type Gemma3LayerWeights } from './gemma3-graph.ts';
import { qkNormAttentionWeights, uploadEngineMatrix } from './model-weights.ts';
import { ropeScalingFrom } from './rope-scaling.ts';

export type Gemma3EngineParts = ArchEngineParts<Gemma3Config, Gemma3GraphConfig>;

export function gemma3EngineParts(backend: Backend, gguf: GgufFile, kvDtype: KvDType): Gemma3EngineParts {
  if (!backend.windowAttention || !backend.geglu || !backend.scale) {
    unsupportedModel(`${gguf.path}: the ${backend.name} backend has no sliding-window attention / geglu ops for gemma3; run it on the cpu backend (KVTIER_DEVICE=cpu)`);
  }
  const config = gemma3ConfigFromGguf(gguf);
  const graphConfig = gemma3GraphConfig(config, ropeScalingFrom(config.ropeScaling, gguf.path));
  const c = graphConfig;
  const owned: WeightHandle[] = [];
  const matrix = (name: string, cols: number, rows: number): WeightHandle => {
    const t = gguf.tensor(name);
    if (t.dims.length !== 2 || t.dims[0] !== cols || t.dims[1] !== rows) unsupportedModel(`tensor ${name} has dims [${t.dims}], the config implies [${cols}, ${rows}]`);
    const h = uploadEngineMatrix(backend, t, cols, rows);
    owned.push(h);
    return h;
  };
  const gain = (name: string, n: number): WeightHandle => {
    const t = gguf.tensor(name);
    if (t.dims.length !== 1 || t.dims[0] !== n) unsupportedModel(`tensor ${name} has dims [${t.dims}], the config implies [${n}]`);
    if (t.type !== GgmlType.F32) unsupportedModel(`norm tensor ${name} has GGML type ${ggmlTypeName(t.type)}; gemma3 norms are f32`);
    const h = backend.uploadWeight('f32', 1, n, t.data);
    owned.push(h);
    return h;
  };
  const tokenEmbd = matrix('token_embd.weight', c.dim, c.vocabSize);
  const layers: Gemma3LayerWeights[] = [];
  for (let l = 0; l < c.layers; l++) {
    const p = `blk.${l}.`;
    layers.push({
      attnNorm: gain(p + 'attn_norm.weight', c.dim),
      ...qkNormAttentionWeights(p, c, matrix, gain),
      attnPostNorm: gain(p + 'post_attention_norm.weight', c.dim),
      ffnNorm: gain(p + 'ffn_norm.weight', c.dim),
      wGate: matrix(p + 'ffn_gate.weight', c.dim, c.ffDim),
      wUp: matrix(p + 'ffn_up.weight', c.dim, c.ffDim),
      wDown: matrix(p + 'ffn_down.weight', c.ffDim, c.dim),
      ffnPostNorm: gain(p + 'post_ffw_norm.weight', c.dim),
    });
  }
  const outputNorm = gain('output_norm.weight', c.dim);
  const output = config.tiedEmbeddings ? tokenEmbd : matrix('output.weight', c.dim, c.vocabSize);
  const w = { tokenEmbd, layers, outputNorm, output };
  return {
    config,
    graphConfig,
    kvLayout: kvLayoutOf(c.layers, c.kvHeads, c.headDim, kvDtype),
    weights: { tokenEmbd, output, outputNorm, layers: [] },
    ownedTensors: owned,
    graph: (maxRows, maxLogitRows) => new Gemma3Graph(backend, graphConfig, w, maxRows, maxLogitRows),
  };
}
