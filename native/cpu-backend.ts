/**
 * The CPU implementation of the Backend seam (backend.ts). Handles wrap
 * plain (64-byte aligned, native-allocated) ArrayBuffers; ops run
 * synchronously on the addon's thread pool when called, so read/sync never wait.
 *
 * Weights: uploadWeight keeps a reference to the caller's GGUF bytes (no
 * copy — typically a view into mmapFile()) for embed and norm gains, and packs
 * the matrix into the kernels' 16-row panel layout on first matmul (so an
 * embedding-only table is never packed). Keep the GGUF mapping alive as long
 * as the weights are in use.
 */
import type { NativeAddon } from './addon-types.ts';
import {
  GGML_TYPE, NativeError, PAGE_TOKENS, WEIGHT_BLOCK,
  type AttentionSegment, type Backend, type BackendInfo, type KvPoolHandle, type KvPoolSpec, type MlaKvPoolSpec,
  type RopeOptions, type TensorHandle, type WeightDType, type WeightHandle,
} from './backend.ts';
import { CpuKvPool, CpuTensor, CpuWeight, packSegments } from './cpu-handles.ts';
import { loadAddon, wrapNativeError } from './load-addon.ts';

function rowBytes(dtype: WeightDType, cols: number): number {
  const b = WEIGHT_BLOCK[dtype];
  return (cols / b.elems) * b.bytes;
}

function shapeError(msg: string): never {
  throw new NativeError('KVT_ERR_NATIVE_SHAPE', msg);
}

function checkInt(name: string, v: number, min = 0): void {
  if (!Number.isInteger(v) || v < min) shapeError(`${name} must be an integer >= ${min}, got ${v}`);
}

export class CpuBackend implements Backend {
  readonly name = 'cpu' as const;
  readonly addon: NativeAddon;

  constructor(addon: NativeAddon = loadAddon()) {
    this.addon = addon;
  }

  info(): BackendInfo {
    const i = this.addon.info();
    return { name: 'cpu', isa: i.isa, isasAvailable: i.isasAvailable, threads: i.threads };
  }

  // ---- memory ----------------------------------------------------------------

  alloc(length: number): TensorHandle {
    checkInt('alloc length', length);
    return new CpuTensor(new Float32Array(this.call(() => this.addon.allocAligned(length * 4)), 0, length));
  }

  view(t: TensorHandle, offset: number, length: number): TensorHandle {
    const d = this.tensor(t, 'view');
    checkInt('view offset', offset);
    checkInt('view length', length);
    if (offset + length > d.length) shapeError(`view [${offset}, ${offset + length}) exceeds tensor length ${d.length}`);
    return new CpuTensor(d.subarray(offset, offset + length));
  }

  write(dst: TensorHandle, src: Float32Array, offset = 0): void {
    const d = this.tensor(dst, 'write');
    if (offset < 0 || offset + src.length > d.length) shapeError(`write of ${src.length} at ${offset} exceeds tensor length ${d.length}`);
    d.set(src, offset);
  }

  read(src: TensorHandle, into?: Float32Array): Float32Array {
    const d = this.tensor(src, 'read');
    if (!into) return d.slice();
    if (into.length < d.length) shapeError(`read: destination holds ${into.length} floats, tensor has ${d.length}`);
    into.set(d);
    return into;
  }

  uploadWeight(dtype: WeightDType, rows: number, cols: number, bytes: Uint8Array): WeightHandle {
    if (!(dtype in GGML_TYPE)) throw new NativeError('KVT_ERR_NATIVE_DTYPE', `weight dtype ${dtype}: use one of ${Object.keys(GGML_TYPE).join(', ')}`);
    checkInt('weight rows', rows, 1);
    checkInt('weight cols', cols, 1);
    const block = WEIGHT_BLOCK[dtype].elems;
    if (cols % block !== 0) shapeError(`${dtype} weight needs cols % ${block} == 0, got ${cols}`);
    const want = rowBytes(dtype, cols) * rows;
    if (bytes.byteLength < want) shapeError(`weight [${rows}][${cols}] ${dtype} needs ${want} bytes, got ${bytes.byteLength}`);
    return new CpuWeight(dtype, rows, cols, bytes.subarray(0, want));
  }

