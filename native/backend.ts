/**
 * The backend seam: every compute op the engine (inference-core) needs, on
 * handles the backend owns. The CPU backend (cpu-backend.ts) is one
 * implementation; a CUDA backend (native/cuda) implements the same interface
 * with device memory behind the handles, so weights, KV pages and
 * activations never leave the device between ops.
 *
 *   engine ──► Backend ──► CpuBackend  : handles wrap ArrayBuffers, ops run now
 *                     └──► CudaBackend : handles wrap device pointers, ops are
 *                                        enqueued on a stream; read() syncs
 *
 * Rules every implementation keeps:
 *  - Tensors are f32 activations, addressed in elements. `view()` makes a
 *    sub-range handle without a copy (e.g. one head's slice of a buffer).
 *  - Small metadata (token ids, positions, block tables) is passed as host
 *    typed arrays; a device backend uploads it per call.
 *  - Ops are deterministic: one output element is computed in one fixed
 *    order, independent of how many rows are in the call, of the thread
 *    count and of the other rows/queries in the batch. The engine's
 *    cache-equivalence test ("prefill all" vs "import blocks + prefill the
 *    rest") relies on bit-identical results.
 *  - Shapes are checked; a bad shape throws a NativeError
 *    (code KVT_ERR_NATIVE_SHAPE) before anything is written.
 *
 * KV pool: `pages` pages of PAGE_TOKENS (64) tokens, each page laid out as
 *
 *     page[layer][K|V][kvHead][64 tokens][headDim]     (dtype f16 or f32)
 *
 * which is exactly the KV payload of one kvtier block, so importing a cached
 * block is one copy into a page (copyIntoPage) and exporting one is one copy
 * out (copyFromPage). A sequence owns a block table: page index of each of
 * its 64-token blocks, in order.
 */

export type WeightDType =
  | 'f32' | 'f16' | 'bf16' | 'q8_0'
  | 'q4_0' | 'q4_1' | 'q5_0' | 'q5_1'
  | 'q2_k' | 'q3_k' | 'q4_k' | 'q5_k' | 'q6_k'
  | 'iq4_nl' | 'iq4_xs';
export type KvDType = 'f16' | 'f32';
export type RopeMode = 'normal' | 'neox';
export type IsaName = 'scalar' | 'avx2' | 'avx512';

/** Tokens per KV page; equals the kvtier block size. */
export const PAGE_TOKENS = 64;

/** GGML type ids of the weight dtypes (what a GGUF tensor header carries). */
export const GGML_TYPE: Record<WeightDType, number> = {
  f32: 0, f16: 1, q4_0: 2, q4_1: 3, q5_0: 6, q5_1: 7, q8_0: 8,
  q2_k: 10, q3_k: 11, q4_k: 12, q5_k: 13, q6_k: 14, iq4_nl: 20, iq4_xs: 23, bf16: 30,
};

/** GGUF block geometry of each weight dtype: `elems` values take `bytes` bytes; a row's cols must be a multiple of `elems`. */
export const WEIGHT_BLOCK: Record<WeightDType, { elems: number; bytes: number }> = {
  f32: { elems: 1, bytes: 4 }, f16: { elems: 1, bytes: 2 }, bf16: { elems: 1, bytes: 2 },
  q8_0: { elems: 32, bytes: 34 }, q4_0: { elems: 32, bytes: 18 }, q4_1: { elems: 32, bytes: 20 },
  q5_0: { elems: 32, bytes: 22 }, q5_1: { elems: 32, bytes: 24 }, iq4_nl: { elems: 32, bytes: 18 },
  q2_k: { elems: 256, bytes: 84 }, q3_k: { elems: 256, bytes: 110 }, q4_k: { elems: 256, bytes: 144 },
  q5_k: { elems: 256, bytes: 176 }, q6_k: { elems: 256, bytes: 210 }, iq4_xs: { elems: 256, bytes: 136 },
};

/** An f32 activation buffer (or a view into one), owned by its backend. */
export interface TensorHandle {
  readonly kind: 'tensor';
  /** Length in f32 elements. */
  readonly length: number;
}

/** A weight matrix [rows][cols] (GGUF: ne0 = cols), in the backend's own packed layout. */
export interface WeightHandle {
  readonly kind: 'weight';
  readonly dtype: WeightDType;
  readonly rows: number;
  readonly cols: number;
}

export interface KvPoolSpec {
  layers: number;
  kvHeads: number;
  headDim: number;
  pages: number;
  dtype?: KvDType; // default 'f16'
}

