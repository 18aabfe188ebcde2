export { GgufError, type GgufErrorCode } from './gguf-errors.ts';
export { GgmlType, SUPPORTED_GGML_TYPES, INDEX_GGML_TYPES, ggmlStorageInfo, Q8_0_BLOCK, ggmlTypeName, ggmlTensorBytes, ggmlBitsPerWeight, supportedGgmlTypeNames } from './ggml-type.ts';
export { GgufValueType, gv, type GgufValue, type GgufArrayValue, type GgufScalarType } from './gguf-value.ts';
export { readGguf, parseGguf, GGUF_DEFAULT_ALIGNMENT, GGUF_MAGIC, type GgufFile, type GgufTensor, type ReadGgufOptions } from './gguf-reader.ts';
export { GgufWriter, writeGguf, type GgufTensorSpec } from './gguf-writer.ts';
export {
  f32ToF16,
  f16ToF32,
  f32ToF16Bits,
  f16BitsToF32,
  f32ToBf16,
  bf16ToF32,
  quantizeQ8_0,
  dequantizeQ8_0,
  q8_0Bytes,
  quantize,
  dequantize,
} from './quantize.ts';
