/**
 * Typed codec faults (stable `code`s). A policy that names a codec whose
 * measured quality on the served model is out of bounds is refused with
 * KVT_ERR_POLICY_CODEC_QUALITY (HTTP 400 on PUT /admin/policy through the
 * KVT_ERR_POLICY_ prefix) unless the request says `force: true`.
 */
export type CodecErrorCode =
  | 'KVT_ERR_POLICY_CODEC_QUALITY'
  | 'KVT_ERR_POLICY_CODEC_UNMEASURED'
  | 'KVT_ERR_CODEC_UNKNOWN'
  | 'KVT_ERR_CODEC_MEASURE';

export class CodecError extends Error {
  readonly code: CodecErrorCode;
  constructor(code: CodecErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
    this.name = 'CodecError';
  }
}
