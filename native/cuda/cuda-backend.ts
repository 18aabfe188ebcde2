/**
 * CudaBackend: the native/backend.ts seam on a CUDA device.
 *
 *   TensorHandle → a device buffer (or a view into one): [buffer, offset, length] f32
 *   WeightHandle → a weight in the device arena (uploaded once; Q8_0 repacked)
 *   KvPoolHandle → the context's KV page pool, f16 pages laid out
 *                  page[layer][K|V][kvHead][64 tokens][headDim] = one kvtier block
 *
 * Ops are enqueued on the compute stream and return at once; read(),
 * copyFromPage() and sync() wait. copyIntoPage() enqueues the host→device
 * copy on the import stream; the next attention on that layer waits for it,
 * so imports overlap the suffix prefill. Shapes are checked here
 * (KVT_ERR_NATIVE_SHAPE) before anything is enqueued; the addon re-checks
 * every view against its buffer.
 */
import {
  type AttentionSegment,
  type Backend,
  type BackendInfo,
  GGML_TYPE,
  type KvPoolHandle,
  type KvPoolSpec,
  type RopeOptions,
  type TensorHandle,
  type WeightDType,
  type WeightHandle,
} from '../backend.ts';
import { type CudaView, cudaAvailability } from './cuda-addon.ts';
import { CudaContext } from './cuda-context.ts';
import { CudaKvPool, CudaTensor, CudaWeight, needInt, shape } from './cuda-handles.ts';
import { CudaBackendError } from './errors.ts';
import { CUDA_NATIVE_WEIGHT_DTYPES, dequantizeToF16 } from './host-dequantize.ts';

export class CudaBackend implements Backend {
  readonly name = 'cuda' as const;
  #pool: CudaKvPool | null = null;
  #freedWeights = new WeakSet<CudaWeight>();

  private constructor(readonly context: CudaContext) {}

  /** Opens CUDA device `device`; KVT_ERR_NATIVE_CUDA_UNAVAILABLE says why when it cannot. */
  static open(device = 0, availability = cudaAvailability()): CudaBackend {
    return new CudaBackend(CudaContext.open(device, availability));
  }

  info(): BackendInfo {
    const i = this.context.info;
    return { name: 'cuda', isa: i.name, isasAvailable: [`sm_${i.computeCapability}`], threads: i.smCount };
  }

  // ---- memory ---------------------------------------------------------------
  alloc(length: number): TensorHandle {
    needInt('tensor length', length);
    return new CudaTensor(length, this.context.buffer(length * 4), 0, true);
  }

  view(t: TensorHandle, offset: number, length: number): TensorHandle {
    const src = this.tensor(t, 'view source');
    needInt('view offset', offset, 0);
    needInt('view length', length);
    if (offset + length > src.length) {
      throw shape(`view [${offset}, ${offset + length}) runs past a tensor of ${src.length} elements`);
    }
    return new CudaTensor(length, src.buffer, src.offset + offset, false);
  }

  write(dst: TensorHandle, src: Float32Array, offset = 0): void {
    const d = this.tensor(dst, 'write target');
    if (offset < 0 || offset + src.length > d.length) {
      throw shape(`write of ${src.length} elements at ${offset} runs past a tensor of ${d.length}`);
    }
    this.context.write(d.buffer, src, (d.offset + offset) * 4);
  }

  read(src: TensorHandle, into?: Float32Array): Float32Array {
    const s = this.tensor(src, 'read source');
    const out = into ?? new Float32Array(s.length);
    if (out.length !== s.length) throw shape(`read into ${out.length} elements from a tensor of ${s.length}`);
    return this.context.read(s.buffer, out, s.offset * 4);
  }

  uploadWeight(dtype: WeightDType, rows: number, cols: number, bytes: Uint8Array): WeightHandle {
    needInt('weight rows', rows);
    needInt('weight cols', cols);
    if (!(dtype in GGML_TYPE)) throw shape(`unknown weight dtype ${dtype}`);
    // no CUDA kernel for the type: dequantize on the host, upload as f16 (host-dequantize.ts)
    if (!CUDA_NATIVE_WEIGHT_DTYPES.has(dtype)) return this.uploadWeight('f16', rows, cols, dequantizeToF16(dtype, rows, cols, bytes));
    const n = rows * cols;
    const want = dtype === 'f32' ? n * 4 : dtype === 'q8_0' ? (n / 32) * 34 : n * 2;
    if (dtype === 'q8_0' && cols % 32 !== 0) throw shape(`q8_0 weight cols (${cols}) must be a multiple of 32`);
    if (bytes.byteLength !== want) {
      throw shape(`${dtype} weight [${rows}][${cols}] needs ${want} bytes, got ${bytes.byteLength}`);
    }
    const id = this.context.uploadWeight(GGML_TYPE[dtype] as 0 | 1 | 8 | 30, rows, cols, bytes);
    return new CudaWeight(dtype, rows, cols, id);
  }

