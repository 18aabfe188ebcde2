/**
 * A CUDA device context: weight arena, KV page pool, tier-path streams and
 * op-level buffers, over the `kvtier_cuda` addon.
 *
 * KV pages are laid out page[layer][K|V][kvHead][64 tokens][headDim] in f16,
 * i.e. exactly a kvtier block's KV payload: `importBlocks` moves cached
 * blocks host→device on the import stream (the next forward waits per layer,
 * so it overlaps), `exportBlocks` moves pages device→host on the export
 * stream without stalling later decode steps.
 */
import { type CudaAddon, type CudaView, cudaAvailability } from './cuda-addon.ts';
import { CudaBackendError, callAddon } from './errors.ts';

/** GGML type ids accepted for weights. */
export const CudaDtype = { F32: 0, F16: 1, Q8_0: 8, BF16: 30 } as const;
export type CudaDtype = (typeof CudaDtype)[keyof typeof CudaDtype];

export const RopeMode = { NORMAL: 0, NEOX: 2 } as const;

export interface CudaLlamaConfig {
  nVocab: number;
  dModel: number;
  nLayer: number;
  nHead: number;
  nKvHead: number;
  headDim: number;
  dFfn: number;
  rmsEps: number;
  ropeBase: number;
  ropeMode: (typeof RopeMode)[keyof typeof RopeMode];
}

export interface KvPoolShape {
  layers: number;
  kvHeads: number;
  headDim: number;
  pages: number;
}

export class CudaModel {
  #closed = false;
  constructor(
    private readonly addon: CudaAddon,
    private readonly handle: unknown,
    readonly config: CudaLlamaConfig,
  ) {}

  /** Binds a weight (from CudaContext.uploadWeight) to a GGUF tensor name. */
  bind(tensorName: string, weightId: number): void {
    this.check();
    callAddon(`bind ${tensorName}`, () => this.addon.modelBind(this.handle, tensorName, weightId));
  }

  /**
   * Runs `tokens` at positions pos0.. of the sequence whose KV pages are
   * `blockTable`; returns the greedy next token(s) and optionally logits
   * ('last': [nVocab], 'all': [tokens.length * nVocab]).
   */
  forward(
    tokens: Int32Array,
    pos0: number,
    blockTable: Int32Array,
    logits: 'none' | 'last' | 'all' = 'none',
  ): { greedy: Int32Array; logits?: Float32Array } {
    this.check();
    return callAddon('forward', () => this.addon.forward(this.handle, tokens, pos0, blockTable, logits));
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.addon.modelDestroy(this.handle);
  }

  private check(): void {
    if (this.#closed) throw new CudaBackendError('KVT_ERR_NATIVE_CUDA_INVALID', 'this CUDA model is closed');
  }
}

export class CudaContext {
  #closed = false;
  #models = new Set<CudaModel>();
  #pageBytes = 0;

  private constructor(
    readonly addon: CudaAddon,
    private readonly handle: unknown,
  ) {}

  /** Opens device `device`; KVT_ERR_NATIVE_CUDA_UNAVAILABLE says why when it cannot. */
  static open(device = 0, availability = cudaAvailability()): CudaContext {
    if (!availability.addon || availability.devices === 0) {
      throw new CudaBackendError('KVT_ERR_NATIVE_NO_CUDA', `CUDA is not usable: ${availability.reason}`);
    }
    const addon = availability.addon;
    return new CudaContext(addon, callAddon('open CUDA device', () => addon.createContext(device)));
  }

  get info(): { name: string; smCount: number; totalBytes: number; computeCapability: number } {
    return this.call('device info', (a, h) => a.deviceInfo(h));
  }

  /** Bytes of one KV page (= one block's KV payload); 0 before createKvPool. */
  get pageBytes(): number {
    return this.#pageBytes;
  }

  get weightBytes(): number {
    return this.call('weight bytes', (a, h) => a.weightBytes(h));
  }

  /** Uploads a tensor in its GGUF layout once; returns its weight id. */
  uploadWeight(dtype: CudaDtype, rows: number, cols: number, data: ArrayBufferView): number {
    return this.call('upload weight', (a, h) => a.uploadWeight(h, dtype, rows, cols, data));
  }

  createKvPool(shape: KvPoolShape): number {
    this.#pageBytes = this.call('create KV pool', (a, h) =>
      a.kvPoolCreate(h, shape.layers, shape.kvHeads, shape.headDim, shape.pages),
    );
    return this.#pageBytes;
  }

  /** Page-locked host memory: the fast staging for importBlocks/exportBlocks. */
  pinned(bytes: number): Uint8Array {
    return new Uint8Array(this.call('pin host memory', (a, h) => a.allocPinned(h, bytes)));
  }

  /**
   * Enqueues block i of `src` (at i*stride) → page pageIds[i]. `src` must stay
   * untouched until awaitImport(); the next forward orders itself after it.
   */
  importBlocks(pageIds: Int32Array, src: Uint8Array, stride = this.#pageBytes): void {
    this.call('import KV blocks', (a, h) => a.kvImport(h, pageIds, src, stride));
  }

