/**
 * deepseek4 weights as f32 arrays (dequantized once at load) plus the I32
 * hash-routing tables, under their GGUF names. Every tensor llama.cpp's
 * loader requires for the trunk must be present (typed error otherwise); the
 * MTP block's tensors are loaded when the file has one.
 */
import { GgmlType, dequantize, dequantizeQ8_0, f16ToF32, f32ToF16, quantizeQ8_0, type GgufFile } from '../gguf/index.ts';
import { EngineError } from './engine-errors.ts';
import type { Deepseek4Config } from './deepseek4-config.ts';
import { matVec } from './deepseek4-math.ts';

/**
 * The activation a ggml CPU mat-mul feeds a weight of `type` (its vec_dot_type):
 * F32 as is, F16 rounded to f16, Q8_0 quantized to Q8_0 blocks of 32.
 */
function asGgmlActivation(type: GgmlType, x: Float32Array): Float32Array {
  if (type === GgmlType.F16) return f16ToF32(f32ToF16(x));
  if (type === GgmlType.Q8_0) return dequantizeQ8_0(quantizeQ8_0(x), x.length);
  return x;
}

export class Deepseek4Weights {
  private readonly f32 = new Map<string, Float32Array>();
  private readonly i32 = new Map<string, Int32Array>();
  private readonly types = new Map<string, GgmlType>();

  constructor(g: GgufFile, readonly cfg: Deepseek4Config) {
    for (const [name, t] of g.tensors) {
      if (t.type === GgmlType.I32) {
        this.i32.set(name, new Int32Array(t.data.slice().buffer));
        continue;
      }
      if (t.type !== GgmlType.F32 && t.type !== GgmlType.F16 && t.type !== GgmlType.Q8_0) {
        throw new EngineError('KVT_ERR_ENGINE_UNSUPPORTED_MODEL', `deepseek4 tensor ${name}: type ${GgmlType[t.type]} is not supported by the deepseek4 path yet (F32, F16, Q8_0 are)`);
      }
      this.types.set(name, t.type);
      if (t.data.byteLength === 0) throw new EngineError('KVT_ERR_ENGINE_UNSUPPORTED_MODEL', `deepseek4 tensor ${name}: its type cannot be computed here`);
      this.f32.set(name, t.type === GgmlType.F32 ? new Float32Array(t.data.slice().buffer) : dequantize(t.type, t.data, t.elements));
    }
    for (let l = 0; l < cfg.nLayer; l++) {
      this.get(`blk.${l}.attn_q_a.weight`);
      if (l < cfg.hashLayers) this.table(`blk.${l}.ffn_gate_tid2eid.weight`);
    }
    this.get('output_hc_fn.weight');
  }

  get(name: string): Float32Array {
    const w = this.f32.get(name);
    if (!w) throw new EngineError('KVT_ERR_ENGINE_UNSUPPORTED_MODEL', `deepseek4 tensor ${name} is missing; the file is incomplete or not a deepseek4 model`);
    return w;
  }

  /**
   * out[r] = W[rowOff + r] · x[xOff .. xOff + nIn) for a [nIn, ·] weight, with x as
   * llama.cpp's CPU mat-mul sees it for the weight's type (see asGgmlActivation).
   */
  mv(name: string, nIn: number, nOut: number, x: Float32Array, xOff = 0, out: Float32Array = new Float32Array(nOut), rowOff = 0): Float32Array {
    const a = asGgmlActivation(this.types.get(name) ?? GgmlType.F32, x.subarray(xOff, xOff + nIn));
    return matVec(this.get(name), nIn, nOut, a, 0, out, rowOff);
  }

  has(name: string): boolean {
    return this.f32.has(name);
  }

  table(name: string): Int32Array {
    const w = this.i32.get(name);
    if (!w) throw new EngineError('KVT_ERR_ENGINE_UNSUPPORTED_MODEL', `deepseek4 tensor ${name} (I32 hash-routing table) is missing`);
    return w;
  }
}