  createKvPool(spec: KvPoolSpec): KvPoolHandle {
    const dtype = spec.dtype ?? 'f16';
    if (dtype !== 'f16' && dtype !== 'f32') throw new NativeError('KVT_ERR_NATIVE_DTYPE', `kv dtype ${dtype}: use f16 or f32`);
    checkInt('layers', spec.layers, 1);
    checkInt('kvHeads', spec.kvHeads, 1);
    checkInt('headDim', spec.headDim, 1);
    checkInt('pages', spec.pages, 1);
    if (spec.headDim > 256) shapeError(`headDim ${spec.headDim} > 256 is not supported`);
    const pageBytes = spec.layers * 2 * spec.kvHeads * PAGE_TOKENS * spec.headDim * (dtype === 'f32' ? 4 : 2);
    const buf = this.call(() => this.addon.allocAligned(pageBytes * spec.pages));
    return new CpuKvPool(spec.layers, spec.kvHeads, spec.headDim, spec.pages, dtype, pageBytes, new Uint8Array(buf));
  }

  createMlaKvPool(spec: MlaKvPoolSpec): KvPoolHandle {
    const dtype = spec.dtype ?? 'f16';
    if (dtype !== 'f16' && dtype !== 'f32') throw new NativeError('KVT_ERR_NATIVE_DTYPE', `kv dtype ${dtype}: use f16 or f32`);
    checkInt('layers', spec.layers, 1);
    checkInt('width', spec.width, 1);
    checkInt('pages', spec.pages, 1);
    if (spec.width > 4096) shapeError(`MLA latent width ${spec.width} > 4096 is not supported`);
    const pageBytes = spec.layers * PAGE_TOKENS * spec.width * (dtype === 'f32' ? 4 : 2);
    const buf = this.call(() => this.addon.allocAligned(pageBytes * spec.pages));
    return new CpuKvPool(spec.layers, 1, spec.width, spec.pages, dtype, pageBytes, new Uint8Array(buf), true);
  }

  mlaKvWrite(pool: KvPoolHandle, layer: number, blockTable: Int32Array, pos0: number, n: number, latent: TensorHandle): void {
    const p = this.latentPool(pool);
    const l = this.tensor(latent, 'mlaKvWrite latent');
    this.call(() => this.addon.mlaKvWrite(p.bytes, p.layers, p.headDim, p.kvType, layer, blockTable, pos0, n, l));
  }

  mlaAttention(out: TensorHandle, q: TensorHandle, pool: KvPoolHandle, layer: number, heads: number, vDim: number,
    scale: number, segments: AttentionSegment[]): void {
    const p = this.latentPool(pool);
    const o = this.tensor(out, 'mlaAttention out');
    const qd = this.tensor(q, 'mlaAttention q');
    const { tables, segs } = packSegments(segments);
    this.call(() => this.addon.mlaAttention(o, qd, p.bytes, p.layers, p.headDim, p.kvType, layer, heads, vDim, scale, tables, segs));
  }

  copyIntoPage(pool: KvPoolHandle, page: number, src: Uint8Array): void {
    const p = this.pool(pool);
    this.checkPage(p, page);
    if (src.byteLength !== p.pageBytes) shapeError(`copyIntoPage: block payload is ${src.byteLength} bytes, a page is ${p.pageBytes}`);
    p.bytes.set(src, page * p.pageBytes);
  }

  copyFromPage(pool: KvPoolHandle, page: number, into?: Uint8Array): Uint8Array {
    const p = this.pool(pool);
    this.checkPage(p, page);
    const view = p.bytes.subarray(page * p.pageBytes, (page + 1) * p.pageBytes);
    if (!into) return view.slice();
    if (into.byteLength < p.pageBytes) shapeError(`copyFromPage: destination holds ${into.byteLength} bytes, a page is ${p.pageBytes}`);
    into.set(view);
    return into;
  }

