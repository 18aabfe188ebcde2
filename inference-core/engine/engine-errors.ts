/** Stable codes of the engine's typed errors (KVT_ERR_ENGINE_*). */
export type EngineErrorCode =
  | 'KVT_ERR_ENGINE_POOL_EXHAUSTED'
  | 'KVT_ERR_ENGINE_CONTEXT_OVERFLOW'
  | 'KVT_ERR_ENGINE_BAD_TOKEN'
  | 'KVT_ERR_ENGINE_BAD_BLOCK'
  | 'KVT_ERR_ENGINE_SEQUENCE_FREED'
  | 'KVT_ERR_ENGINE_SEQUENCE_STATE'
  | 'KVT_ERR_ENGINE_BAD_ARGUMENT'
  | 'KVT_ERR_ENGINE_UNSUPPORTED_MODEL'
  | 'KVT_ERR_ENGINE_SAMPLING_OPTIONS';

/** An engine error; `code` is stable, the message says what to do. */
export class EngineError extends Error {
  constructor(
    readonly code: EngineErrorCode,
    message: string,
  ) {
    super(message);
    this.name = 'EngineError';
  }
}

/** Refuses a model file the engine does not compute (KVT_ERR_ENGINE_UNSUPPORTED_MODEL); `msg` names the file, tensor or key. */
export function unsupportedModel(msg: string): never {
  throw new EngineError('KVT_ERR_ENGINE_UNSUPPORTED_MODEL', msg);
}

/** The row counts every graph's forward() accepts: 1..maxRows rows with one position each, at most maxLogitRows logit rows. */
export function checkForwardRows(rows: number, positions: number, maxRows: number, logitRows: number, maxLogitRows: number): void {
  if (rows === 0 || rows > maxRows || positions !== rows) {
    throw new EngineError('KVT_ERR_ENGINE_BAD_ARGUMENT', `forward carries 1..${maxRows} rows with one position each, got ${rows}/${positions}`);
  }
  if (logitRows > maxLogitRows) {
    throw new EngineError('KVT_ERR_ENGINE_BAD_ARGUMENT', `at most ${maxLogitRows} logit rows per call, got ${logitRows}`);
  }
}

/** The rows of one forward call on `graph`, checked against the limits it was built for. */
export function forwardRows(graph: { maxRows: number; maxLogitRows: number }, tokens: Int32Array, positions: Int32Array, logitRows: Int32Array): number {
  checkForwardRows(tokens.length, positions.length, graph.maxRows, logitRows.length, graph.maxLogitRows);
  return tokens.length;
}
