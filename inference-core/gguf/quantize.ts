/**
 * f32 → f16 / bf16 / Q8_0 conversions, bit-exact with ggml's reference
 * routines (ggml_compute_fp32_to_fp16, ggml_compute_fp32_to_bf16,
 * quantize_row_q8_0_ref) so llama.cpp reads back the same numbers we meant.
 * Every other supported type (Q4_0 .. Q6_K, IQ4_NL, IQ4_XS) goes through the
 * native quantizers (native/src/quant), byte-identical to ggml's: see
 * quantize() / dequantize() below.
 *
 * Q8_0 block (34 bytes, 32 elements):   [f16 d][int8 qs[32]]   x ≈ d · q
 */
import { nativeAddon } from '../../native/index.ts';
import { GgmlType, Q8_0_BLOCK, SUPPORTED_GGML_TYPES, ggmlTypeName, supportedGgmlTypeNames } from './ggml-type.ts';

const f32Scratch = new Float32Array(1);
const u32Scratch = new Uint32Array(f32Scratch.buffer);

/** IEEE-754 round-to-nearest-even f32 → binary16 bits (what F16C and ggml's FP16 trick compute). */
export function f32BitsToF16Bits(u: number): number {
  const sign = (u >>> 16) & 0x8000;
  const e = (u >>> 23) & 0xff;
  let m = u & 0x7fffff;
  if (e === 0xff) return sign | 0x7c00 | (m !== 0 ? 0x200 : 0);
  const e16 = e - 127 + 15;
  if (e16 >= 0x1f) return sign | 0x7c00;
  if (e16 <= 0) {
    if (e16 < -10) return sign;
    m |= 0x800000;
    const shift = 14 - e16;
    const half = 1 << (shift - 1);
    return sign | ((m + half - 1 + ((m >>> shift) & 1)) >>> shift);
  }
  const rounded = m + 0xfff + ((m >>> 13) & 1);
  return sign | ((e16 << 10) + (rounded >>> 13));
}

export function f32ToF16Bits(x: number): number {
  f32Scratch[0] = x;
  return f32BitsToF16Bits(u32Scratch[0]);
}

export function f16BitsToF32(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const e = (h >>> 10) & 0x1f;
  const m = h & 0x3ff;
  if (e === 0) return sign * m * 2 ** -24;
  if (e === 0x1f) return m ? NaN : sign * Infinity;
  return sign * (1 + m / 1024) * 2 ** (e - 15);
}

export function f32ToF16(src: Float32Array): Uint16Array {
  const bits = new Uint32Array(src.buffer, src.byteOffset, src.length);
  const out = new Uint16Array(src.length);
  for (let i = 0; i < src.length; i++) out[i] = f32BitsToF16Bits(bits[i]);
  return out;
}

export function f16ToF32(src: Uint16Array): Float32Array {
  const out = new Float32Array(src.length);
  for (let i = 0; i < src.length; i++) out[i] = f16BitsToF32(src[i]);
  return out;
}

/** ggml_compute_fp32_to_bf16: round-to-nearest-even, NaN kept quiet. */
export function f32ToBf16(src: Float32Array): Uint16Array {
  const bits = new Uint32Array(src.buffer, src.byteOffset, src.length);
  const out = new Uint16Array(src.length);
  for (let i = 0; i < src.length; i++) {
    const u = bits[i];
    if ((u & 0x7fffffff) > 0x7f800000) out[i] = ((u >>> 16) | 64) & 0xffff;
    else out[i] = ((u + (0x7fff + ((u >>> 16) & 1))) >>> 16) & 0xffff;
  }
  return out;
}

export function bf16ToF32(src: Uint16Array): Float32Array {
  const out = new Float32Array(src.length);
  const bits = new Uint32Array(out.buffer);
  for (let i = 0; i < src.length; i++) bits[i] = src[i] << 16;
  return out;
}

/** Bytes of a Q8_0 tensor with `elements` elements (a multiple of 32). */
export function q8_0Bytes(elements: number): number {
  return (elements / Q8_0_BLOCK) * 34;
}

