/**
 * deepseek4 weights as f32 arrays (dequantized once at load) plus the I32
 * hash-routing tables, under their GGUF names. Every tensor llama.cpp's
 * loader requires for the trunk must be present (typed error otherwise); the
 * MTP block's tensors are loaded when the file has one.
 */
import { GgmlType, dequantize, type GgufFile } from '../gguf/index.ts';
import { EngineError } from './engine-errors.ts';
import type { Deepseek4Config } from './deepseek4-config.ts';

export class Deepseek4Weights {
  private readonly f32 = new Map<string, Float32Array>();
  private readonly i32 = new Map<string, Int32Array>();

  constructor(g: GgufFile, readonly cfg: Deepseek4Config) {
    for (const [name, t] of g.tensors) {
      if (t.type === GgmlType.I32) {
        this.i32.set(name, new Int32Array(t.data.slice().buffer));
        continue;
      }
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

  has(name: string): boolean {
    return this.f32.has(name);
  }

  table(name: string): Int32Array {
    const w = this.i32.get(name);
    if (!w) throw new EngineError('KVT_ERR_ENGINE_UNSUPPORTED_MODEL', `deepseek4 tensor ${name} (I32 hash-routing table) is missing`);
    return w;
  }
}
