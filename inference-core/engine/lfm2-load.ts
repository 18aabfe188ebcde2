/**
 * The lfm2 parts of an Engine: config, a K|V page layout over the attention
 * layers only (the block-concatenable part of its state), weights and the
 * graph factory (load-model.ts picks this by general.architecture).
 */
import type { Backend, KvDType, WeightHandle } from '../../native/index.ts';
import type { GgufFile } from '../gguf/index.ts';
import { GgmlType, ggmlTypeName } from '../gguf/index.ts';
import { lfm2ConfigFromGguf, type Lfm2Config } from '../lfm2-config.ts';
import { kvLayoutOf } from '../kv/kv-pool.ts';
import type { ArchEngineParts } from './engine-parts.ts';
import { unsupportedModel } from './engine-errors.ts';
import { Lfm2Graph, lfm2GraphConfig, type Lfm2GraphConfig, type Lfm2LayerWeights } from './lfm2-graph.ts';
import { qkNormAttentionWeights, uploadEngineMatrix } from './model-weights.ts';

export type Lfm2EngineParts = ArchEngineParts<Lfm2Config, Lfm2GraphConfig>;

export function lfm2EngineParts(backend: Backend, gguf: GgufFile, kvDtype: KvDType): Lfm2EngineParts {
  const config = lfm2ConfigFromGguf(gguf);
  const c = lfm2GraphConfig(config);
  const owned: WeightHandle[] = [];
  const tensor = (name: string, dims: number[]) => {
    const t = gguf.tensor(name);
    if (t.dims.length !== dims.length || t.dims.some((x, i) => x !== dims[i])) unsupportedModel(`tensor ${name} has dims [${t.dims}], the config implies [${dims}]`);
    return t;
  };
  const matrix = (name: string, cols: number, rows: number): WeightHandle => {
    const t = tensor(name, [cols, rows]);
    const h = uploadEngineMatrix(backend, t, cols, rows);
    owned.push(h);
    return h;
  };
  const f32 = (name: string, dims: number[]): Float32Array => {
    const t = tensor(name, dims);
    if (t.type !== GgmlType.F32) unsupportedModel(`tensor ${name} has GGML type ${ggmlTypeName(t.type)}; lfm2 norms and convolution taps are f32`);
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
        attn: qkNormAttentionWeights(p, c, matrix, gain),
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
  if (attnLayers === 0) unsupportedModel(`${gguf.path}: an lfm2 file without attention layers`);
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