/**
 * quantize_row_q8_0_ref, in f32 arithmetic like the C code:
 *   amax = max|x|;  d = amax/127;  id = d ? 1/d : 0;  q = roundf(x·id)   (roundf: half away from zero)
 */
export function quantizeQ8_0(src: Float32Array): Uint8Array {
  if (src.length % Q8_0_BLOCK !== 0) throw new RangeError(`Q8_0 needs a multiple of ${Q8_0_BLOCK} elements, got ${src.length}`);
  const nBlocks = src.length / Q8_0_BLOCK;
  const out = new Uint8Array(nBlocks * 34);
  const qs = new Int8Array(out.buffer);
  const fround = Math.fround;
  for (let b = 0; b < nBlocks; b++) {
    const base = b * Q8_0_BLOCK;
    let amax = 0;
    for (let j = 0; j < Q8_0_BLOCK; j++) {
      const v = src[base + j];
      const a = v < 0 ? -v : v;
      if (a > amax) amax = a;
    }
    const d = fround(amax / 127);
    const id = d !== 0 ? fround(1 / d) : 0;
    const o = b * 34;
    const h = f32ToF16Bits(d);
    out[o] = h & 0xff;
    out[o + 1] = h >>> 8;
    for (let j = 0; j < Q8_0_BLOCK; j++) {
      const x0 = fround(src[base + j] * id);
      qs[o + 2 + j] = x0 < 0 ? -Math.round(-x0) : Math.round(x0);
    }
  }
  return out;
}

export function dequantizeQ8_0(src: Uint8Array, elements: number): Float32Array {
  const out = new Float32Array(elements);
  const view = new DataView(src.buffer, src.byteOffset, src.byteLength);
  for (let b = 0; b < elements / Q8_0_BLOCK; b++) {
    const o = b * 34;
    const d = f16BitsToF32(view.getUint16(o, true));
    for (let j = 0; j < Q8_0_BLOCK; j++) out[b * Q8_0_BLOCK + j] = d * view.getInt8(o + 2 + j);
  }
  return out;
}

function blockOf(type: GgmlType, elements: number, what: string): { blockElems: number; blockBytes: number } {
  const info = SUPPORTED_GGML_TYPES.get(type);
  if (!info) throw new RangeError(`${what}: ggml type ${ggmlTypeName(type)} is not one kvtier converts (${supportedGgmlTypeNames()})`);
  if (!Number.isInteger(elements) || elements < 0 || elements % info.blockElems !== 0) {
    throw new RangeError(`${what}: ${elements} values is not a whole number of ${ggmlTypeName(type)} blocks of ${info.blockElems}`);
  }
  return info;
}

/**
 * f32 values → the GGUF bytes of `type`, as llama-quantize (without an
 * imatrix) writes them. F32/F16/BF16/Q8_0 are computed here; the block types
 * by the native quantizers. `data.length` must be whole blocks (32 or 256).
 */
export function quantize(type: GgmlType, data: Float32Array): Uint8Array {
  const info = blockOf(type, data.length, 'quantize');
  switch (type) {
    case GgmlType.F32:
      return new Uint8Array(data.slice().buffer);
    case GgmlType.F16:
      return new Uint8Array(f32ToF16(data).buffer);
    case GgmlType.BF16:
      return new Uint8Array(f32ToBf16(data).buffer);
    case GgmlType.Q8_0:
      return quantizeQ8_0(data);
    default: {
      const out = new Uint8Array((data.length / info.blockElems) * info.blockBytes);
      if (data.length > 0) nativeAddon().quantize(out, data, type, data.length);
      return out;
    }
  }
}

/** The f32 values `elements` values of `type` in `bytes` hold (bit-identical to ggml's dequantize_row_*). */
export function dequantize(type: GgmlType, bytes: Uint8Array, elements: number): Float32Array {
  const info = blockOf(type, elements, 'dequantize');
  const need = (elements / info.blockElems) * info.blockBytes;
  if (bytes.byteLength < need) throw new RangeError(`dequantize: ${elements} ${ggmlTypeName(type)} values need ${need} bytes, got ${bytes.byteLength}`);
  const out = new Float32Array(elements);
  if (elements > 0) nativeAddon().dequantize(out, bytes, type, elements);
  return out;
}
