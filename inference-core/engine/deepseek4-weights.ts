/**
 * deepseek4 weights as f32 arrays (dequantized once at load) plus the I32
 * hash-routing tables, under their GGUF names. Every tensor llama.cpp's
 * loader requires for the trunk must be present (typed error otherwise); the
 * MTP block's tensors are loaded when the file has one.
 */
import { GgmlType, SUPPORTED_GGML_TYPES, bf16ToF32, dequantize, f16BitsToF32, f16ToF32, f32ToBf16, f32ToF16, f32ToF16Bits, type GgufFile, type GgufTensor } from '../gguf/index.ts';
import { actRoundTrip } from '../../native/index.ts';
import { EngineError } from './engine-errors.ts';
import type { Deepseek4Config } from './deepseek4-config.ts';
import { matVec } from './deepseek4-math.ts';
import type { Deepseek4NativeMatVec } from './deepseek4-native.ts';

const Q8_0_ACT = new Set([GgmlType.Q4_0, GgmlType.Q5_0, GgmlType.Q8_0, GgmlType.IQ4_NL, GgmlType.MXFP4, GgmlType.Q4_1, GgmlType.Q5_1]);
const Q8_K_ACT = new Set([GgmlType.Q2_K, GgmlType.Q3_K, GgmlType.Q4_K, GgmlType.Q5_K, GgmlType.Q6_K, GgmlType.IQ4_XS]);

/**
 * quantize_row_q8_K_ref then back to f32: per 256, scale −127/x_absmax, nearest-even ints capped at 127.
 * The reference twin of native actRoundTrip('q8_K') (native/src/ops/act-roundtrip.h).
 */
export function roundTripQ8K(x: Float32Array): Float32Array {
  const f = Math.fround;
  const out = new Float32Array(x.length);
  for (let b = 0; b < x.length; b += 256) {
    let amax = 0;
    let max = 0;
    for (let j = 0; j < 256; j++) {
      const ax = Math.abs(x[b + j]!);
      if (ax > amax) {
        amax = ax;
        max = x[b + j]!;
      }
    }
    if (amax === 0) continue;
    const iscale = f(-127 / max);
    const d = f(1 / iscale);
    for (let j = 0; j < 256; j++) {
      const q = Math.min(127, f(f(iscale * x[b + j]!) + 12582912) - 12582912);
      out[b + j] = f(d * q);
    }
  }
  return out;
}

/**
 * The activation a ggml CPU mat-mul feeds a weight of `type` (its vec_dot_type):
 * F32 as is, F16 / BF16 rounded, Q8_0-family weights (Q4_0, Q5_0, Q8_0, IQ4_NL,
 * MXFP4) Q8_0 blocks of 32, K-quants Q8_K blocks of 256. Q4_1 / Q5_1 take Q8_1
 * in ggml (same values, plus an f16 block sum): approximated by Q8_0 here.
 */
function asGgmlActivation(type: GgmlType, x: Float32Array, scratch: Float32Array | null): Float32Array {
  if (type === GgmlType.F16) return f16ToF32(f32ToF16(x));
  if (type === GgmlType.BF16) return bf16ToF32(f32ToBf16(x));
  // the native twin into a reused buffer is ~10× faster; in TypeScript (allocating) a prefill spent a quarter of its time here
  if (Q8_0_ACT.has(type)) return (scratch && actRoundTrip('q8_0', x, scratch)) || roundTripQ8_0(x);
  if (Q8_K_ACT.has(type)) return (scratch && actRoundTrip('q8_K', x, scratch)) || roundTripQ8K(x);
  return x;
}

const MXFP4_VALUES = [0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12];

/** dequantize_row_mxfp4: per 32, scale 2^(e−128) (E8M0, halved), low nibbles then high nibbles. */
export function dequantizeMxfp4(bytes: Uint8Array, elements: number): Float32Array {
  const out = new Float32Array(elements);
  for (let b = 0; b < elements / 32; b++) {
    const o = b * 17;
    const e = bytes[o]!;
    const d = e < 2 ? 2 ** (-128 + e) : 2 ** (e - 128);
    for (let j = 0; j < 16; j++) {
      const q = bytes[o + 1 + j]!;
      out[b * 32 + j] = MXFP4_VALUES[q & 15]! * d;
      out[b * 32 + j + 16] = MXFP4_VALUES[q >> 4]! * d;
    }
  }
  return out;
}

function toF32(t: GgufTensor): Float32Array {
  return t.type === GgmlType.F32 ? new Float32Array(t.data.slice().buffer) : t.type === GgmlType.MXFP4 ? dequantizeMxfp4(t.data, t.elements) : dequantize(t.type, t.data, t.elements);
}

/**
 * quantize_row_q8_0_ref then dequantize_row_q8_0, in one pass (what quantizeQ8_0 + dequantizeQ8_0 give, bit for bit).
 * The reference twin of native actRoundTrip('q8_0') (native/src/ops/act-roundtrip.h).
 */
export function roundTripQ8_0(x: Float32Array): Float32Array {
  const f = Math.fround;
  const out = new Float32Array(x.length);
  for (let b = 0; b < x.length; b += 32) {
    let amax = 0;
    for (let j = 0; j < 32; j++) {
      const a = Math.abs(x[b + j]!);
      if (a > amax) amax = a;
    }
    const d = f(amax / 127);
    const id = d !== 0 ? f(1 / d) : 0;
    const dh = f16BitsToF32(f32ToF16Bits(d));
    for (let j = 0; j < 32; j++) {
      const x0 = f(x[b + j]! * id);
      out[b + j] = dh * (x0 < 0 ? -Math.round(-x0) : Math.round(x0));
    }
  }
  return out;
}

