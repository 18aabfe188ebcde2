/**
 * The deepseek4 forward's mat-vecs on the native CPU kernels (the llama path's
 * packed matmul with ggml's activation quantization, threaded): the fast twin of
 * Deepseek4Weights.mv's TypeScript loop, which stays the reference.
 *
 *   mv(name, rows [rowOff, rowOff+nOut) of W[·][nIn], x[xOff, xOff+nIn)) → out[nOut]
 *   mm(name, rows [rowOff, rowOff+nOut) of W[·][nIn], X[m][nIn])          → out[m][nOut]
 *
 * mm is one native mat-mul over m rows (a prefill's tokens, or the tokens routed
 * to one expert); the kernel computes every output element in one fixed order
 * whatever m is (native/backend.ts), so mm over m rows is bit-identical to m mv calls.
 *
 * Each (tensor, row range) is uploaded once as its own weight handle from the
 * GGUF bytes (an expert's rows of a 3D tensor, a group's rows of attn_output_a),
 * so only the chosen experts are ever multiplied. A type the native kernels do
 * not compute (MXFP4) answers null and the caller uses the reference loop.
 * Results differ from the reference by f32 summation order only
 * (test/inference-core/deepseek4-native.test.ts states the tolerance).
 */
import { CpuBackend, CpuTensor, dsv4IndexerTopK, dsv4SparseAttention, type Backend, type TensorHandle, type WeightHandle } from '../../native/index.ts';
import { GgmlType, type GgufFile } from '../gguf/index.ts';
import { engineWeightDType } from './model-weights.ts';

export class Deepseek4NativeMatVec {
  private readonly handles = new Map<string, WeightHandle | null>();
  private x: TensorHandle;
  private out: TensorHandle;
  private cap = { x: 0, out: 0 };
  /** Mat-vecs run natively / by the reference loop (tests, bench). */
  readonly calls = { native: 0, reference: 0 };

  constructor(
    private readonly backend: Backend,
    private readonly gguf: GgufFile,
  ) {
    this.x = backend.alloc(1);
    this.out = backend.alloc(1);
  }

  mv(name: string, nIn: number, nOut: number, x: Float32Array, xOff: number, out: Float32Array, rowOff: number): Float32Array | null {
    return this.mm(name, nIn, nOut, x.subarray(xOff, xOff + nIn), 1, out, rowOff);
  }

  mm(name: string, nIn: number, nOut: number, x: Float32Array, m: number, out: Float32Array, rowOff: number): Float32Array | null {
    const w = this.handle(name, nIn, nOut, rowOff);
    if (w === null) {
      this.calls.reference++;
      return null;
    }
    this.calls.native++;
    const b = this.backend;
    const nx = m * nIn;
    const no = m * nOut;
    if (b instanceof CpuBackend) {
      // the cpu backend's tensors are plain Float32Arrays: the kernel reads the caller's rows and writes
      // its output in place (a copy in and a copy out per mat-mul were ~6 % of a prefill, all on the
      // calling thread). Nothing here aliases: every caller's out is its own array.
      if (out.length < no) throw new RangeError(`deepseek4 mm ${name}: out holds ${out.length} floats, needs ${no}`);
      b.matmul(new CpuTensor(out.subarray(0, no)), new CpuTensor(x.subarray(0, nx)), w, m);
      return out;
    }
    if (nx > this.cap.x) {
      b.free(this.x);
      this.x = b.alloc(nx);
      this.cap.x = nx;
    }
    if (no > this.cap.out) {
      b.free(this.out);
      this.out = b.alloc(no);
      this.cap.out = no;
    }
    const xv = b.view(this.x, 0, nx);
    const ov = b.view(this.out, 0, no);
    b.write(xv, x.subarray(0, nx));
    b.matmul(ov, xv, w, m);
    return b.read(ov, out);
  }

  /**
   * Uploads and packs now every weight range the forward multiplies (each
   * expert's rows of a 3D tensor, each group's rows of attn_output_a, other
   * matrices whole), as llama.cpp repacks at load: otherwise the first
   * prompt that routes to an expert pays its packing (a third of a first
   * 512-token prefill's CPU time). Blocks ≥ `layers` (the MTP block) only when
   * `withMtp`. Packing is by a one-row product of zeros (the backend packs on
   * first matmul).
   */
  preload(layers: number, withMtp: boolean, oGroupRows: number): void {
    for (const [name, t] of this.gguf.tensors) {
      if (t.dims.length < 2 || t.type === GgmlType.I32 || name === 'token_embd.weight') continue;
      const blk = /^blk\.(\d+)\./.exec(name);
      if (blk && Number(blk[1]) >= layers && !withMtp) continue;
      const nIn = t.dims[0]!;
      const rows = t.elements / nIn;
      // a 3D expert tensor is [nIn][rows per expert][experts]; attn_output_a is multiplied per group
      const part = t.dims.length === 3 ? t.dims[1]! : name.endsWith('.attn_output_a.weight') ? oGroupRows : rows;
      for (let rowOff = 0; rowOff < rows; rowOff += part) {
        const w = this.handle(name, nIn, part, rowOff);
        if (w) this.mm(name, nIn, part, new Float32Array(nIn), 1, new Float32Array(part), rowOff);
      }
    }
  }

  /** Weight handles uploaded so far (tests: a forward after preload() adds none). */
  get handleCount(): number {
    return this.handles.size;
  }

  /**
   * The layer's attention of T tokens on the native kernel: keys is a pool of
   * distinct key vectors, token t attends keys[idx[off[t]..off[t+1])] (shapes:
   * native/src/ops/dsv4-sparse-attention.h). Same arithmetic as the reference
   * attendOne (deepseek4-attention.ts) but for exp's last bit.
   */
  attend(out: Float32Array, q: Float32Array, keys: Float32Array, idx: Int32Array, off: Int32Array, sinks: Float32Array, T: number, H: number, D: number, scale: number): void {
    dsv4SparseAttention(out, q, keys, idx, off, sinks, T, H, D, scale);
  }

  /**
   * The lightning indexer's picks of T tokens on the native kernel (shapes:
   * native/src/ops/dsv4-indexer.h): the same scores, bit for bit, and the same
   * heap select as the reference indexerTopK (deepseek4-compressor.ts).
   */
  indexer(sel: Int32Array, q: Float32Array, w: Float32Array, keys: Float32Array, n: Int32Array, T: number, H: number, D: number, k: number, scale: number): void {
    dsv4IndexerTopK(sel, q, w, keys, n, T, H, D, k, scale);
  }

  destroy(): void {
    for (const h of this.handles.values()) if (h) this.backend.free(h);
    this.handles.clear();
    this.backend.free(this.x);
    this.backend.free(this.out);
  }

  private handle(name: string, nIn: number, nOut: number, rowOff: number): WeightHandle | null {
    const key = `${name}:${rowOff}:${nOut}`;
    let w = this.handles.get(key);
    if (w === undefined) {
      w = this.upload(name, nIn, nOut, rowOff);
      this.handles.set(key, w);
    }
    return w;
  }

  private upload(name: string, nIn: number, nOut: number, rowOff: number): WeightHandle | null {
    const t = this.gguf.tensors.get(name);
    if (!t || t.type === GgmlType.I32) return null;
    const dtype = engineWeightDType(t.type);
    if (!dtype || t.dims[0] !== nIn) return null;
    const rowBytes = t.data.byteLength / (t.elements / nIn);
    const bytes = t.data.subarray(rowOff * rowBytes, (rowOff + nOut) * rowBytes);
    return this.backend.uploadWeight(dtype, nOut, nIn, bytes);
  }
}