export interface KvPoolHandle {
  readonly kind: 'kvpool';
  readonly layers: number;
  readonly kvHeads: number;
  readonly headDim: number;
  readonly pages: number;
  readonly dtype: KvDType;
  /** Bytes of one page = one kvtier block payload: layers·2·kvHeads·64·headDim·bytes(dtype). */
  readonly pageBytes: number;
}

/**
 * A latent (MLA) KV pool for DeepSeek-V2/V3 (`deepseek2`): one row per token
 * and layer, [c_kv (kv_lora_rank) | k_pe (rope dims)] = `width` values,
 *
 *     page[layer][64 tokens][width]      pageBytes = layers · 64 · width · bytes(dtype)
 *
 * The handle reports kvHeads 1 and headDim = width.
 */
export interface MlaKvPoolSpec {
  layers: number;
  width: number;
  pages: number;
  dtype?: KvDType; // default 'f16'
}

/** One run of queries of one sequence: positions [pos0, pos0+queries) over keys [0, pos0+queries). */
export interface AttentionSegment {
  /** Page index of each 64-token block of the sequence; must cover pos0+queries tokens. */
  blockTable: Int32Array;
  pos0: number;
  queries: number;
}

export interface RopeOptions {
  mode: RopeMode; // 'normal' = GPT-J interleaved pairs (llama GGUF), 'neox' = half split
  freqBase: number; // e.g. 10000
  /** Rotated dims per head (partial rotary); default headDim. */
  rotDims?: number;
  /**
   * Per-pair theta divisors [rotDims/2] (Llama 3.1+ `rope_freqs.weight`):
   * pair p turns at pos·base^(−2p/rot) / freqFactors[p], as in ggml_rope_ext.
   */
  freqFactors?: Float32Array;
  /** Linear / YaRN scaling with llama.cpp's meaning; absent = none. */
  scaling?: RopeScaling;
}

/**
 * ggml_rope_ext's scaling parameters (llama.cpp fills them from the GGUF:
 * freqScale = 1/`rope.scaling.factor`; for `yarn` extFactor = 1, attnFactor
 * from the factor and `rope.scaling.attn_factor`, betaFast 32, betaSlow 1,
 * nCtxOrig = `rope.scaling.original_context_length`).
 *   theta_extrap = pos·base^(−2p/rot)/freqFactor,  theta_interp = freqScale·theta_extrap
 *   extFactor ≠ 0: theta mixes the two by YaRN's ramp over the correction dims
 *     of [betaFast, betaSlow], and cos/sin get ·(1 + 0.1·ln(1/freqScale))
 *   cos/sin get ·attnFactor.
 */
export interface RopeScaling {
  freqScale: number;
  extFactor: number;
  attnFactor: number;
  betaFast: number;
  betaSlow: number;
  nCtxOrig: number;
}

export interface BackendInfo {
  name: 'cpu' | 'cuda';
  /** CPU: the ISA in use ('scalar'|'avx2'|'avx512'); CUDA: device name. */
  isa: string;
  /** ISAs this CPU and build support, best last. */
  isasAvailable: string[];
  threads: number;
}

export interface Backend {
  readonly name: 'cpu' | 'cuda';
  info(): BackendInfo;

  // ---- memory ------------------------------------------------------------
  /** Zero-filled f32 tensor of `length` elements. */
  alloc(length: number): TensorHandle;
  /** Sub-range [offset, offset+length) of a tensor, sharing its memory. */
  view(t: TensorHandle, offset: number, length: number): TensorHandle;
  /** Host → tensor (at element `offset`, default 0). */
  write(dst: TensorHandle, src: Float32Array, offset?: number): void;
  /** Tensor → host (a new array, or `into`). Waits for pending work. */
  read(src: TensorHandle, into?: Float32Array): Float32Array;
  /** Uploads a weight from its GGUF bytes ([rows][cols] row-major, Q8_0 = 34-byte blocks). */
  uploadWeight(dtype: WeightDType, rows: number, cols: number, bytes: Uint8Array): WeightHandle;
  createKvPool(spec: KvPoolSpec): KvPoolHandle;
  /** Import one cached block: `src` (pageBytes long) → page `page`. */
  copyIntoPage(pool: KvPoolHandle, page: number, src: Uint8Array): void;
  /** Export one page (a new array, or `into`, pageBytes long). Waits for pending work. */
  copyFromPage(pool: KvPoolHandle, page: number, into?: Uint8Array): Uint8Array;
  /** Releases a handle's memory now (otherwise on GC). Views: no-op. */
  free(h: TensorHandle | WeightHandle | KvPoolHandle): void;

