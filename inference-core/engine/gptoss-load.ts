/**
 * The gpt-oss parts of an Engine: config, K|V page layout (every layer, as
 * llama), weights and the graph factory (load-model.ts picks this by
 * general.architecture).
 *
 * MXFP4 experts are repacked as Q8_0, exactly: an MXFP4 block is an E8M0
 * scale 2^(e−128) and 32 doubled E2M1 values in {0, ±1, ±2, ±3, ±4, ±6, ±8,
 * ±12}; a Q8_0 block with d = that power of two (exact in f16 for
 * 104 ≤ e ≤ 143) and those integers holds the same values, and ggml's
 * MXFP4·Q8_0 dot (Σ ints · e8m0_half(e) · d_act per block) is its Q8_0·Q8_0
 * dot (Σ ints · d · d_act): the engine's Q8_0 kernel computes what llama.cpp
 * computes for these experts, activation quantization included. A block whose
 * scale is outside f16's range is refused (typed error), not approximated.
 */
import type { Backend, KvDType, TensorHandle, WeightHandle } from '../../native/index.ts';
import type { GgufFile, GgufTensor } from '../gguf/index.ts';
import { GgmlType, f16ToF32, f32ToF16Bits, ggmlTypeName } from '../gguf/index.ts';
import { gptOssConfigFromGguf, type GptOssConfig } from '../gptoss-config.ts';
import { kvLayoutOf } from '../kv/kv-pool.ts';
import type { ArchEngineParts } from './engine-parts.ts';
import { unsupportedModel } from './engine-errors.ts';
import { GptOssGraph, gptOssGraphConfig, type GptOssGraphConfig, type GptOssLayerWeights } from './gptoss-graph.ts';
import { uploadTiledBias } from './graph-rows.ts';
import { qkvProjections, uploadEngineMatrix } from './model-weights.ts';
import { ropeScalingFrom } from './rope-scaling.ts';

export type GptOssEngineParts = ArchEngineParts<GptOssConfig, GptOssGraphConfig>;

const MXFP4_INTS = [0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12];

/** MXFP4 blocks (17 bytes: e, 16 nibble pairs) → Q8_0 blocks (34 bytes: f16 d, 32 int8), same values. */
export function mxfp4AsQ8_0(src: Uint8Array, where: string): Uint8Array {
  const blocks = src.length / 17;
  const out = new Uint8Array(blocks * 34);
  const dv = new DataView(out.buffer);
  for (let b = 0; b < blocks; b++) {
    const e = src[b * 17];
    const o = b * 34;
    let any = false;
    for (let j = 0; j < 16; j++) {
      const q = src[b * 17 + 1 + j];
      const lo = MXFP4_INTS[q & 15];
      const hi = MXFP4_INTS[q >> 4];
      out[o + 2 + j] = lo & 0xff;
      out[o + 2 + j + 16] = hi & 0xff;
      if (lo !== 0 || hi !== 0) any = true;
    }
    if (!any) continue; // d = 0
    if (e < 104 || e > 143) unsupportedModel(`${where}: MXFP4 block ${b} has scale 2^${e - 128}, outside f16's range; the engine computes MXFP4 experts as exact Q8_0`);
    dv.setUint16(o, f32ToF16Bits(2 ** (e - 128)), true);
  }
  return out;
}

function vectorF32(t: GgufTensor): Float32Array {
  if (t.type === GgmlType.F32) return new Float32Array(t.data.buffer.slice(t.data.byteOffset, t.data.byteOffset + t.elements * 4));
  if (t.type === GgmlType.F16) return f16ToF32(new Uint16Array(t.data.buffer.slice(t.data.byteOffset, t.data.byteOffset + t.elements * 2)));
  return unsupportedModel(`tensor ${t.name} has GGML type ${ggmlTypeName(t.type)}; gpt-oss vectors are f32 or f16`);
}

