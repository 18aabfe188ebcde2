export type GrammarErrorCode =
  /** A JSON Schema keyword this compiler cannot enforce while decoding (pattern, format, multipleOf, …). */
  | 'KVT_ERR_GRAMMAR_UNSUPPORTED_KEYWORD'
  /** The schema is not valid JSON Schema here (wrong type of a keyword, dangling $ref, …). */
  | 'KVT_ERR_GRAMMAR_INVALID_SCHEMA'
  /** No JSON value satisfies the schema (or none this compiler can produce). */
  | 'KVT_ERR_GRAMMAR_UNSATISFIABLE'
  /** max_tokens is too small for the shortest reply the grammar allows. */
  | 'KVT_ERR_GRAMMAR_BUDGET'
  /** No token can continue the grammar (a vocabulary without a byte the grammar needs). */
  | 'KVT_ERR_GRAMMAR_DEAD_END';

export class GrammarError extends Error {
  override readonly name = 'GrammarError';
  constructor(
    readonly code: GrammarErrorCode,
    message: string,
    /** JSON-pointer-like path of the offending schema part ('' = the root), e.g. `/properties/id/pattern`. */
    readonly path: string = '',
  ) {
    super(`${code}: ${message}`);
  }
}
