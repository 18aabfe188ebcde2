/**
 * Typed errors for GGUF reading/writing. Every error names the file and the
 * field (metadata key, tensor name or header part) that was wrong, and says
 * what to do about it.
 */
export type GgufErrorCode =
  | 'KVT_ERR_GGUF_IO'
  | 'KVT_ERR_GGUF_BAD_MAGIC'
  | 'KVT_ERR_GGUF_UNSUPPORTED_VERSION'
  | 'KVT_ERR_GGUF_TRUNCATED'
  | 'KVT_ERR_GGUF_BAD_VALUE_TYPE'
  | 'KVT_ERR_GGUF_UNSUPPORTED_TENSOR_TYPE'
  | 'KVT_ERR_GGUF_UNKNOWN_TENSOR_TYPE'
  | 'KVT_ERR_GGUF_TENSOR_OUT_OF_BOUNDS'
  | 'KVT_ERR_GGUF_BAD_TENSOR'
  | 'KVT_ERR_GGUF_MISSING_METADATA'
  | 'KVT_ERR_GGUF_METADATA_TYPE'
  | 'KVT_ERR_GGUF_MISSING_TENSOR'
  | 'KVT_ERR_GGUF_WRITE';

export class GgufError extends Error {
  override readonly name = 'GgufError';
  constructor(
    readonly code: GgufErrorCode,
    /** The GGUF file involved. */
    readonly file: string,
    /** The metadata key, tensor name or header field at fault. */
    readonly field: string,
    message: string,
  ) {
    super(`${code}: ${file}: ${field}: ${message}`);
  }
}