  awaitImport(): void {
    this.call('import KV blocks', (a, h) => a.kvImportWait(h));
  }

  /** Enqueues pages → dst (at i*stride) after the compute enqueued so far; returns a ticket. */
  exportBlocks(pageIds: Int32Array, dst: Uint8Array, stride = this.#pageBytes): number {
    return this.call('export KV blocks', (a, h) => a.kvExport(h, pageIds, dst, stride));
  }

  /** Resolves when the export is in `dst`, polling so the event loop keeps running. */
  async exportDone(ticket: number): Promise<void> {
    while (!this.call('export KV blocks', (a, h) => a.kvExportPoll(h, ticket))) {
      await new Promise((resolve) => setTimeout(resolve, 1));
    }
  }

  createModel(config: CudaLlamaConfig): CudaModel {
    const handle = this.call('create model', (a, h) => a.modelCreate(h, { ...config }));
    const model = new CudaModel(this.addon, handle, config);
    this.#models.add(model);
    return model;
  }

  // ---- op level: f32/int32 device buffers and single kernels on views ----
  /** A zero-filled device buffer of `bytes`. */
  buffer(bytes: number): number {
    return this.call('allocate buffer', (a, h) => a.bufferAlloc(h, bytes));
  }
  freeBuffer(id: number): void {
    this.call('free buffer', (a, h) => a.bufferFree(h, id));
  }
  write(id: number, data: ArrayBufferView, offsetBytes = 0): void {
    this.call('write buffer', (a, h) => a.bufferWrite(h, id, offsetBytes, data));
  }
  /** Waits for the ops enqueued so far. */
  read<T extends ArrayBufferView>(id: number, into: T, offsetBytes = 0): T {
    this.call('read buffer', (a, h) => a.bufferRead(h, id, offsetBytes, into));
    return into;
  }
  matmul(y: CudaView, x: CudaView, weight: number, m: number, accumulate = false): void {
    this.call('matmul', (a, h) => a.opMatmul(h, y, x, weight, m, accumulate ? 1 : 0));
  }
  rmsnorm(y: CudaView, x: CudaView, gain: number, rows: number, eps: number): void {
    this.call('rmsnorm', (a, h) => a.opRmsnorm(h, y, x, gain, rows, eps));
  }
  rope(x: CudaView, positions: Int32Array, rows: number, heads: number, headDim: number, rot: number,
    base: number, mode: number): void {
    this.call('rope', (a, h) => a.opRope(h, x, positions, rows, heads, headDim, rot, base, mode));
  }
  swiglu(out: CudaView, gate: CudaView, up: CudaView, n: number): void {
    this.call('swiglu', (a, h) => a.opSwiglu(h, out, gate, up, n));
  }
  add(out: CudaView, x: CudaView, y: CudaView, n: number): void {
    this.call('add', (a, h) => a.opAdd(h, out, x, y, n));
  }
  embed(out: CudaView, tableWeight: number, tokens: Int32Array): void {
    this.call('embed', (a, h) => a.opEmbed(h, out, tableWeight, tokens));
  }
  softmax(x: CudaView, rows: number, n: number): void {
    this.call('softmax', (a, h) => a.opSoftmax(h, x, rows, n));
  }
  argmax(out: CudaView, x: CudaView, rows: number, n: number): void {
    this.call('argmax', (a, h) => a.opArgmax(h, out, x, rows, n));
  }
  kvWrite(layer: number, blockTable: Int32Array, pos0: number, n: number, k: CudaView, v: CudaView): void {
    this.call('kv write', (a, h) => a.opKvWrite(h, layer, blockTable, pos0, n, k, v));
  }
  attention(out: CudaView, q: CudaView, layer: number, heads: number, scale: number, tables: Int32Array,
    tableLens: Int32Array, pos0: Int32Array, queries: Int32Array): void {
    this.call('attention', (a, h) => a.opAttention(h, out, q, layer, heads, scale, tables, tableLens, pos0, queries));
  }
  freeKvPool(): void {
    this.call('free KV pool', (a, h) => a.kvPoolFree(h));
    this.#pageBytes = 0;
  }
  synchronize(): void {
    this.call('synchronize', (a, h) => a.synchronize(h));
  }
  /** Waits for and releases export `ticket` (blocking). */
  awaitExport(ticket: number): void {
    this.call('export KV blocks', (a, h) => a.kvExportWait(h, ticket));
  }

  close(): void {
    if (this.#closed) return;
    for (const m of this.#models) m.close();
    this.#models.clear();
    this.#closed = true;
    this.addon.destroyContext(this.handle);
  }

  private call<T>(what: string, fn: (addon: CudaAddon, handle: unknown) => T): T {
    if (this.#closed) throw new CudaBackendError('KVT_ERR_NATIVE_CUDA_INVALID', `${what}: this CUDA context is closed`);
    return callAddon(what, () => fn(this.addon, this.handle));
  }
}
