/**
 * The raw N-API surface of kvtier_native.node (src/addon.cc). Argument
 * order mirrors the C++ kernels: outputs first. Prefer the typed wrappers in
 * kernels.ts or the Backend; these are exported for tests and benchmarks.
 * Weight dtypes are GGML type ids (0 F32, 1 F16, 8 Q8_0, 30 BF16); KV dtypes 0 F32, 1 F16.
 */
export type Bytes = ArrayBuffer | ArrayBufferView;

export interface NativeAddon {
  readonly abiVersion: number;
  info(): { abiVersion: number; isa: string; isasAvailable: string[]; threads: number };
  setIsa(name: string): void;
  setThreads(n: number): number;
  handoffNs(iterations: number): number;
  /** Absent from builds before it (an optimisation only): see parkThreads in index.ts. */
  parkThreads?(): void;
  allocAligned(bytes: number): ArrayBuffer;
  mmapFile(path: string): ArrayBuffer;
  unmapFile(buffer: ArrayBuffer): boolean;
  packedWeightBytes(dtype: number, rows: number, cols: number): number;
  packWeight(dtype: number, rows: number, cols: number, gguf: Bytes): ArrayBuffer;
  matmul(out: Float32Array, x: Float32Array, packed: Bytes, dtype: number, rows: number, cols: number, m: number): void;
  matmulRef(out: Float32Array, x: Float32Array, gguf: Bytes, dtype: number, rows: number, cols: number, m: number): void;
  rmsNorm(out: Float32Array, x: Float32Array, gain: Float32Array, rows: number, dim: number, eps: number): void;
  rmsNormRef(out: Float32Array, x: Float32Array, gain: Float32Array, rows: number, dim: number, eps: number): void;
  softmax(x: Float32Array, rows: number, cols: number): void;
  softmaxRef(x: Float32Array, rows: number, cols: number): void;
  swiglu(out: Float32Array, gate: Float32Array, up: Float32Array, n: number): void;
  swigluRef(out: Float32Array, gate: Float32Array, up: Float32Array, n: number): void;
  add(out: Float32Array, a: Float32Array, b: Float32Array, n: number): void;
  addRef(out: Float32Array, a: Float32Array, b: Float32Array, n: number): void;
  /** scaling: [freqScale, extFactor, attnFactor, betaFast, betaSlow, nCtxOrig]; freqFactors: [rotDims/2]. */
  rope(x: Float32Array, positions: Int32Array, rows: number, heads: number, headDim: number, rotDims: number,
    mode: number, freqBase: number, scaling?: Float32Array | null, freqFactors?: Float32Array | null): void;
  ropeRef(x: Float32Array, positions: Int32Array, rows: number, heads: number, headDim: number, rotDims: number,
    mode: number, freqBase: number, scaling?: Float32Array | null, freqFactors?: Float32Array | null): void;
  embed(out: Float32Array, table: Bytes, dtype: number, rows: number, cols: number, tokens: Int32Array): void;
  embedRef(out: Float32Array, table: Bytes, dtype: number, rows: number, cols: number, tokens: Int32Array): void;
  kvWrite(pages: Bytes, layers: number, kvHeads: number, headDim: number, kvDtype: number, layer: number,
    blockTable: Int32Array, pos0: number, n: number, k: Float32Array, v: Float32Array): void;
  kvWriteRef(pages: Bytes, layers: number, kvHeads: number, headDim: number, kvDtype: number, layer: number,
    blockTable: Int32Array, pos0: number, n: number, k: Float32Array, v: Float32Array): void;
  /** tables: all block tables back to back; segments: [tableOffset, tableLength, pos0, queries] per segment. */
  attention(out: Float32Array, q: Float32Array, pages: Bytes, layers: number, kvHeads: number, headDim: number,
    kvDtype: number, layer: number, heads: number, scale: number, tables: Int32Array, segments: Int32Array): void;
  attentionRef(out: Float32Array, q: Float32Array, pages: Bytes, layers: number, kvHeads: number, headDim: number,
    kvDtype: number, layer: number, heads: number, scale: number, tables: Int32Array, segments: Int32Array): void;
  /** MLA latent pages page[layer][64][width]; latent [n][width]. */
  mlaKvWrite(pages: Bytes, layers: number, width: number, kvDtype: number, layer: number, blockTable: Int32Array,
    pos0: number, n: number, latent: Float32Array): void;
  mlaKvWriteRef(pages: Bytes, layers: number, width: number, kvDtype: number, layer: number, blockTable: Int32Array,
    pos0: number, n: number, latent: Float32Array): void;
  /** q [rows][heads][width] → out [rows][heads][vDim]; V = the first vDim values of each latent row. */
  mlaAttention(out: Float32Array, q: Float32Array, pages: Bytes, layers: number, width: number, kvDtype: number,
    layer: number, heads: number, vDim: number, scale: number, tables: Int32Array, segments: Int32Array): void;
  mlaAttentionRef(out: Float32Array, q: Float32Array, pages: Bytes, layers: number, width: number, kvDtype: number,
    layer: number, heads: number, vDim: number, scale: number, tables: Int32Array, segments: Int32Array): void;
  /** attention over keys [max(0, p − window + 1), p] (window 0: all); window-ops-napi.cc. */
  windowAttention(out: Float32Array, q: Float32Array, pages: Bytes, layers: number, kvHeads: number, headDim: number,
    kvDtype: number, layer: number, heads: number, scale: number, window: number, tables: Int32Array, segments: Int32Array,
    sinks?: Float32Array): void;
  windowAttentionRef(out: Float32Array, q: Float32Array, pages: Bytes, layers: number, kvHeads: number, headDim: number,
    kvDtype: number, layer: number, heads: number, scale: number, window: number, tables: Int32Array, segments: Int32Array,
    sinks?: Float32Array): void;
  /** deepseek4 attention of T tokens over their selected keys (src/ops/dsv4-sparse-attention.h; dsv4-napi.cc). */
  dsv4SparseAttention(out: Float32Array, q: Float32Array, keys: Float32Array, idx: Int32Array, off: Int32Array, sinks: Float32Array,
    T: number, H: number, D: number, scale: number): void;
  dsv4SparseAttentionRef(out: Float32Array, q: Float32Array, keys: Float32Array, idx: Int32Array, off: Int32Array, sinks: Float32Array,
    T: number, H: number, D: number, scale: number): void;
  /** ggml's activation quantization as f32 (src/ops/act-roundtrip.h): kind 0 q8_0, 1 q8_K. */
  actRoundTrip(out: Float32Array, x: Float32Array, kind: number): void;
  /** deepseek4 hyper-connections (src/ops/dsv4-hc.h). */
  dsv4HcCollapse(X: Float32Array, H: Float32Array, pre: Float32Array, T: number, hc: number, d: number): void;
  dsv4HcExpand(out: Float32Array, Y: Float32Array, H: Float32Array, post: Float32Array, comb: Float32Array, T: number, hc: number, d: number): void;
  /** deepseek4 lightning indexer: each token's top-k keys (src/ops/dsv4-indexer.h; dsv4-napi.cc). */
  dsv4IndexerTopK(sel: Int32Array, q: Float32Array, w: Float32Array, keys: Float32Array, n: Int32Array, T: number, H: number, D: number, k: number, scale: number): void;
  dsv4IndexerTopKRef(sel: Int32Array, q: Float32Array, w: Float32Array, keys: Float32Array, n: Int32Array, T: number, H: number, D: number, k: number, scale: number): void;
  /** deepseek4 row ops (src/dsv4-rows-napi.cc; shapes in src/ops/dsv4-rmsnorm.h, dsv4-hc-weights.h, dsv4-swiglu.h, dsv4-moe-combine.h). */
  dsv4RmsNormRows(out: Float32Array, x: Float32Array, w: Float32Array, T: number, n: number, eps: number): void;
  dsv4RmsNormRowsRef(out: Float32Array, x: Float32Array, w: Float32Array, T: number, n: number, eps: number): void;
  dsv4HcWeights(pre: Float32Array, post: Float32Array, comb: Float32Array, mixes: Float32Array, scale: Float32Array, base: Float32Array,
    T: number, hc: number, eps: number, iters: number, withComb: boolean): void;
  dsv4HcWeightsRef(pre: Float32Array, post: Float32Array, comb: Float32Array, mixes: Float32Array, scale: Float32Array, base: Float32Array,
    T: number, hc: number, eps: number, iters: number, withComb: boolean): void;
  dsv4SwigluClamp(out: Float32Array, g: Float32Array, u: Float32Array, n: number, limit: number): void;
  dsv4SwigluClampRef(out: Float32Array, g: Float32Array, u: Float32Array, n: number, limit: number): void;
  dsv4MoeCombine(out: Float32Array, y: Float32Array, w: Float32Array, sy: Float32Array, T: number, K: number, d: number): void;
  dsv4MoeCombineRef(out: Float32Array, y: Float32Array, w: Float32Array, sy: Float32Array, T: number, K: number, d: number): void;
  /** out[n] = gelu(gate) · up with ggml's f16 GELU table. */
  geglu(out: Float32Array, gate: Float32Array, up: Float32Array, n: number): void;
  gegluRef(out: Float32Array, gate: Float32Array, up: Float32Array, n: number): void;
  /** out[n] = x[n] · s. */
  scale(out: Float32Array, x: Float32Array, s: number, n: number): void;
  scaleRef(out: Float32Array, x: Float32Array, s: number, n: number): void;
  dequantize(dst: Float32Array, src: Bytes, dtype: number, count: number): void;
  quantize(dst: Bytes, src: Float32Array, dtype: number, count: number): void;
  /** KV block codecs (src/ops/kv-codec.h): codec 1 int8, 2 fp8, 3 int4; dtype 0 f32, 1 f16; mla 0|1. */
  kvCodecBytes(codec: number, dtype: number, mla: number, layers: number, kvHeads: number, headDim: number, tokens: number): number;
  kvEncode(dst: Uint8Array, src: Uint8Array, codec: number, dtype: number, mla: number, layers: number, kvHeads: number, headDim: number, tokens: number): boolean;
  kvDecode(dst: Uint8Array, src: Uint8Array, codec: number, dtype: number, mla: number, layers: number, kvHeads: number, headDim: number, tokens: number): void;
  kvDecodeRef(dst: Uint8Array, src: Uint8Array, codec: number, dtype: number, mla: number, layers: number, kvHeads: number, headDim: number, tokens: number): void;
  /**
   * One draw at temperature 1/invTemp over the ids `mask` allows (null: all), after top-k (0: off) and top-p (1: off);
   * u = uHi·2^32 + uLo uniform. The law: src/ops/sample-masked.h. → token id, or -1 when no id below logits.length is allowed.
   */
  sampleMasked(logits: Float32Array, mask: Uint32Array | null, invTemp: number, topK: number, topP: number, uHi: number, uLo: number): number;
  sampleMaskedRef(logits: Float32Array, mask: Uint32Array | null, invTemp: number, topK: number, topP: number, uHi: number, uLo: number): number;
  /** XXH64 of the bytes where they are (src/xxh64-napi.cc); kvtier's block checksums. */
  xxh64(bytes: Uint8Array, seed: bigint): bigint;
  /** kvtier's prefix chain of `blockCount` blocks into `out` (16 bytes a block: XXH64 under seedHi, then seedLo, big-endian), src/xxh64-napi.cc. */
  xxh64Chain(root: Uint8Array, tokens: Uint32Array, blockTokens: number, blockCount: number, seedHi: bigint, seedLo: bigint, out: Uint8Array): void;
  /**
   * AES-256-GCM decryption of `data` in place on libuv's thread pool (src/aes-gcm-napi.cc: 512-bit VAES code, or OpenSSL EVP from the node binary; see aesGcmOpenPath).
   * true = the tag verified; false = it did not and `data` is zeroed. Do not touch `data` until it settles.
   */
  aesGcmOpenInPlace(data: Uint8Array, key: Uint8Array, nonce: Uint8Array, aad: Uint8Array, tag: Uint8Array): Promise<boolean>;
  /** aesGcmOpenInPlace on the calling thread (same result, same zeroing on a failed tag). */
  aesGcmOpenInPlaceSync(data: Uint8Array, key: Uint8Array, nonce: Uint8Array, aad: Uint8Array, tag: Uint8Array): boolean;
  /**
   * Reads data.length bytes of `fd` into `data` in 64 KiB pieces and decrypts each piece's ciphertext as it lands
   * (src/aes-gcm-read-napi.cc): blob = header [0, headerBytes) ‖ ciphertext ‖ tag(16), nonce at header[nonceOffset, +12),
   * AAD = header ‖ aadSuffix. 1 = header starts with expectPrefix and the tag verified (plaintext in place);
   * 0 = the tag failed (ciphertext range zeroed); 2 = no prefix match (data holds the file as stored).
   * Rejects with code EIO/ESHORTREAD/… on a failed read; the fd stays open.
   */
  aesGcmReadOpen(fd: number, data: Uint8Array, key: Uint8Array, expectPrefix: Uint8Array, nonceOffset: number, headerBytes: number, aadSuffix: Uint8Array): Promise<0 | 1 | 2>;
  /**
   * Atomic file writes in one pool job (src/fs-batch-napi.cc): each data to its
   * temp name (O_EXCL, shard directories made on ENOENT), renamed to its final
   * name; one errno per file (0 = done). The fs block store's batched puts.
   */
  writeFilesAtomic?(finals: string[], temps: string[], datas: Uint8Array[], fsync: boolean): Promise<Int32Array>;
  /** Which implementation the opens above run now: 512-bit VAES (CPU has it and the kernel ISA is avx512) or OpenSSL's EVP. */
  aesGcmOpenPath(): 'vaes-avx512' | 'openssl';
}