  // ---- ops (outputs first) -------------------------------------------------
  /** out[m][w.rows] = x[m][w.cols] · wᵀ */
  matmul(out: TensorHandle, x: TensorHandle, w: WeightHandle, m: number): void;
  /** out[rows][dim] = x / sqrt(mean(x²)+eps) · gain  (gain: f32 weight [1][dim]) */
  rmsNorm(out: TensorHandle, x: TensorHandle, gain: WeightHandle, rows: number, dim: number, eps: number): void;
  /** In place on x[rows][heads][headDim]; positions[rows] (host). */
  rope(x: TensorHandle, positions: Int32Array, rows: number, heads: number, headDim: number, opts: RopeOptions): void;
  /** In place, per row of x[rows][cols]. */
  softmax(x: TensorHandle, rows: number, cols: number): void;
  /** out[n] = silu(gate[n]) · up[n] */
  swiglu(out: TensorHandle, gate: TensorHandle, up: TensorHandle, n: number): void;
  /** out[n] = a[n] + b[n]  (out may alias a or b) */
  add(out: TensorHandle, a: TensorHandle, b: TensorHandle, n: number): void;
  /** out[tokens.length][table.cols] = dequantized rows of an embedding table. */
  embed(out: TensorHandle, table: WeightHandle, tokens: Int32Array): void;
  /**
   * Stores the new tokens' K and V ([n][kvHeads][headDim] f32 each) of one
   * layer at positions [pos0, pos0+n) of the sequence with `blockTable`.
   */
  kvWrite(pool: KvPoolHandle, layer: number, blockTable: Int32Array, pos0: number, n: number,
    k: TensorHandle, v: TensorHandle): void;
  /**
   * Causal GQA attention over paged KV. q and out: [Σ queries][heads][headDim],
   * rows in segment order. Prefill = one segment with many queries; batched
   * decode = one segment of 1 query per sequence. kvWrite the new tokens first.
   * scale: usually 1/sqrt(headDim).
   */
  attention(out: TensorHandle, q: TensorHandle, pool: KvPoolHandle, layer: number, heads: number,
    scale: number, segments: AttentionSegment[]): void;
  // ---- MLA (optional: a backend without them refuses deepseek2 models) ------
  createMlaKvPool?(spec: MlaKvPoolSpec): KvPoolHandle;
  /** Stores latent rows ([n][width] f32) of one layer at positions [pos0, pos0+n) of a latent pool. */
  mlaKvWrite?(pool: KvPoolHandle, layer: number, blockTable: Int32Array, pos0: number, n: number, latent: TensorHandle): void;
  /**
   * Causal absorbed MLA attention (MQA over the latent rows, V = the first
   * vDim values of each row). q: [Σ queries][heads][width], out: [Σ queries][heads][vDim].
   */
  mlaAttention?(out: TensorHandle, q: TensorHandle, pool: KvPoolHandle, layer: number, heads: number, vDim: number,
    scale: number, segments: AttentionSegment[]): void;
  // ---- sliding window (optional: a backend without them refuses gemma3) -----
  /**
   * attention() with a sliding window: the query at position p attends keys
   * [max(0, p − window + 1), p] (llama.cpp's standard SWA mask); window 0 = all
   * keys, bit-identical to attention() on the cpu backend. `sinks` (gpt-oss,
   * [heads] f32 on the host): one extra logit per head that joins the softmax's
   * max and denominator and carries no value (ggml's soft_max with sinks).
   */
  windowAttention?(out: TensorHandle, q: TensorHandle, pool: KvPoolHandle, layer: number, heads: number,
    scale: number, window: number, segments: AttentionSegment[], sinks?: Float32Array): void;
  /** out[n] = gelu(gate[n]) · up[n], GELU through ggml's f16 table (GGML_GELU_FP16). */
  geglu?(out: TensorHandle, gate: TensorHandle, up: TensorHandle, n: number): void;
  /** out[n] = x[n] · s  (out may alias x) */
  scale?(out: TensorHandle, x: TensorHandle, s: number, n: number): void;
  /** Waits until every enqueued op is done (CPU: no-op). */
  sync(): void;
}

/** Errors of the native layer. */
export class NativeError extends Error {
  constructor(readonly code: string, message: string) {
    super(message);
    this.name = 'NativeError';
  }
}