  createKvPool(spec: KvPoolSpec): KvPoolHandle {
    const dtype = spec.dtype ?? 'f16';
    if (dtype !== 'f16') {
      throw new CudaBackendError(
        'KVT_ERR_NATIVE_CUDA_UNSUPPORTED',
        `KV pool dtype ${dtype} is not supported on CUDA: use f16 (the kvtier block format default)`,
      );
    }
    if (this.#pool) {
      throw new CudaBackendError(
        'KVT_ERR_NATIVE_CUDA_UNSUPPORTED',
        'one KV pool per CUDA backend: free() the current pool before creating another',
      );
    }
    needInt('pool layers', spec.layers);
    needInt('pool kvHeads', spec.kvHeads);
    needInt('pool headDim', spec.headDim);
    needInt('pool pages', spec.pages);
    const pageBytes = this.context.createKvPool(spec);
    this.#pool = new CudaKvPool(spec.layers, spec.kvHeads, spec.headDim, spec.pages, pageBytes);
    return this.#pool;
  }

  copyIntoPage(pool: KvPoolHandle, page: number, src: Uint8Array): void {
    const p = this.pool(pool);
    p.checkPage(page);
    if (src.byteLength !== p.pageBytes) throw shape(`page import needs ${p.pageBytes} bytes, got ${src.byteLength}`);
    this.context.importBlocks(Int32Array.of(page), src, p.pageBytes);
  }

  copyFromPage(pool: KvPoolHandle, page: number, into?: Uint8Array): Uint8Array {
    const p = this.pool(pool);
    p.checkPage(page);
    const out = into ?? new Uint8Array(p.pageBytes);
    if (out.byteLength !== p.pageBytes) throw shape(`page export needs ${p.pageBytes} bytes, got ${out.byteLength}`);
    this.context.awaitExport(this.context.exportBlocks(Int32Array.of(page), out, p.pageBytes));
    return out;
  }

  free(h: TensorHandle | WeightHandle | KvPoolHandle): void {
    if (h instanceof CudaTensor) {
      if (h.owner) this.context.freeBuffer(h.buffer);
    } else if (h instanceof CudaWeight) {
      // Weights live in the arena (uploaded once, freed with the backend).
      this.#freedWeights.add(h);
    } else if (h instanceof CudaKvPool && h === this.#pool) {
      this.context.freeKvPool();
      this.#pool = null;
    }
  }

  // ---- ops ------------------------------------------------------------------
  matmul(out: TensorHandle, x: TensorHandle, w: WeightHandle, m: number): void {
    const cw = this.weight(w);
    needInt('matmul m', m);
    this.fits(out, m * cw.rows, 'matmul out');
    this.fits(x, m * cw.cols, 'matmul x');
    this.context.matmul(this.v(out), this.v(x), cw.id, m);
  }

  rmsNorm(out: TensorHandle, x: TensorHandle, gain: WeightHandle, rows: number, dim: number, eps: number): void {
    const g = this.weight(gain);
    if (g.dtype !== 'f32' || g.rows !== 1 || g.cols !== dim) throw shape(`rmsNorm gain must be f32 [1][${dim}]`);
    needInt('rmsNorm rows', rows);
    this.fits(out, rows * dim, 'rmsNorm out');
    this.fits(x, rows * dim, 'rmsNorm x');
    this.context.rmsnorm(this.v(out), this.v(x), g.id, rows, eps);
  }

  rope(x: TensorHandle, positions: Int32Array, rows: number, heads: number, headDim: number, opts: RopeOptions): void {
    needInt('rope rows', rows);
    needInt('rope heads', heads);
    needInt('rope headDim', headDim);
    const rot = opts.rotDims ?? headDim;
    if (rot % 2 !== 0 || rot > headDim || rot <= 0) throw shape(`rope rotDims ${rot} must be even and ≤ headDim ${headDim}`);
    if (positions.length < rows) throw shape(`rope needs ${rows} positions, got ${positions.length}`);
    this.fits(x, rows * heads * headDim, 'rope x');
    const sc = opts.scaling;
    if (opts.freqFactors || (sc && (sc.freqScale !== 1 || sc.extFactor !== 0 || sc.attnFactor !== 1))) {
      // The device kernel computes plain RoPE only; frequency factors and
      // linear/YaRN scaling run on the CPU backend (KVTIER_DEVICE=cpu).
      throw new CudaBackendError('KVT_ERR_NATIVE_CUDA_UNSUPPORTED', 'rope: frequency factors and linear/YaRN rope scaling are not implemented on CUDA yet; run this model with KVTIER_DEVICE=cpu');
    }
    this.context.rope(this.v(x), positions, rows, heads, headDim, rot, opts.freqBase, opts.mode === 'neox' ? 2 : 0);
  }