export function gptOssEngineParts(backend: Backend, gguf: GgufFile, kvDtype: KvDType): GptOssEngineParts {
  if (!backend.windowAttention) unsupportedModel(`${gguf.path}: the ${backend.name} backend has no sliding-window attention with sinks for gpt-oss; run it on the cpu backend (KVTIER_DEVICE=cpu)`);
  const config = gptOssConfigFromGguf(gguf);
  const c = gptOssGraphConfig(config, ropeScalingFrom(config.ropeScaling, gguf.path));
  const owned: Array<WeightHandle | TensorHandle> = [];
  const dims = (t: GgufTensor, want: number[]) => {
    if (t.dims.length !== want.length || t.dims.some((d, i) => d !== want[i])) unsupportedModel(`tensor ${t.name} has dims [${t.dims}], the config implies [${want}]`);
  };
  const matrix = (name: string, cols: number, rows: number): WeightHandle => {
    const t = gguf.tensor(name);
    dims(t, [cols, rows]);
    const h = uploadEngineMatrix(backend, t, cols, rows);
    owned.push(h);
    return h;
  };
  const vec = (name: string, n: number): Float32Array => {
    const t = gguf.tensor(name);
    dims(t, n === t.elements && t.dims.length === 2 ? t.dims : [n]);
    return vectorF32(t);
  };
  const gain = (name: string, n: number): WeightHandle => {
    const h = backend.uploadWeight('f32', 1, n, new Uint8Array(vec(name, n).buffer));
    owned.push(h);
    return h;
  };
  const tiled = (name: string, n: number): TensorHandle => {
    const h = uploadTiledBias(backend, vec(name, n));
    owned.push(h);
    return h;
  };
  /** One expert's [rows][cols] matrix of a 3D expert tensor [cols, rows, E]. */
  const experts = (name: string, cols: number, rows: number): WeightHandle[] => {
    const t = gguf.tensor(name);
    dims(t, [cols, rows, c.expertCount]);
    const out: WeightHandle[] = [];
    for (let e = 0; e < c.expertCount; e++) {
      let h: WeightHandle;
      if (t.type === GgmlType.MXFP4) {
        if (cols % 32 !== 0) unsupportedModel(`tensor ${name}: MXFP4 rows of ${cols} values are not whole blocks`);
        const per = (rows * cols / 32) * 17;
        h = backend.uploadWeight('q8_0', rows, cols, mxfp4AsQ8_0(t.data.subarray(e * per, (e + 1) * per), name));
      } else {
        const per = t.data.length / c.expertCount;
        h = uploadEngineMatrix(backend, { ...t, dims: [cols, rows], elements: rows * cols, data: t.data.subarray(e * per, (e + 1) * per) }, cols, rows);
      }
      owned.push(h);
      out.push(h);
    }
    return out;
  };
  const qDim = c.heads * c.headDim;
  const kvDim = c.kvHeads * c.headDim;
  const ff = c.expertFfnDim;
  const tokenEmbd = matrix('token_embd.weight', c.dim, c.vocabSize);
  const layers: GptOssLayerWeights[] = [];
  for (let l = 0; l < c.layers; l++) {
    const p = `blk.${l}.`;
    layers.push({
      attnNorm: gain(p + 'attn_norm.weight', c.dim),
      ...qkvProjections(p, c, matrix),
      bq: tiled(p + 'attn_q.bias', qDim),
      bk: tiled(p + 'attn_k.bias', kvDim),
      bv: tiled(p + 'attn_v.bias', kvDim),
      wo: matrix(p + 'attn_output.weight', qDim, c.dim),
      bo: tiled(p + 'attn_output.bias', c.dim),
      sinks: vec(p + 'attn_sinks.weight', c.heads),
      postNorm: gain(p + 'post_attention_norm.weight', c.dim),
      moe: {
        router: matrix(p + 'ffn_gate_inp.weight', c.dim, c.expertCount),
        routerBias: vec(p + 'ffn_gate_inp.bias', c.expertCount),
        gate: experts(p + 'ffn_gate_exps.weight', c.dim, ff),
        up: experts(p + 'ffn_up_exps.weight', c.dim, ff),
        down: experts(p + 'ffn_down_exps.weight', ff, c.dim),
        gateBias: vec(p + 'ffn_gate_exps.bias', ff * c.expertCount),
        upBias: vec(p + 'ffn_up_exps.bias', ff * c.expertCount),
        downBias: vec(p + 'ffn_down_exps.bias', c.dim * c.expertCount),
      },
    });
  }
  const outputNorm = gain('output_norm.weight', c.dim);
  const output = matrix('output.weight', c.dim, c.vocabSize);
  const w = { tokenEmbd, layers, outputNorm, output };
  return {
    config,
    graphConfig: c,
    kvLayout: kvLayoutOf(c.layers, c.kvHeads, c.headDim, kvDtype),
    weights: { tokenEmbd, output, outputNorm, layers: [] },
    ownedTensors: owned,
    graph: (maxRows, maxLogitRows) => new GptOssGraph(backend, c, w, maxRows, maxLogitRows),
  };
}
