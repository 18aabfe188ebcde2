/**
 * The CPU backend's handles (plain native-allocated buffers the addon reads
 * and writes) and the flat segment layout its attention entry points take.
 */
import type { NativeAddon } from './addon-types.ts';
import { GGML_TYPE, type AttentionSegment, type KvDType, type KvPoolHandle, type TensorHandle, type WeightDType, type WeightHandle } from './backend.ts';

export class CpuTensor implements TensorHandle {
  readonly kind = 'tensor' as const;
  constructor(public data: Float32Array) {}
  get length(): number {
    return this.data.length;
  }
}

export class CpuWeight implements WeightHandle {
  readonly kind = 'weight' as const;
  packed: ArrayBuffer | null = null;
  private gainCache: Float32Array | null = null;
  constructor(
    readonly dtype: WeightDType,
    readonly rows: number,
    readonly cols: number,
    public gguf: Uint8Array,
  ) {}
  get ggmlType(): number {
    return GGML_TYPE[this.dtype];
  }
  /** The weight as f32 values (norm gains: [1][dim]). */
  asF32(addon: NativeAddon): Float32Array {
    if (!this.gainCache) {
      const n = this.rows * this.cols;
      if (this.dtype === 'f32' && this.gguf.byteOffset % 4 === 0) {
        this.gainCache = new Float32Array(this.gguf.buffer, this.gguf.byteOffset, n);
      } else {
        this.gainCache = new Float32Array(n);
        addon.dequantize(this.gainCache, this.gguf, this.ggmlType, n);
      }
    }
    return this.gainCache;
  }
}

export class CpuKvPool implements KvPoolHandle {
  readonly kind = 'kvpool' as const;
  constructor(
    readonly layers: number,
    readonly kvHeads: number,
    readonly headDim: number,
    readonly pages: number,
    readonly dtype: KvDType,
    readonly pageBytes: number,
    public bytes: Uint8Array,
    /** MLA latent pages (page[layer][64][width], width = headDim) instead of K|V per head. */
    readonly latent = false,
  ) {}
  get kvType(): number {
    return this.dtype === 'f32' ? 0 : 1;
  }
}

/** Flattens segments for the addon: tables back to back + [offset, length, pos0, queries] each. */
export function packSegments(segments: AttentionSegment[]): { tables: Int32Array; segs: Int32Array } {
  let total = 0;
  for (const s of segments) total += s.blockTable.length;
  const tables = new Int32Array(total);
  const segs = new Int32Array(segments.length * 4);
  let off = 0;
  segments.forEach((s, i) => {
    tables.set(s.blockTable, off);
    segs[i * 4] = off;
    segs[i * 4 + 1] = s.blockTable.length;
    segs[i * 4 + 2] = s.pos0;
    segs[i * 4 + 3] = s.queries;
    off += s.blockTable.length;
  });
  return { tables, segs };
}