  /** CPU only: the page's bytes in place (no copy). Valid until the pool is freed. */
  pageView(pool: KvPoolHandle, page: number): Uint8Array {
    const p = this.pool(pool);
    this.checkPage(p, page);
    return p.bytes.subarray(page * p.pageBytes, (page + 1) * p.pageBytes);
  }

  free(h: TensorHandle | WeightHandle | KvPoolHandle): void {
    // Native memory goes back when the ArrayBuffer is collected; dropping the
    // references here makes that happen at the next GC and turns use-after-free into an error.
    if (h instanceof CpuTensor) h.data = new Float32Array(0);
    else if (h instanceof CpuWeight) {
      h.packed = null;
      h.gguf = new Uint8Array(0);
    } else if (h instanceof CpuKvPool) h.bytes = new Uint8Array(0);
  }

  // ---- ops ---------------------------------------------------------------------

  matmul(out: TensorHandle, x: TensorHandle, w: WeightHandle, m: number): void {
    const wt = this.weight(w);
    checkInt('m', m);
    const o = this.tensor(out, 'matmul out');
    const xd = this.tensor(x, 'matmul x');
    if (xd.length < m * wt.cols) shapeError(`matmul: x has ${xd.length} floats, needs m*cols = ${m}*${wt.cols}`);
    if (o.length < m * wt.rows) shapeError(`matmul: out has ${o.length} floats, needs m*rows = ${m}*${wt.rows}`);
    if (!wt.packed) wt.packed = this.call(() => this.addon.packWeight(wt.ggmlType, wt.rows, wt.cols, wt.gguf));
    const packed = wt.packed;
    this.call(() => this.addon.matmul(o, xd, packed, wt.ggmlType, wt.rows, wt.cols, m));
  }

  rmsNorm(out: TensorHandle, x: TensorHandle, gain: WeightHandle, rows: number, dim: number, eps: number): void {
    const g = this.weight(gain);
    if (g.rows * g.cols !== dim) shapeError(`rmsNorm: gain has ${g.rows * g.cols} values, dim is ${dim}`);
    const gv = g.asF32(this.addon);
    const o = this.tensor(out, 'rmsNorm out');
    const xd = this.tensor(x, 'rmsNorm x');
    this.call(() => this.addon.rmsNorm(o, xd, gv, rows, dim, eps));
  }

  rope(x: TensorHandle, positions: Int32Array, rows: number, heads: number, headDim: number, opts: RopeOptions): void {
    const xd = this.tensor(x, 'rope x');
    const mode = opts.mode === 'neox' ? 2 : opts.mode === 'normal' ? 0 : shapeError(`rope mode ${opts.mode}: use normal or neox`);
    const s = opts.scaling;
    const scaling = s ? Float32Array.of(s.freqScale, s.extFactor, s.attnFactor, s.betaFast, s.betaSlow, s.nCtxOrig) : null;
    this.call(() => this.addon.rope(xd, positions, rows, heads, headDim, opts.rotDims ?? headDim, mode, opts.freqBase, scaling, opts.freqFactors ?? null));
  }

  softmax(x: TensorHandle, rows: number, cols: number): void {
    const xd = this.tensor(x, 'softmax x');
    this.call(() => this.addon.softmax(xd, rows, cols));
  }

  swiglu(out: TensorHandle, gate: TensorHandle, up: TensorHandle, n: number): void {
    const o = this.tensor(out, 'swiglu out');
    const g = this.tensor(gate, 'swiglu gate');
    const u = this.tensor(up, 'swiglu up');
    this.call(() => this.addon.swiglu(o, g, u, n));
  }

  add(out: TensorHandle, a: TensorHandle, b: TensorHandle, n: number): void {
    const o = this.tensor(out, 'add out');
    const ad = this.tensor(a, 'add a');
    const bd = this.tensor(b, 'add b');
    this.call(() => this.addon.add(o, ad, bd, n));
  }

