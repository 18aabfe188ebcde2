/**
 * The lfm2 parts of an Engine: config, a K|V page layout over the attention
 * layers only (the block-concatenable part of its state), weights and the
 * graph factory (load-model.ts picks this by general.architecture).
 */
import type { Backend, KvDType, WeightHandle } from '../../native/index.ts';
import type { GgufFile } from '../gguf/index.ts';
import { GgmlType, ggmlTypeName } from '../gguf/index.ts';
import { lfm2ConfigFromGguf, type Lfm2Config } from '../lfm2-config.ts';
import { kvLayoutOf, type KvLayout } from '../kv/kv-pool.ts';
import type { ForwardGraph } from './engine.ts';
import { EngineError } from './engine-errors.ts';
import { Lfm2Graph, lfm2GraphConfig, type Lfm2GraphConfig, type Lfm2LayerWeights } from './lfm2-graph.ts';
import type { ModelWeights } from './llama-graph.ts';
import { engineWeightDType } from './model-weights.ts';

export interface Lfm2EngineParts {
  config: Lfm2Config;
  graphConfig: Lfm2GraphConfig;
  kvLayout: KvLayout;
  weights: ModelWeights;
  ownedTensors: WeightHandle[];
  graph: (maxRows: number, maxLogitRows: number) => ForwardGraph;
}

function unsupported(msg: string): never {
  throw new EngineError('KVT_ERR_ENGINE_UNSUPPORTED_MODEL', msg);
}

export function lfm2EngineParts(backend: Backend, gguf: GgufFile, kvDtype: KvDType): Lfm2EngineParts {
  const config = lfm2ConfigFromGguf(gguf);
  const c = lfm2GraphConfig(config);
  const qDim = c.heads * c.headDim;
  const kvDim = c.kvHeads * c.headDim;
  const owned: WeightHandle[] = [];
  const tensor = (name: string, dims: number[]) => {
    const t = gguf.tensor(name);
    if (t.dims.length !== dims.length || t.dims.some((x, i) => x !== dims[i])) unsupported(`tensor ${name} has dims [${t.dims}], the config implies [${dims}]`);
    return t;
  };
  const matrix = (name: string, cols: number, rows: number): WeightHandle => {
    const t = tensor(name, [cols, rows]);
    const dtype = engineWeightDType(t.type);
    if (!dtype) unsupported(`tensor ${name} has GGML type ${ggmlTypeName(t.type)}, which the engine does not compute`);
    const h = backend.uploadWeight(dtype, rows, cols, t.data);
    owned.push(h);
    return h;
  };
  const f32 = (name: string, dims: number[]): Float32Array => {
    const t = tensor(name, dims);
    if (t.type !== GgmlType.F32) unsupported(`tensor ${name} has GGML type ${ggmlTypeName(t.type)}; lfm2 norms and convolution taps are f32`);
    return new Float32Array(t.data.buffer, t.data.byteOffset, t.elements).slice();
  };
  const gain = (name: string, n: number): WeightHandle => {
    const v = f32(name, [n]);
    const h = backend.uploadWeight('f32', 1, n, new Uint8Array(v.buffer));
    owned.push(h);
    return h;
  };
  const tokenEmbd = matrix('token_embd.weight', c.dim, c.vocabSize);
  const layers: Lfm2LayerWeights[] = [];
  for (let l = 0; l < c.layers; l++) {
    const p = `blk.${l}.`;
    const common = {
      attnNorm: gain(p + 'attn_norm.weight', c.dim),
      ffnNorm: gain(p + 'ffn_norm.weight', c.dim),
      wGate: matrix(p + 'ffn_gate.weight', c.dim, c.ffDim),
      wUp: matrix(p + 'ffn_up.weight', c.dim, c.ffDim),
      wDown: matrix(p + 'ffn_down.weight', c.ffDim, c.dim),
    };
    if (c.poolLayer[l] >= 0) {
      layers.push({
        ...common,
        attn: {
          wq: matrix(p + 'attn_q.weight', c.dim, qDim),
          wk: matrix(p + 'attn_k.weight', c.dim, kvDim),
          wv: matrix(p + 'attn_v.weight', c.dim, kvDim),
          qNorm: gain(p + 'attn_q_norm.weight', c.headDim),
          kNorm: gain(p + 'attn_k_norm.weight', c.headDim),
          wo: matrix(p + 'attn_output.weight', qDim, c.dim),
        },
      });
    } else {
      layers.push({
        ...common,
        conv: {
          inProj: matrix(p + 'shortconv.in_proj.weight', c.dim, 3 * c.dim),
          outProj: matrix(p + 'shortconv.out_proj.weight', c.dim, c.dim),
          taps: f32(p + 'shortconv.conv.weight', [c.convL, c.dim]),
        },
      });
    }
  }
  const outputNorm = gain('token_embd_norm.weight', c.dim);
  const output = config.tiedEmbeddings ? tokenEmbd : matrix('output.weight', c.dim, c.vocabSize);
  const attnLayers = c.poolLayer.filter((p) => p >= 0).length;
  if (attnLayers === 0) unsupported(`${gguf.path}: an lfm2 file without attention layers`);
  const w = { tokenEmbd, layers, outputNorm, output };
  return {
    config,
    graphConfig: c,
    kvLayout: kvLayoutOf(attnLayers, c.kvHeads, c.headDim, kvDtype),
    weights: { tokenEmbd, output, outputNorm, layers: [] },
    ownedTensors: owned,
    graph: (maxRows, maxLogitRows) => new Lfm2Graph(backend, c, w, maxRows, maxLogitRows),
  };
}