export class Deepseek4Weights {
  private readonly f32 = new Map<string, Float32Array>();
  private readonly i32 = new Map<string, Int32Array>();
  private readonly types = new Map<string, GgmlType>();
  /** When set, mv runs on the native kernels (deepseek4-native.ts) where they compute the weight's type. */
  native: Deepseek4NativeMatVec | null = null;

  /** The rounded activations of the native path's current mat-mul (consumed before mm returns). */
  private scratch = new Float32Array(0);

  /** Tensors not dequantized yet (lazy: the file stays open while these are read). */
  private readonly pending = new Map<string, GgufTensor>();

  /**
   * `lazy`: dequantize each tensor on its first get() (the native path reads the
   * file's bytes itself, so most are never needed in f32); the caller keeps `g`
   * open. Otherwise every tensor is dequantized here and `g` may close.
   */
  constructor(g: GgufFile, readonly cfg: Deepseek4Config, lazy = false) {
    for (const [name, t] of g.tensors) {
      if (t.type === GgmlType.I32) {
        this.i32.set(name, new Int32Array(t.data.slice().buffer));
        continue;
      }
      if (t.type !== GgmlType.MXFP4 && (!SUPPORTED_GGML_TYPES.has(t.type) || t.data.byteLength === 0)) {
        throw new EngineError('KVT_ERR_ENGINE_UNSUPPORTED_MODEL', `deepseek4 tensor ${name}: type ${GgmlType[t.type] ?? t.type} is not computed by the deepseek4 path`);
      }
      this.types.set(name, t.type);
      if (lazy) this.pending.set(name, t);
      else this.f32.set(name, toF32(t));
    }
    for (let l = 0; l < cfg.nLayer; l++) {
      this.require(`blk.${l}.attn_q_a.weight`);
      if (l < cfg.hashLayers) this.table(`blk.${l}.ffn_gate_tid2eid.weight`);
    }
    this.require('output_hc_fn.weight');
  }

  private require(name: string): void {
    if (!this.f32.has(name) && !this.pending.has(name)) this.get(name);
  }

  get(name: string): Float32Array {
    let w = this.f32.get(name);
    const t = w ? undefined : this.pending.get(name);
    if (t) {
      w = toF32(t);
      this.f32.set(name, w);
      this.pending.delete(name);
    }
    if (!w) throw new EngineError('KVT_ERR_ENGINE_UNSUPPORTED_MODEL', `deepseek4 tensor ${name} is missing; the file is incomplete or not a deepseek4 model`);
    return w;
  }

  /**
   * out[r] = W[rowOff + r] · x[xOff .. xOff + nIn) for a [nIn, ·] weight, with x as
   * llama.cpp's CPU mat-mul sees it for the weight's type (see asGgmlActivation).
   */
  mv(name: string, nIn: number, nOut: number, x: Float32Array, xOff = 0, out: Float32Array = new Float32Array(nOut), rowOff = 0): Float32Array {
    return this.mm(name, nIn, nOut, x.subarray(xOff, xOff + nIn), 1, out, rowOff);
  }

  /**
   * out[t][r] = W[rowOff + r] · X[t] for the m rows of X ([m][nIn]): one native
   * mat-mul (bit-identical to m mv calls), or m reference mat-vecs.
   */
  mm(name: string, nIn: number, nOut: number, X: Float32Array, m: number, out: Float32Array = new Float32Array(m * nOut), rowOff = 0): Float32Array {
    // row-wise rounding: every quantized weight's nIn is a whole number of its activation blocks. The native
    // kernels get the rounded rows too: their own Q8 activation rounding is not ggml's (off by up to 0.14 in
    // log-prob on tiny q8_0 without this, deepseek4-native.test.ts)
    if (this.native && this.scratch.length < m * nIn) this.scratch = new Float32Array(m * nIn);
    const a = asGgmlActivation(this.types.get(name) ?? GgmlType.F32, X.subarray(0, m * nIn), this.native ? this.scratch.subarray(0, m * nIn) : null);
    if (this.native) {
      const r = this.native.mm(name, nIn, nOut, a, m, out, rowOff);
      if (r) return r;
    }
    const w = this.get(name);
    for (let t = 0; t < m; t++) matVec(w, nIn, nOut, a, t * nIn, out.subarray(t * nOut, (t + 1) * nOut), rowOff);
    return out;
  }

  private readonly scratchBufs = new Map<string, Float32Array>();

  /**
   * A reused buffer of n floats for one named use inside one op (contents left
   * over: the caller writes every element before reading, and keeps nothing past
   * the op). Large per-layer temporaries were most of a prefill's garbage.
   */
  temp(use: string, n: number): Float32Array {
    let b = this.scratchBufs.get(use);
    if (!b || b.length < n) this.scratchBufs.set(use, (b = new Float32Array(n)));
    return b.subarray(0, n);
  }

  has(name: string): boolean {
    return this.f32.has(name) || this.pending.has(name);
  }

  table(name: string): Int32Array {
    const w = this.i32.get(name);
    if (!w) throw new EngineError('KVT_ERR_ENGINE_UNSUPPORTED_MODEL', `deepseek4 tensor ${name} (I32 hash-routing table) is missing`);
    return w;
  }
}