  embed(out: TensorHandle, table: WeightHandle, tokens: Int32Array): void {
    const t = this.weight(table);
    const o = this.tensor(out, 'embed out');
    this.call(() => this.addon.embed(o, t.gguf, t.ggmlType, t.rows, t.cols, tokens));
  }

  kvWrite(pool: KvPoolHandle, layer: number, blockTable: Int32Array, pos0: number, n: number,
    k: TensorHandle, v: TensorHandle): void {
    const p = this.mhaPool(pool);
    const kd = this.tensor(k, 'kvWrite k');
    const vd = this.tensor(v, 'kvWrite v');
    this.call(() => this.addon.kvWrite(p.bytes, p.layers, p.kvHeads, p.headDim, p.kvType, layer, blockTable, pos0, n, kd, vd));
  }

  attention(out: TensorHandle, q: TensorHandle, pool: KvPoolHandle, layer: number, heads: number,
    scale: number, segments: AttentionSegment[]): void {
    const p = this.mhaPool(pool);
    const o = this.tensor(out, 'attention out');
    const qd = this.tensor(q, 'attention q');
    const { tables, segs } = packSegments(segments);
    this.call(() => this.addon.attention(o, qd, p.bytes, p.layers, p.kvHeads, p.headDim, p.kvType, layer, heads, scale, tables, segs));
  }

  windowAttention(out: TensorHandle, q: TensorHandle, pool: KvPoolHandle, layer: number, heads: number,
    scale: number, window: number, segments: AttentionSegment[], sinks?: Float32Array): void {
    const p = this.mhaPool(pool);
    const o = this.tensor(out, 'windowAttention out');
    const qd = this.tensor(q, 'windowAttention q');
    const { tables, segs } = packSegments(segments);
    this.call(() => this.addon.windowAttention(o, qd, p.bytes, p.layers, p.kvHeads, p.headDim, p.kvType, layer, heads, scale, window, tables, segs, sinks));
  }

  geglu(out: TensorHandle, gate: TensorHandle, up: TensorHandle, n: number): void {
    const o = this.tensor(out, 'geglu out');
    const g = this.tensor(gate, 'geglu gate');
    const u = this.tensor(up, 'geglu up');
    this.call(() => this.addon.geglu(o, g, u, n));
  }

  scale(out: TensorHandle, x: TensorHandle, s: number, n: number): void {
    const o = this.tensor(out, 'scale out');
    const xd = this.tensor(x, 'scale x');
    this.call(() => this.addon.scale(o, xd, s, n));
  }

  sync(): void {}

  // ---- helpers -------------------------------------------------------------------

  private call<T>(fn: () => T): T {
    try {
      return fn();
    } catch (e) {
      wrapNativeError(e);
    }
  }

  private tensor(t: TensorHandle, what: string): Float32Array {
    if (!(t instanceof CpuTensor)) throw new NativeError('KVT_ERR_NATIVE_HANDLE', `${what}: not a tensor of the cpu backend`);
    return t.data;
  }

  private weight(w: WeightHandle): CpuWeight {
    if (!(w instanceof CpuWeight)) throw new NativeError('KVT_ERR_NATIVE_HANDLE', 'not a weight of the cpu backend');
    return w;
  }

  private pool(p: KvPoolHandle): CpuKvPool {
    if (!(p instanceof CpuKvPool)) throw new NativeError('KVT_ERR_NATIVE_HANDLE', 'not a KV pool of the cpu backend');
    return p;
  }

  private latentPool(p: KvPoolHandle): CpuKvPool {
    const pool = this.pool(p);
    if (!pool.latent) shapeError('MLA ops need a pool from createMlaKvPool');
    return pool;
  }

  private mhaPool(p: KvPoolHandle): CpuKvPool {
    const pool = this.pool(p);
    if (pool.latent) shapeError('kvWrite/attention need a K|V pool from createKvPool, not an MLA latent pool');
    return pool;
  }

  private checkPage(p: CpuKvPool, page: number): void {
    if (!Number.isInteger(page) || page < 0 || page >= p.pages) shapeError(`page ${page} out of range [0, ${p.pages})`);
  }
}
