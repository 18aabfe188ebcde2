/**
 * GGUF → backend weight handles for the deepseek2 graph (deepseek-graph.ts).
 *
 * 3-D tensors are uploaded as one 2-D weight per slice (each slice is
 * contiguous in the GGUF, so a quantized slice is whole rows of whole blocks):
 *   attn_k_b [nope][kvLora][heads]   → wkB[h]: [kvLora rows][nope cols]  (q_abs = W · q_nope)
 *   attn_v_b [kvLora][vDim][heads]   → wvB[h]: [vDim rows][kvLora cols]  (v = W · latent)
 *   ffn_*_exps [cols][rows][experts] → one weight per expert
 * A legacy attn_kv_b [kvLora][heads·(nope+vDim)] is dequantized and split
 * into the same per-head f32 weights (its K part transposed, as the
 * converter does for attn_k_b).
 */
import type { Backend, WeightHandle } from '../../native/index.ts';
import { GgmlType, dequantize, ggmlTypeName, type GgufFile, type GgufTensor } from '../gguf/index.ts';
import { deepseekTensorNames, type DeepseekConfig } from '../deepseek-config.ts';
import { EngineError } from './engine-errors.ts';
import { engineWeightDType } from './model-weights.ts';

export interface DeepseekMoeWeights {
  /** Router [experts rows][d cols] (llama-quantize keeps it F32). */
  router: WeightHandle;
  /** exp_probs_b: selection bias per expert (host), absent in V2 files. */
  probsBias?: Float32Array;
  gate: WeightHandle[];
  up: WeightHandle[];
  down: WeightHandle[];
  shGate?: WeightHandle;
  shUp?: WeightHandle;
  shDown?: WeightHandle;
}

export interface DeepseekLayerWeights {
  attnNorm: WeightHandle;
  wq?: WeightHandle;
  wqA?: WeightHandle;
  qANorm?: WeightHandle;
  wqB?: WeightHandle;
  wkvA: WeightHandle;
  kvANorm: WeightHandle;
  wkB: WeightHandle[];
  wvB: WeightHandle[];
  wo: WeightHandle;
  ffnNorm: WeightHandle;
  dense?: { gate: WeightHandle; up: WeightHandle; down: WeightHandle };
  moe?: DeepseekMoeWeights;
}

export interface DeepseekWeights {
  tokenEmbd: WeightHandle;
  outputNorm: WeightHandle;
  output: WeightHandle;
  layers: DeepseekLayerWeights[];
}

function unsupported(msg: string): never {
  throw new EngineError('KVT_ERR_ENGINE_UNSUPPORTED_MODEL', msg);
}

function f32Values(t: GgufTensor): Float32Array {
  if (t.type === GgmlType.F32) return new Float32Array(t.data.buffer, t.data.byteOffset, t.elements).slice();
  return dequantize(t.type, t.data, t.elements);
}

/** Every handle of the model (each once), for the engine to free. */
export function deepseekHandles(w: DeepseekWeights): WeightHandle[] {
  const all = new Set<WeightHandle>([w.tokenEmbd, w.outputNorm, w.output]);
  for (const l of w.layers) {
    for (const h of [l.attnNorm, l.wq, l.wqA, l.qANorm, l.wqB, l.wkvA, l.kvANorm, l.wo, l.ffnNorm, ...l.wkB, ...l.wvB]) if (h) all.add(h);
    if (l.dense) for (const h of [l.dense.gate, l.dense.up, l.dense.down]) all.add(h);
    if (l.moe) for (const h of [l.moe.router, ...l.moe.gate, ...l.moe.up, ...l.moe.down, l.moe.shGate, l.moe.shUp, l.moe.shDown]) if (h) all.add(h);
  }
  return [...all];
}

export function uploadDeepseekWeights(backend: Backend, g: GgufFile, c: DeepseekConfig): DeepseekWeights {
  const names = deepseekTensorNames(c);
  const dtypeOf = (t: GgufTensor) => {
    const dt = engineWeightDType(t.type);
    if (!dt) unsupported(`tensor ${t.name} has GGML type ${ggmlTypeName(t.type)}, which the engine does not compute`);
    return dt;
  };
  // config validation already checked every shape
  const matrix = (name: string): WeightHandle => {
    const t = g.tensor(name);
    return backend.uploadWeight(dtypeOf(t), t.dims[1], t.dims[0], t.data);
  };
  const slices = (name: string): WeightHandle[] => {
    const t = g.tensor(name);
    const [cols, rows, n] = t.dims;
    const bytes = t.data.byteLength / n;
    const dt = dtypeOf(t);
    return Array.from({ length: n }, (_, i) => backend.uploadWeight(dt, rows, cols, t.data.subarray(i * bytes, (i + 1) * bytes)));
  };
  const f32Weight = (rows: number, cols: number, v: Float32Array) => backend.uploadWeight('f32', rows, cols, new Uint8Array(v.buffer, v.byteOffset, v.byteLength));
  const gain = (name: string): WeightHandle => {
    const v = f32Values(g.tensor(name));
    return f32Weight(1, v.length, v);
  };

  const layers: DeepseekLayerWeights[] = names.layers.map((n) => {
    let wkB: WeightHandle[];
    let wvB: WeightHandle[];
    if (n.kB) {
      wkB = slices(n.kB);
      wvB = slices(n.vB!);
    } else {
      const kv = f32Values(g.tensor(n.kvB!));
      const R = c.kvLoraRank;
      const per = c.qkNopeDim + c.vHeadDim;
      wkB = [];
      wvB = [];
      for (let h = 0; h < c.nHeads; h++) {
        const k = new Float32Array(R * c.qkNopeDim);
        for (let i = 0; i < c.qkNopeDim; i++) for (let j = 0; j < R; j++) k[j * c.qkNopeDim + i] = kv[(h * per + i) * R + j];
        wkB.push(f32Weight(R, c.qkNopeDim, k));
        wvB.push(f32Weight(c.vHeadDim, R, kv.slice((h * per + c.qkNopeDim) * R, (h + 1) * per * R)));
      }
    }
    const layer: DeepseekLayerWeights = {
      attnNorm: gain(n.attnNorm),
      ...(n.q ? { wq: matrix(n.q) } : { wqA: matrix(n.qA!), qANorm: gain(n.qANorm!), wqB: matrix(n.qB!) }),
      wkvA: matrix(n.kvAMqa),
      kvANorm: gain(n.kvANorm),
      wkB,
      wvB,
      wo: matrix(n.attnOutput),
      ffnNorm: gain(n.ffnNorm),
    };
    if (n.ffnGate) layer.dense = { gate: matrix(n.ffnGate), up: matrix(n.ffnUp!), down: matrix(n.ffnDown!) };
    else {
      const bias = g.tensors.get(n.expProbsB!);
      layer.moe = {
        router: matrix(n.gateInp!),
        ...(bias ? { probsBias: f32Values(bias) } : {}),
        gate: slices(n.gateExps!),
        up: slices(n.upExps!),
        down: slices(n.downExps!),
        ...(n.gateShexp ? { shGate: matrix(n.gateShexp), shUp: matrix(n.upShexp!), shDown: matrix(n.downShexp!) } : {}),
      };
    }
    return layer;
  });
  const tokenEmbd = matrix(names.tokenEmbd);
  return {
    tokenEmbd,
    outputNorm: gain(names.outputNorm),
    output: c.tiedEmbeddings ? tokenEmbd : matrix(names.output),
    layers,
  };
}
