/**
 * A forward call's rows, as every graph takes them: one segment per sequence
 * (RowSegment), each segment's first row, its K/V rows written to its pages,
 * row-tiled bias adds, and the logits of the chosen rows.
 */
import type { AttentionSegment, Backend, KvPoolHandle, RopeOptions, RopeScaling, TensorHandle, WeightHandle } from '../../native/index.ts';
import { EngineError } from './engine-errors.ts';
import type { GraphDims } from './llama-graph.ts';

/** Rows of a bias add per backend call (the backend has no broadcast add). */
export const BIAS_TILE_ROWS = 64;

/** A bias vector tiled BIAS_TILE_ROWS times on the backend, so one add covers a tile of rows; the caller frees it. */
export function uploadTiledBias(backend: Backend, bias: Float32Array): TensorHandle {
  const tiled = new Float32Array(BIAS_TILE_ROWS * bias.length);
  for (let r = 0; r < BIAS_TILE_ROWS; r++) tiled.set(bias, r * bias.length);
  const h = backend.alloc(tiled.length);
  backend.write(h, tiled);
  return h;
}

/** t[rows][width] += bias, a tile of rows per add (`tiledBias` from uploadTiledBias). */
export function addTiledBias(b: Backend, t: TensorHandle, tiledBias: TensorHandle, rows: number, width: number): void {
  for (let r = 0; r < rows; r += BIAS_TILE_ROWS) {
    const cnt = Math.min(BIAS_TILE_ROWS, rows - r);
    const part = b.view(t, r * width, cnt * width);
    b.add(part, part, b.view(tiledBias, 0, cnt * width), cnt * width);
  }
}

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

/** Writes each segment's new K/V rows (its rows of `k` and `v`, kvDim wide) into its pages of pool layer `layer`. */
export function writeSegmentKv(b: Backend, pool: KvPoolHandle, layer: number, segments: RowSegment[], segRow0: Int32Array, kvDim: number, k: TensorHandle, v: TensorHandle): void {
  for (let i = 0; i < segments.length; i++) {
    const sg = segments[i];
    const off = segRow0[i] * kvDim;
    const len = sg.queries * kvDim;
    b.kvWrite(pool, layer, sg.blockTable, sg.pos0, sg.queries, b.view(k, off, len), b.view(v, off, len));
  }
}

/** q, k, v [n rows] = h · Wq, Wk, Wv (before biases, norms and rope, which differ per graph). */
export function projectQkv(b: Backend, h: TensorHandle, w: { wq: WeightHandle; wk: WeightHandle; wv: WeightHandle }, n: number, q: TensorHandle, k: TensorHandle, v: TensorHandle): void {
  b.matmul(q, h, w.wq, n);
  b.matmul(k, h, w.wk, n);
  b.matmul(v, h, w.wv, n);
}

/** How the sliding-window graphs (gemma3, gpt-oss) interleave layers: sliding ones (swaLayers[l]) see the last slidingWindow positions with their own rope. */
export interface WindowPattern {
  slidingWindow: number;
  swaLayers: boolean[];
  ropeGlobal: RopeOptions;
  ropeSwa: RopeOptions;
}

/** Layer `l`'s rope and attention window (0: the whole context). */
export function layerWindow(c: WindowPattern, l: number): { rope: RopeOptions; window: number } {
  const sliding = c.swaLayers[l];
  return { rope: sliding ? c.ropeSwa : c.ropeGlobal, window: sliding ? c.slidingWindow : 0 };
}

/** One kind of layer's rope in a neox window pattern: its rotary dims and scaling (none: plain rope). */
export interface NeoxRope {
  rotDims: number;
  scaling?: RopeScaling;
}

/**
 * The window pattern of a model whose sliding and global layers both turn neox
 * rope, each kind at its own base (gemma3, gpt-oss).
 */
export function neoxWindowPattern(c: { slidingWindow: number; swaLayers: boolean[]; ropeTheta: number; ropeThetaSwa: number }, global: NeoxRope, swa: NeoxRope): WindowPattern {
  const rope = (freqBase: number, r: NeoxRope): RopeOptions => ({ mode: 'neox', freqBase, rotDims: r.rotDims, ...(r.scaling ? { scaling: r.scaling } : {}) });
  return { slidingWindow: c.slidingWindow, swaLayers: c.swaLayers, ropeGlobal: rope(c.ropeTheta, global), ropeSwa: rope(c.ropeThetaSwa, swa) };
}