  softmax(x: TensorHandle, rows: number, cols: number): void {
    needInt('softmax rows', rows);
    needInt('softmax cols', cols);
    this.fits(x, rows * cols, 'softmax x');
    this.context.softmax(this.v(x), rows, cols);
  }

  swiglu(out: TensorHandle, gate: TensorHandle, up: TensorHandle, n: number): void {
    needInt('swiglu n', n);
    this.fits(out, n, 'swiglu out');
    this.fits(gate, n, 'swiglu gate');
    this.fits(up, n, 'swiglu up');
    this.context.swiglu(this.v(out), this.v(gate), this.v(up), n);
  }

  add(out: TensorHandle, a: TensorHandle, b: TensorHandle, n: number): void {
    needInt('add n', n);
    this.fits(out, n, 'add out');
    this.fits(a, n, 'add a');
    this.fits(b, n, 'add b');
    this.context.add(this.v(out), this.v(a), this.v(b), n);
  }

  embed(out: TensorHandle, table: WeightHandle, tokens: Int32Array): void {
    const t = this.weight(table);
    if (tokens.length === 0) throw shape('embed needs at least one token');
    this.fits(out, tokens.length * t.cols, 'embed out');
    for (const id of tokens) {
      if (id < 0 || id >= t.rows) throw shape(`token id ${id} outside the embedding table of ${t.rows} rows`);
    }
    this.context.embed(this.v(out), t.id, tokens);
  }

  kvWrite(pool: KvPoolHandle, layer: number, blockTable: Int32Array, pos0: number, n: number, k: TensorHandle,
    v: TensorHandle): void {
    const p = this.pool(pool);
    p.checkLayer(layer);
    needInt('kvWrite n', n);
    needInt('kvWrite pos0', pos0, 0);
    p.checkTable(blockTable, pos0 + n);
    this.fits(k, n * p.kvHeads * p.headDim, 'kvWrite k');
    this.fits(v, n * p.kvHeads * p.headDim, 'kvWrite v');
    this.context.kvWrite(layer, blockTable, pos0, n, this.v(k), this.v(v));
  }

  attention(out: TensorHandle, q: TensorHandle, pool: KvPoolHandle, layer: number, heads: number, scale: number,
    segments: AttentionSegment[]): void {
    const p = this.pool(pool);
    p.checkLayer(layer);
    needInt('attention heads', heads);
    if (heads % p.kvHeads !== 0) throw shape(`attention heads ${heads} must be a multiple of kvHeads ${p.kvHeads}`);
    if (segments.length === 0) throw shape('attention needs at least one segment');
    let rows = 0;
    let tableLen = 0;
    for (const s of segments) {
      needInt('segment queries', s.queries);
      needInt('segment pos0', s.pos0, 0);
      p.checkTable(s.blockTable, s.pos0 + s.queries);
      rows += s.queries;
      tableLen += s.blockTable.length;
    }
    this.fits(out, rows * heads * p.headDim, 'attention out');
    this.fits(q, rows * heads * p.headDim, 'attention q');
    const tables = new Int32Array(tableLen);
    const lens = new Int32Array(segments.length);
    const pos0 = new Int32Array(segments.length);
    const queries = new Int32Array(segments.length);
    let at = 0;
    segments.forEach((s, i) => {
      tables.set(s.blockTable, at);
      at += s.blockTable.length;
      lens[i] = s.blockTable.length;
      pos0[i] = s.pos0;
      queries[i] = s.queries;
    });
    this.context.attention(this.v(out), this.v(q), layer, heads, scale, tables, lens, pos0, queries);
  }

  sync(): void {
    this.context.synchronize();
  }

  /** Releases the device context (weights, pool, buffers). */
  close(): void {
    this.#pool = null;
    this.context.close();
  }

  // ---- checks ---------------------------------------------------------------
  private tensor(t: TensorHandle, what: string): CudaTensor {
    if (!(t instanceof CudaTensor)) throw shape(`${what} is not a tensor of this CUDA backend`);
    return t;
  }
  private v(t: TensorHandle): CudaView {
    return this.tensor(t, 'operand').view;
  }
  private fits(t: TensorHandle, elems: number, what: string): void {
    const c = this.tensor(t, what);
    if (elems > c.length) throw shape(`${what} holds ${c.length} elements, the op needs ${elems}`);
  }
  private weight(w: WeightHandle): CudaWeight {
    if (!(w instanceof CudaWeight)) throw shape('weight is not a weight of this CUDA backend');
    if (this.#freedWeights.has(w)) throw shape('weight was freed');
    return w;
  }
  private pool(p: KvPoolHandle): CudaKvPool {
    if (!(p instanceof CudaKvPool) || p !== this.#pool) throw shape('KV pool is not the live pool of this CUDA backend');
    return p;
  }
}

/** Opens the CUDA backend (KVT_ERR_NATIVE_CUDA_UNAVAILABLE with the reason when it cannot). */
export function createCudaBackend(device = 0): CudaBackend {
  return CudaBackend.open(device);
}
