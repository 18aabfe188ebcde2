/**
 * Host-side fallback for weight types the CUDA kernels do not compute
 * (everything but f32, f16, bf16 and q8_0): the GGUF blocks are dequantized
 * on the CPU by the native addon (ggml-identical dequantize_row_<t>), rounded
 * to f16 and uploaded as an f16 weight. Costs 2 bytes per weight on the
 * device instead of the quantized size, but runs every GGUF type.
 */
import { NativeError, WEIGHT_BLOCK, GGML_TYPE, type WeightDType } from '../backend.ts';
import { loadAddon } from '../load-addon.ts';

/** The dtypes the CUDA addon uploads and multiplies as they are. */
export const CUDA_NATIVE_WEIGHT_DTYPES: ReadonlySet<WeightDType> = new Set<WeightDType>(['f32', 'f16', 'bf16', 'q8_0']);

/** f16 bytes of a [rows][cols] weight given in the GGUF layout of `dtype`. */
export function dequantizeToF16(dtype: WeightDType, rows: number, cols: number, bytes: Uint8Array): Uint8Array {
  const block = WEIGHT_BLOCK[dtype];
  if (cols % block.elems !== 0) {
    throw new NativeError('KVT_ERR_NATIVE_SHAPE', `${dtype} weight cols (${cols}) must be a multiple of ${block.elems}`);
  }
  const want = (rows * cols / block.elems) * block.bytes;
  if (bytes.byteLength !== want) {
    throw new NativeError('KVT_ERR_NATIVE_SHAPE', `${dtype} weight [${rows}][${cols}] needs ${want} bytes, got ${bytes.byteLength}`);
  }
  const addon = loadAddon();
  const n = rows * cols;
  const f32 = new Float32Array(n);
  addon.dequantize(f32, bytes, GGML_TYPE[dtype], n);
  const f16 = new Uint8Array(n * 2);
  addon.quantize(f16, f32, GGML_TYPE.f16, n);
  return f16;
}
