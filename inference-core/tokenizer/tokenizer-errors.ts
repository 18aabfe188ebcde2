export type TokenizerErrorCode =
  | 'KVT_ERR_TOKENIZER_UNSUPPORTED_MODEL'
  | 'KVT_ERR_TOKENIZER_UNSUPPORTED_PRE'
  | 'KVT_ERR_TOKENIZER_BAD_VOCAB'
  | 'KVT_ERR_TOKENIZER_BAD_TOKEN_ID'
  | 'KVT_ERR_TOKENIZER_NO_BOS'
  | 'KVT_ERR_TOKENIZER_HF_IMPORT';

export class TokenizerError extends Error {
  override readonly name = 'TokenizerError';
  constructor(
    readonly code: TokenizerErrorCode,
    message: string,
  ) {
    super(`${code}: ${message}`);
  }
}
