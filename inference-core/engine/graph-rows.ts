/**
 * A forward call's rows, as every graph takes them: one segment per sequence
 * (RowSegment), each segment's first row, and the logits of the chosen rows.
 */
import type { AttentionSegment, Backend, TensorHandle, WeightHandle } from '../../native/index.ts';
import { EngineError } from './engine-errors.ts';
import type { GraphDims } from './llama-graph.ts';

/** Rows of a bias add per backend call (the backend has no broadcast add). */
export const BIAS_TILE_ROWS = 64;

/** One sequence's rows in a forward call. */
export interface RowSegment extends AttentionSegment {
  /** Sequence pages; must already cover pos0 + queries tokens. */
  blockTable: Int32Array;
  /** The sequence's id (graphs with per-sequence state, lfm2, key it by this). */
  seqId?: number;
}

/** Each segment's first row within the call's n rows (where its K/V sits in k/v); segments must cover exactly n rows. */
export function segmentRowOffsets(segments: RowSegment[], n: number): Int32Array {
  const segRow0 = new Int32Array(segments.length);
  let r = 0;
  for (let i = 0; i < segments.length; i++) {
    segRow0[i] = r;
    r += segments[i].queries;
  }
  if (r !== n) throw new EngineError('KVT_ERR_ENGINE_BAD_ARGUMENT', `segments cover ${r} rows, the call has ${n}`);
  return segRow0;
}

/**
 * logits [m][vocab] = rmsNorm(x[row])·outputNorm · Woutᵀ for each of the m
 * logitRows (indices into the call's n rows), normed one row at a time into
 * normLast [maxLogitRows][dim].
 */
export function rowLogits(
  b: Backend,
  s: { x: TensorHandle; normLast: TensorHandle; logits: TensorHandle },
  w: { outputNorm: WeightHandle; output: WeightHandle },
  c: GraphDims,
  n: number,
  logitRows: Int32Array,
): Float32Array {
  const m = logitRows.length;
  if (m === 0) return new Float32Array(0);
  for (let i = 0; i < m; i++) {
    const row = logitRows[i];
    if (row < 0 || row >= n) throw new EngineError('KVT_ERR_ENGINE_BAD_ARGUMENT', `logit row ${row} outside 0..${n - 1}`);
    b.rmsNorm(b.view(s.normLast, i * c.dim, c.dim), b.view(s.x, row * c.dim, c.dim), w.outputNorm, 1, c.dim, c.rmsEps);
  }
  const logits = b.view(s.logits, 0, m * c.vocabSize);
  b.matmul(logits, b.view(s.normLast, 0, m * c.dim), w.output, m);
  return b.read(logits);
}
